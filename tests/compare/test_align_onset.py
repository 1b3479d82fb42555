"""Compare page, "align at onset": each run's first collapse (the x origin of the aligned charts) and
each rule's lead, the steps from its first warning to that collapse."""

from tests.factories import make_event, make_experiment, trained_run
from webapp.compare.aggregates import onset_leads


def test_onset_is_the_first_collapse_and_a_lead_counts_only_warnings_before_it(alice):
    experiment = make_experiment(alice)
    collapsed = trained_run(experiment, "seed=1")
    healthy = trained_run(experiment, "seed=2")
    make_event(collapsed, 40, "collapse", rule="success_collapse")
    make_event(collapsed, 55, "collapse", rule="success_collapse")
    make_event(collapsed, 22, "warning", rule="reward_std_drop")
    make_event(collapsed, 30, "warning", rule="reward_std_drop")
    make_event(collapsed, 37, "warning", rule="entropy_drop")
    make_event(collapsed, 41, "warning", rule="grad_norm_spike")  # after the collapse: late
    make_event(collapsed, 10, "info", rule="grad_norm_spike")  # an info marker is not a warning
    make_event(healthy, 5, "warning", rule="entropy_drop")
    rules, runs = onset_leads([collapsed, healthy])
    assert rules == ["entropy_drop", "grad_norm_spike", "reward_std_drop"]
    assert runs[collapsed.pk] == {
        "onset": 40,
        "leads": {"entropy_drop": 3, "grad_norm_spike": -1, "reward_std_drop": 18},
    }
    assert runs[healthy.pk] == {
        "onset": None,
        "leads": {"entropy_drop": None, "grad_norm_spike": None, "reward_std_drop": None},
    }


def test_summary_lists_each_rules_lead_and_the_page_data_each_onset(alice, alice_client):
    experiment = make_experiment(alice)
    collapsed = trained_run(experiment, "seed=1")
    healthy = trained_run(experiment, "seed=2")
    make_event(collapsed, 40, "collapse", rule="success_collapse")
    make_event(collapsed, 28, "warning", rule="reward_std_drop")
    make_event(collapsed, 41, "warning", rule="entropy_rise")
    response = alice_client.get(f"/compare?runs={collapsed.pk},{healthy.pk}")
    html = response.content.decode()
    assert (
        "Lead: reward_<wbr>std_<wbr>drop</th>" in html and "12 steps" in html
    )  # wraps after "_" in its narrow column
    # a warning a step after the collapse is told from none (both read "–")
    assert '<td data-sort="-1.0" class="lead late">1 step late</td>' in html
    assert 'id="align-onset"' in html
    data = response.context["page"]["runs"]
    assert [(run["id"], run["onset"]) for run in data] == [(collapsed.pk, 40), (healthy.pk, None)]
