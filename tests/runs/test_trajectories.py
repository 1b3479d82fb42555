"""/runs/<id>/trajectories: sampled trajectories as a transcript, model output always escaped."""

from webapp.experiments.models import Run
from webapp.metrics.models import Sample

SAMPLE = {
    "group": 3,
    "seed": 1234,
    "reward": 1.5,
    "success": True,
    "turns": [
        {
            "state": "#####\n#P.X#\n#####",
            "think": "go right",
            "answer": "Right",
            "actions": ["Right"],
            "reward": -0.1,
            "valid": True,
        },
        {
            "state": "#####\n#.PX#\n#####",
            "think": "again",
            "answer": "Jump",
            "actions": ["Jump"],
            "reward": 0,
            "valid": False,
        },
    ],
    "text": "full transcript",
}


def test_transcript_shows_grid_think_answer_and_rewards(alice_client, run):
    Sample.objects.create(run=run, step=40, index=0, data=SAMPLE)
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=40").content.decode()
    assert '<pre class="state-grid">#####\n#P.X#\n#####</pre>' in html
    assert 'class="think"' in html and "go right" in html
    assert "Right" in html and "reward -0.1" in html and "invalid action" in html
    assert "total reward <strong>1.5</strong>" in html and "success</span>" in html
    assert "group 3" in html and "seed 1234" in html


def test_an_action_the_ice_slid_and_the_board_after_the_last_turn_are_shown(alice_client, run):
    # A tester read "Left -> Left" over a board where the player had slid down, and never saw the last board.
    slid = {**SAMPLE["turns"][0], "actions": ["Left", "Left"], "went": ["Down", "Left"]}
    final = "#####\n#..√#\n#####"
    Sample.objects.create(run=run, step=40, index=0, data={**SAMPLE, "turns": [slid], "final_state": final})
    html = " ".join(alice_client.get(f"/runs/{run.pk}/trajectories?step=40").content.decode().split())
    assert '&rarr; Left, Left</span> <span class="went">but Left went Down <small>' in html
    assert 'class="unplayed"' not in html  # both were played
    assert f'<h3>After the last turn</h3><pre class="state-grid">{" ".join(final.split())}</pre>' in html
    # The first slid into a hole: the others were never played (it read "Left, Right, Up but went Up")
    hole = {**SAMPLE["turns"][0], "actions": ["Left", "Right", "Up"], "went": ["Up"]}
    Sample.objects.filter(run=run).update(data={**SAMPLE, "turns": [hole]})
    html = " ".join(alice_client.get(f"/runs/{run.pk}/trajectories?step=40").content.decode().split())
    assert '<span class="went">but Left went Up <small>' in html
    assert '<span class="unplayed">Right, Up not played: the episode had ended</span>' in html
    # Bandit with one action a turn: "Librarian || Teacher || B" read the first alone, and said nothing of the rest
    Run.objects.filter(pk=run.pk).update(config={**run.config, "rollout": {"max_actions_per_turn": 1}})
    cut = {**SAMPLE["turns"][0], "actions": ["Librarian"], "beyond_limit": ["Teacher", "B"]}
    Sample.objects.filter(run=run).update(data={**SAMPLE, "turns": [cut]})
    html = " ".join(alice_client.get(f"/runs/{run.pk}/trajectories?step=40").content.decode().split())
    assert '<span class="unplayed">Teacher, B not read: beyond the turn\'s limit of 1 action</span>' in html
    # a sample recorded before either: no such line, no empty board
    Sample.objects.filter(run=run).update(data=SAMPLE)
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=40").content.decode()
    assert 'class="went"' not in html and "After the last turn" not in html


def test_a_reply_out_of_format_is_shown_as_generated(alice_client, run):
    # A collapsed model's "<think>" and blanks parse to no think and no answer: "(none)" hid what it wrote.
    broken = {"state": "", "think": "", "answer": "", "reply": "<think>  \n ", "actions": [], "valid": False}
    Sample.objects.create(run=run, step=7, index=0, data={**SAMPLE, "turns": [broken]})
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=7").content.decode()
    assert "not in the expected format, as generated:" in html
    assert '<pre class="transcript reply">&lt;think&gt;  \n </pre>' in html
    assert "(none)" not in html


def test_model_output_is_escaped_everywhere(alice_client, run):
    evil = "<script>alert('x')</script>"
    Sample.objects.create(
        run=run,
        step=1,
        index=0,
        data={
            "reward": evil,
            "group": evil,
            "text": evil,
            "turns": [{"state": evil, "think": evil, "answer": evil, "actions": [evil], "reward": evil}],
        },
    )
    Sample.objects.create(run=run, step=1, index=1, data=[evil])
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=1").content.decode()
    assert "<script>alert" not in html
    assert html.count("&lt;script&gt;alert(") >= 7


def test_missing_or_malformed_fields_render(alice_client, run):
    Sample.objects.create(run=run, step=5, index=0, data={})
    Sample.objects.create(run=run, step=5, index=1, data={"turns": "not a list", "text": "plain text only"})
    Sample.objects.create(run=run, step=5, index=2, data={"turns": [None, 7, {"state": ["a", "b"]}]})
    Sample.objects.create(run=run, step=5, index=3, data="just a string")
    response = alice_client.get(f"/runs/{run.pk}/trajectories?step=5")
    assert response.status_code == 200
    html = response.content.decode()
    assert "plain text only" in html and "just a string" in html and "success unknown" in html


