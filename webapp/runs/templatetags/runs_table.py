"""Cells of the runs table, and a queued run's place in the queue (the run page includes it)."""

import json
import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from trainer.overrides import get_dotted
from webapp.core.templatetags.echolab import duration, significant
from webapp.runs import queue

register = template.Library()

# Columns whose cell is the run's value as plain text: column key -> how to read it from a run.
TEXT = {
    "env": lambda run: get_dotted(run.config, "env.name"),
    "algorithm": lambda run: get_dotted(run.config, "algorithm.advantage"),
    "preset": lambda run: run.preset,
    "model": lambda run: get_dotted(run.config, "model.name"),
    "seed": lambda run: get_dotted(run.config, "seed"),
    "filter_ratio": lambda run: (
        get_dotted(run.config, "algorithm.filter_ratio")
        if get_dotted(run.config, "algorithm.filter") == "top_ratio"
        else None
    ),
    "actor_lr": lambda run: get_dotted(run.config, "optim.actor_lr"),
    # A run trained elsewhere has no planned total (0): its step alone, not "199 / 0"
    "step": lambda run: f"{run.step} / {run.total_steps}" if run.total_steps else run.step,
    "final_val": lambda run: _fraction(run.final_val_success),
    "best_val": lambda run: _fraction(run.best_val_success),
    "final_train": lambda run: _fraction(run.final_train_success),
    "collapse": lambda run: run.collapse_step,
    "duration": lambda run: duration(run.duration.total_seconds()) if run.duration is not None else None,
    "notes": lambda run: run.notes[:80] + ("…" if len(run.notes) > 80 else ""),
    "created": lambda run: run.created_at.strftime("%Y-%m-%d %H:%M"),
}


def _fraction(value):
    # 3 significant digits, as the compare and experiment pages write the same success: 0.125, not 0.12
    return None if value is None else significant(value, 3)


@register.filter
def config_text(value) -> str:
    """A config value as its YAML on the run page reads: text as it is, true/false, sections as JSON."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return str(value)


@register.filter
def path_breaks(path: str) -> str:
    """A config path that may wrap after each dot or slash (a header as narrow as its longest part)."""
    return mark_safe(re.sub(r"([./])", r"\1<wbr>", escape(path)))


@register.simple_tag
def cell(run, key):
    """The text of a plain cell; "–" where the run has no value."""
    value = TEXT[key](run)
    return "–" if value in (None, "") else value


@register.inclusion_tag("runs/_queue_place.html", takes_context=True)
def queue_place(context, run):
    return {"place": queue.place(run, context["request"].user), "run": run}
