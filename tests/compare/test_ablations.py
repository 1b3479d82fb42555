"""One-click paper ablations: a grid experiment through the same creation path as the form and the API,
then its compare page with the paper's numbers beside ours."""

import contextlib
from html import unescape

import pytest

from tests.factories import points
from trainer.config import TrainConfig
from webapp.compare import ablations
from webapp.experiments import form_inputs, run_planning, spec_parsing, specs
from webapp.experiments.models import Experiment, Run


@pytest.fixture
def forget_queued_messages():
    """The created runs are really enqueued; take the messages back so no worker test gets them."""
    yield
    from worker.celery import app

    # the queue may not exist
    with app.connection_for_write() as connection, contextlib.suppress(Exception):
        connection.default_channel.queue_purge("gpu")


def planned(key, env=None, model="tiny", seeds=(1,)):
    ablation = ablations.ABLATIONS[key]
    return run_planning.plan(
        ablations.build_spec(ablation, env or ablation.default_env, model, list(seeds), None)
    )


def values(runs, dotted):
    from webapp.compare.aggregates import flatten

    return [flatten(run.config)[dotted] for run in runs]


def test_every_ablation_expands_to_valid_runs_varying_its_field():
    assert values(planned("filter-ratio"), "algorithm.filter_ratio") == [0.25, 0.5, 0.75, 1.0]
    assert set(values(planned("filter-ratio"), "algorithm.filter")) == {"top_ratio"}
    assert values(planned("actions-per-turn"), "rollout.max_actions_per_turn") == [1, 2, 3, 4, 5, 6, 7]
    starpo = planned("starpo-vs-starpo-s")
    assert values(starpo, "algorithm.filter") == ["none", "top_ratio"]
    assert values(starpo, "algorithm.kl_coef") == [0.001, 0.0]
    estimators = planned("ppo-vs-grpo")
    assert values(estimators, "algorithm.advantage") == ["ppo", "grpo"]
    for shared in ("algorithm.filter", "algorithm.kl_coef", "algorithm.eps_high", "optim.actor_lr"):
        assert len(set(values(estimators, shared))) == 1, shared


@pytest.mark.parametrize("model", ["tiny", "Qwen/Qwen2.5-0.5B-Instruct"])
def test_responses_per_prompt_keeps_the_batch_fixed(model):
    default = TrainConfig.preset("starpo", model={"name": model}).rollout
    runs = planned("responses-per-prompt", model=model)
    sizes = list(zip(values(runs, "rollout.env_groups"), values(runs, "rollout.group_size")))
    assert [n for _, n in sizes] == [
        n for n in (1, 2, 4, 8, 16) if default.env_groups * default.group_size % n == 0
    ]
    assert len(sizes) >= 4 and {p * n for p, n in sizes} == {default.env_groups * default.group_size}
    assert set(values(runs, "algorithm.filter")) == {"none"}  # N = 1 is invalid with a filter


@pytest.mark.parametrize("key", list(ablations.ABLATIONS))
def test_each_ablation_grid_round_trips_through_the_forms_grid_text(key):
    """Re-run with changes shows the grid as text; submitting it unchanged must give the same grid."""
    grid = ablations.build_spec(ablations.ABLATIONS[key], "frozenlake", "tiny", [1], None).grid
    assert spec_parsing.parse_grid(form_inputs.grid_text(grid)) == grid


def test_grid_values_may_be_flow_mappings_and_lists():
    assert spec_parsing.parse_grid(
        "rollout = {env_groups: 32, group_size: 4}, {env_groups: 16, group_size: 8}\n"
        "model.lora_target_modules = [q_proj, v_proj], [o_proj]"
    ) == {
        "rollout": [{"env_groups": 32, "group_size": 4}, {"env_groups": 16, "group_size": 8}],
        "model.lora_target_modules": [["q_proj", "v_proj"], ["o_proj"]],
    }
    assert spec_parsing.parse_grid("env.params = {names: 'a, b]'}, {names: \"c\"}") == {
        "env.params": [{"names": "a, b]"}, {"names": "c"}]
    }


def test_n_equal_1_with_a_filter_is_refused_by_the_trainer():
    spec = ablations.build_spec(ablations.ABLATIONS["responses-per-prompt"], "frozenlake", "tiny", [1], None)
    spec.preset = "starpo-s"
    with pytest.raises(specs.SpecError) as error:
        run_planning.plan(spec)
    # The grid's cell is a whole `rollout` section: its field's problem is named under grid
    problem = error.value.errors["grid"]
    assert "group_size: 1}: rollout.group_size:" in problem and "filter" in problem


