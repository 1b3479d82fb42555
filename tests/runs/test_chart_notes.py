"""The clip-fraction note: decided from the run's config (webapp.runs.notes), shown beside the Clip
fraction chart as text, never as a detector event."""

import pytest
import torch

from tests.factories import make_experiment, trained_run
from trainer.config import TrainConfig
from trainer.filter import keep_groups, most_kept
from webapp.runs.notes import single_mini_batch_note


@pytest.mark.parametrize(
    "preset, dotted, noted",
    [
        ("starpo-s", (), True),  # 2 kept groups x 16 = 32 = optim.mini_batch_size
        ("starpo-s", ("optim.updates_per_batch=2",), False),  # the second epoch moves the ratio
        ("starpo-s", ("optim.mini_batch_size=16",), False),  # two mini-batches per step
        ("starpo-s", ("algorithm.filter_ratio=0.5",), False),  # 4 groups x 16 = 64 trajectories
        ("starpo", (), False),  # no filter: 8 x 16 = 128 trajectories
        ("starpo", ("rollout.env_groups=2", "rollout.group_size=8"), True),  # 16 trajectories
        # top_p keeps a varying number of groups: only when all of them fit is the note certain
        ("starpo", ("algorithm.filter=top_p", "rollout.env_groups=4", "rollout.group_size=8"), True),
        ("starpo", ("algorithm.filter=top_p",), False),
    ],
)
def test_note_only_when_every_step_is_one_mini_batch_of_one_epoch(preset, dotted, noted):
    note = single_mini_batch_note(TrainConfig.preset(preset, *dotted))
    assert bool(note) is noted
    if noted:
        assert "single mini-batch" in note and "optim.mini_batch_size" in note


def test_most_kept_bounds_what_the_filter_keeps():
    generator = torch.Generator().manual_seed(0)
    for mode, value in [("top_ratio", 0.25), ("top_ratio", 0.01), ("top_k_abs", 3), ("min_p", 0.5)]:
        for _ in range(20):
            rewards = torch.randint(0, 3, (8, 4), generator=generator).float()
            kept = keep_groups(rewards, mode, value)
            assert len(kept) <= most_kept(8, mode, value)
            if mode != "min_p":  # a fixed count: always reached when every group is a candidate
                assert len(kept) == most_kept(8, mode, value)


def test_run_page_shows_the_note_beside_the_clip_chart(alice, alice_client):
    experiment = make_experiment(alice)
    one_batch = trained_run(experiment, label="seed=1", preset="starpo-s")
    several = trained_run(
        experiment, label="seed=2", preset="starpo-s", overrides={"optim.mini_batch_size": 16}
    )
    html = alice_client.get(f"/runs/{one_batch.pk}/").content.decode()
    figure = html[html.index('id="chart-clip"') : html.index("</figure>", html.index('id="chart-clip"'))]
    assert 'id="chart-note-clip"' in figure
    assert "Always 0 in this run" in figure and "2 of 8 groups kept by the top_ratio filter" in figure
    assert "Always 0 in this run" not in alice_client.get(f"/runs/{several.pk}/").content.decode()


def test_imported_run_gets_no_note(alice, alice_client):
    experiment = make_experiment(alice, imported=True)
    run = trained_run(experiment, preset="starpo-s")
    assert "chart-note-clip" not in alice_client.get(f"/runs/{run.pk}/").content.decode()