def test_slider_covers_the_steps_with_samples_and_defaults_to_the_latest(alice_client, run):
    for step in (0, 10, 30):
        Sample.objects.create(run=run, step=step, index=0, data={"text": f"at step {step}"})
    html = alice_client.get(f"/runs/{run.pk}/trajectories").content.decode()
    assert 'max="2" value="2"' in html and "at step 30" in html and "at step 10" not in html
    assert '<option value="10">10</option>' in html
    assert "at step 10" in alice_client.get(f"/runs/{run.pk}/trajectories?step=10").content.decode()
    assert (
        "No samples at step 11" in alice_client.get(f"/runs/{run.pk}/trajectories?step=11").content.decode()
    )
    assert "at step 30" in alice_client.get(f"/runs/{run.pk}/trajectories?step=banana").content.decode()


def test_no_samples_yet(alice_client, run):
    assert "No samples recorded yet" in alice_client.get(f"/runs/{run.pk}/trajectories").content.decode()
    run.status = "completed"
    run.save()
    assert (
        "This run recorded no samples." in alice_client.get(f"/runs/{run.pk}/trajectories").content.decode()
    )


def test_a_step_without_samples_opens_the_nearest_sampled_step_before_it(alice_client, run):
    for step in (10, 20):
        Sample.objects.create(run=run, step=step, index=0, data={"text": f"sampled at {step}"})
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=17").content.decode()
    assert "sampled at 10" in html and "showing the nearest sampled step, 10" in html
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=3").content.decode()
    assert "sampled at 10" in html
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=-4").content.decode()
    assert "got &#x27;-4&#x27;; showing the last sampled step" in html and "sampled at 20" in html


def test_float_sums_read_as_written(alice_client, run):
    Sample.objects.create(run=run, step=1, index=0, data={**SAMPLE, "reward": -0.1 - 0.1 - 0.1})
    html = alice_client.get(f"/runs/{run.pk}/trajectories?step=1").content.decode()
    assert "total reward <strong>-0.3</strong>" in html
    assert 'data-reward="-0.3"' in html  # the filter compares what is shown: "at least -0.3" keeps it


def test_the_page_says_what_success_means_in_the_runs_environment(alice_client, alice):
    from tests.factories import make_run

    bandit = make_run(alice, config={"env": {"name": "bandit", "params": {}}})
    Sample.objects.create(run=bandit, step=0, index=0, data={**SAMPLE, "reward": 0.0})
    html = alice_client.get(f"/runs/{bandit.pk}/trajectories").content.decode()
    assert "success</strong> here: the arm with the higher expected payoff was chosen, whatever" in html
    imported = make_run(alice, config={})  # no environment named: nothing to say
    assert 'id="success-means"' not in alice_client.get(f"/runs/{imported.pk}/trajectories").content.decode()


def _shown(html: str) -> list[int]:
    """The sample numbers the page shows (a hidden section is filtered out)."""
    sections = html.split('<section class="trajectory"')[1:]
    return [int(s.split("Sample ")[1].split()[0]) for s in sections if not s.startswith(" hidden")]


def test_filters_in_the_address_are_applied_by_the_server_and_kept_by_the_step_form(alice_client, run):
    for index, (success, reward, valid) in enumerate(
        [(True, 1.0, True), (False, -0.3, False), (False, 0.5, True)]
    ):
        turns = [{**SAMPLE["turns"][0], "valid": valid}]
        data = {"success": success, "reward": reward, "turns": turns}
        Sample.objects.create(run=run, step=4, index=index, data=data)
    page = f"/runs/{run.pk}/trajectories?step=4"
    assert _shown(alice_client.get(page).content.decode()) == [0, 1, 2]
    html = alice_client.get(page + "&outcome=failure").content.decode()
    assert _shown(html) == [1, 2] and "2 of 3 shown" in html
    assert '<option value="failure" selected>' in html
    # the step picker sends the filters along with the step it picks
    assert '<input type="hidden" name="outcome" value="failure">' in html
    assert _shown(alice_client.get(page + "&reward=0.5").content.decode()) == [0, 2]
    # a sum of float penalties shown as -0.3 passes "at least -0.3"
    assert _shown(alice_client.get(page + "&reward=-0.3&format=invalid").content.decode()) == [1]
    assert _shown(alice_client.get(page + "&outcome=success&format=invalid").content.decode()) == []


def test_a_bad_filter_in_the_address_is_named_and_left_off(alice_client, run):
    Sample.objects.create(run=run, step=4, index=0, data={**SAMPLE, "success": False})
    response = alice_client.get(f"/runs/{run.pk}/trajectories?outcome=lost&reward=lots&format=invalid")
    html = response.content.decode()
    assert response.status_code == 200
    assert "outcome: must be one of: success, failure; got &#x27;lost&#x27;; that filter is off" in html
    assert "reward: must be a number, like 0.5; that filter is off" in html
    # the good filter still applies: sample 0 has an invalid action
    assert _shown(html) == [0] and "1 of 1 shown" in html
    html = alice_client.get(f"/runs/{run.pk}/trajectories?reward=nan").content.decode()
    assert "reward: must be a number" in html and _shown(html) == [0]