def test_one_click_creates_the_grid_and_opens_its_compare_page(
    alice_client, alice, forget_queued_messages, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(
            "/compare/ablations",
            {"ablation": "filter-ratio", "env": "", "model": "tiny", "seeds": "1, 2", "steps": "30"},
        )
    experiment = Experiment.objects.get(owner=alice)
    runs = list(experiment.runs.order_by("id"))
    assert response.status_code == 302
    assert response["Location"] == "/compare?runs=" + ",".join(str(run.pk) for run in runs)
    assert experiment.ablation == "filter-ratio" and experiment.preset == "starpo-s"
    assert experiment.grid == {"algorithm.filter_ratio": [0.25, 0.5, 0.75, 1.0]} and experiment.seeds == [
        1,
        2,
    ]
    assert len(runs) == 8 and {run.status for run in runs} == {Run.Status.QUEUED}
    assert all(run.enqueued_at is not None for run in runs)  # sent to the workers like any experiment
    assert {run.config["env"]["name"] for run in runs} == {"frozenlake"}
    assert {run.total_steps for run in runs} == {30}
    assert runs[0].label == "seed=1 algorithm.filter_ratio=0.25"

    page = alice_client.get(response["Location"])
    html = page.content.decode()
    assert "Paper vs ours: Rollout filter ratio" in html and "collapse at ~step 140" in html
    assert "none in 0 steps" not in html and "no data yet" in html  # queued runs have no result yet
    assert page.context["page"]["group_by"] == "algorithm.filter_ratio"


def test_an_ablation_the_paper_gives_no_numbers_for_says_so_instead_of_an_empty_table(
    alice_client, alice, forget_queued_messages
):
    response = alice_client.post(
        "/compare/ablations", {"ablation": "loss-aggregation", "model": "tiny", "seeds": "1", "steps": "8"}
    )
    html = " ".join(alice_client.get(response["Location"]).content.decode().split())
    section = html[html.index('id="paper-loss-aggregation"') :]
    section = section[: section.index("</section>")]
    assert "The paper gives no numbers for this ablation" in section and "paper-table" not in section


def test_paper_numbers_stand_beside_ours(alice_client, alice, forget_queued_messages):
    alice_client.post(
        "/compare/ablations", {"ablation": "actions-per-turn", "model": "tiny", "seeds": "1, 2"}
    )
    experiment = Experiment.objects.get(owner=alice)
    by_label = {run.label: run for run in experiment.runs.all()}
    points(by_label["seed=1 rollout.max_actions_per_turn=6"], "train/success", {0: 0.1, 49: 0.3})
    points(by_label["seed=2 rollout.max_actions_per_turn=6"], "train/success", {0: 0.1, 49: 0.4})
    ids = ",".join(str(run.pk) for run in experiment.runs.order_by("id"))
    rows = alice_client.get(f"/compare?runs={ids}").context["ablations"][0]["rows"]
    six = next(row for row in rows if row["result"].setting == "6")
    assert six["result"].reported == "33.6% (best)" and six["runs"] == 2
    assert six["ours"] == "35.0% (training, mean of 2)"  # no validation yet: training success, said so
    one = next(row for row in rows if row["result"].setting == "1")
    assert one["ours"] == "no data yet"
    # The paper reports validation success: once the runs validated, ours is that.
    points(by_label["seed=1 rollout.max_actions_per_turn=6"], "val/success", {40: 0.25})
    points(by_label["seed=2 rollout.max_actions_per_turn=6"], "val/success", {40: 0.5})
    rows = alice_client.get(f"/compare?runs={ids}").context["ablations"][0]["rows"]
    six = next(row for row in rows if row["result"].setting == "6")
    assert six["ours"] == "37.5% (validation, mean of 2)"


def test_too_many_runs_for_one_experiment_are_refused_before_saving(alice_client, alice):
    seeds = ", ".join(str(seed) for seed in range(1, 11))
    response = alice_client.post(
        "/compare/ablations", {"ablation": "actions-per-turn", "model": "tiny", "seeds": seeds}
    )
    assert response.status_code == 400
    assert "this makes 70 runs (7 combinations x 10 seeds)" in response.content.decode()
    assert not Experiment.objects.exists() and not Run.objects.exists()
    # Under Seeds (the form has no grid), and with the steps' own error, not after it is mended
    data = {"ablation": "actions-per-turn", "model": "tiny", "seeds": seeds, "steps": "0"}
    errors = alice_client.post("/compare/ablations", data).context["form"].errors
    assert errors["seeds"] == [
        "this makes 70 runs (7 combinations x 10 seeds); the limit is 64 per experiment"
    ]
    assert errors["steps"] and "__all__" not in errors


def test_an_environment_where_the_arms_would_train_alike_is_refused(alice_client):
    # Bandit has one action an episode: max_actions_per_turn 1 to 7 are all one action (a tester's 14 runs,
    # the same success per seed whatever the arm)
    data = {"ablation": "actions-per-turn", "env": "bandit", "model": "tiny", "seeds": "1", "steps": "2"}
    response = alice_client.post("/compare/ablations", data)
    assert response.status_code == 400
    assert response.context["form"].errors["env"] == [
        "on bandit, rollout.max_actions_per_episode is 1, so rollout.max_actions_per_turn 1, 2, 3, 4, 5, 6, 7 "
        "allow only 1 different setting: the arms would train alike; choose an environment with more actions "
        "(the paper's: sokoban)"
    ]
    assert not Experiment.objects.exists()
    data["env"] = "frozenlake"
    assert alice_client.post("/compare/ablations", data).status_code == 302


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("model", "../../etc", "no model folder"),
        ("seeds", "1, x", "&#x27;x&#x27; is not a whole number"),
        ("ablation", "collapse-everything", "must be one of: "),
        ("env", "chess", "must be one of: "),
    ],
)
def test_bad_input_names_the_field_and_saves_nothing(alice_client, field, value, message):
    data = {"ablation": "filter-ratio", "model": "tiny", "seeds": "1", field: value}
    response = alice_client.post("/compare/ablations", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert response.context["form"].errors[field]
    assert not Experiment.objects.exists()


def test_the_form_lists_every_ablation(alice_client):
    html = alice_client.get("/compare/ablations").content.decode()
    for ablation in ablations.ABLATIONS.values():
        assert f'value="{ablation.key}"' in html
    text = " ".join(unescape(html).split())
    # what each creates, before it is created: its settings, and how many steps an empty Steps means
    assert "<code>algorithm.filter_ratio</code> = 0.25, 0.5, 0.75, 1.0, preset starpo-s" in text
    assert "One run per preset and seed: starpo, starpo-s;" in text
    assert "= 1, 2, 4, 8, 16 (those that divide the batch)" in text
    assert (
        "Empty: the preset's default for the model: 60 for 'tiny', 200 (as in the paper) for the others."
        in text
    )


def test_generalization_validates_beside_the_training_environment():
    runs = planned("generalization", env="sokoban")
    assert values(runs, "algorithm.filter") == ["none", "top_ratio"]  # StarPO and StarPO-S
    assert all(
        run.config["rollout"]["val_envs"] == ["sokoban", "frozenlake", "sokoban-alternate"] for run in runs
    )
    bandit = planned("generalization")
    assert bandit[0].config["env"]["name"] == "bandit-teacher-engineer"
    assert bandit[0].config["rollout"]["val_envs"] == ["bandit-teacher-engineer", "bandit-librarian-trader"]
    assert bandit[0].config["rollout"]["max_turns"] == 1  # the Bandit's own episode shape
    assert planned("generalization", env="frozenlake")[0].config["rollout"]["val_envs"] == ["frozenlake"]


def test_the_form_says_how_many_runs_and_how_long_before_it_creates_them(alice_client):
    answer = alice_client.post(
        "/compare/ablations/estimate",
        {"ablation": "responses-per-prompt", "model": "tiny", "seeds": "1", "steps": "2"},
    ).json()
    planned_runs = len(planned("responses-per-prompt"))
    assert len(answer["runs"]) == planned_runs and answer["text"].startswith(f"{planned_runs} runs")
    assert "waits_for" in answer
    refused = alice_client.post(
        "/compare/ablations/estimate", {"ablation": "responses-per-prompt", "seeds": "x"}
    ).json()
    assert set(refused["errors"]) >= {"seeds", "model"}
    assert not Experiment.objects.exists()
    assert 'data-url="/compare/ablations/estimate"' in alice_client.get("/compare/ablations").content.decode()


def test_the_papers_other_environments_are_named_once_not_a_row_each(
    alice_client, alice, forget_queued_messages
):
    alice_client.post("/compare/ablations", {"ablation": "starpo-vs-starpo-s", "model": "tiny", "seeds": "1"})
    ids = ",".join(str(run.pk) for run in Run.objects.filter(experiment__owner=alice).order_by("id"))
    page = alice_client.get(f"/compare?runs={ids}")
    [table] = page.context["ablations"]
    assert {row["result"].env for row in table["rows"]} == {"bandit"}  # the runs' environment
    assert table["elsewhere"] == ["frozenlake", "sokoban"]
    html = page.content.decode()
    assert "no run of ours on" not in html
    assert "The paper also reports this on frozenlake, sokoban, where none of these runs trained." in html
