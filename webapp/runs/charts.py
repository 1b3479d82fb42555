"""The charts a run page draws: the standard ones, then one per other key the run logged."""

from diagnostics import metrics
from webapp.core import natural_sort
from webapp.experiments.models import Run
from webapp.runs.notes import chart_notes

# Chart id -> title, metric keys, log: True for a log y axis; the page draws them in this order. Generated
# from the metric registry (diagnostics.metrics), where each key says which chart draws it.
CHARTS = metrics.CHARTS


# Other keys of a run trained here charted open; beyond this many, their section starts folded.
OTHER_KEYS_OPEN = 12


def standard_charts(config: dict) -> list[dict]:
    """CHARTS, then one validation-success chart per environment in the run's rollout.val_envs."""
    val_envs = _mapping(_mapping(config).get("rollout")).get("val_envs") or []
    return CHARTS + metrics.val_env_charts([name for name in val_envs if isinstance(name, str)])


def chart_sections(run: Run) -> list[dict]:
    """The standard charts, then one chart per other key the run logged (custom keys, other trainers'
    columns: all of them, in natural order, col2 before col10; the page asks for them 100 keys a request);
    each group a section the page can fold. A chart with a note (webapp.runs.notes) carries it as "note"."""
    notes = chart_notes(run)
    standard = [
        chart | {"note": notes[chart["id"]]} if chart["id"] in notes else chart
        for chart in standard_charts(run.config)
    ]
    others = other_keys(run.latest_metrics, standard)
    sections = [{"id": "training", "title": "Training", "charts": standard, "folded": False}]
    if others:
        sections.append(
            {
                "id": "logged",
                "title": f"Other logged keys ({len(others)})",
                # A run trained here: the standard charts are its view, and its many other keys (time/*,
                # perf/*, ...) wait folded until opened (the page remembers). An import's columns are its data.
                "folded": not run.experiment.imported and len(others) > OTHER_KEYS_OPEN,
                "charts": [
                    {"id": f"logged-{index}", "title": key, "keys": [key]} for index, key in enumerate(others)
                ],
            }
        )
    return sections


def other_keys(logged, charts: list[dict]) -> list[str]:
    """The keys of `logged` that no chart of `charts` draws, in natural order (col2 before col10)."""
    charted = {key for chart in charts for key in chart["keys"]}
    # The key itself breaks ties ("Loss" and "loss"): chart ids and compare links name keys by place.
    return sorted(set(logged) - charted, key=lambda key: (natural_sort.sort_key(key), key))


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}
