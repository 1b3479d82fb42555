import math
import re
import unicodedata
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def duration(seconds):
    """ETA seconds -> "1h 05m", "3m 20s", "45s"; empty for unknown."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


@register.filter
def spoken_seconds(seconds: int) -> str:
    """A setting's seconds as a person says them: 300 -> "5 minutes", 3600 -> "1 hour", 90 -> "90 s"."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}{'s' if seconds != size else ''}"
    return f"{seconds} s"


@register.filter
def percent(done, total):
    return min(100, round(100 * done / total)) if total else 0


@register.filter
def metric(metrics, key):
    """A value from Run.latest_metrics, formatted for a table cell."""
    value = (metrics or {}).get(key)
    return "–" if not isinstance(value, (int, float)) or not math.isfinite(value) else significant(value)


@register.filter
def iso_time(text):
    """An ISO 8601 time kept as text (a run's attempt log) as every page shows a time; the text itself
    when it is not one."""
    try:
        return date_format(timezone.localtime(datetime.fromisoformat(text)), "DATETIME_FORMAT")
    except (TypeError, ValueError):
        return text


@register.filter
def reward(value) -> str:
    """A reward as a person reads it: six significant digits, so that a sum of float penalties (three
    times -0.1 is -0.30000000000000004) reads as -0.3; "-" for none. The trajectories page filters on the
    same text, so a sample shown as -0.3 passes "at least -0.3"."""
    return "-" if not isinstance(value, (int, float)) else f"{value:.6g}"


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits as "%g" writes it (0.313, 1.23e+06), a tie rounded away
    from zero as the pages' JavaScript rounds (toPrecision): "%g" alone rounds 5/16 = 0.3125 to 0.312,
    and a live page would redraw the same cell as 0.313."""
    if value == 0:
        return f"{value:.{digits}g}"
    exact = Decimal(value)
    rounded = exact.quantize(Decimal(1).scaleb(exact.adjusted() - digits + 1), rounding=ROUND_HALF_UP)
    return f"{float(rounded):.{digits}g}"


# Bidi classes that can reorder the text around a name: right-to-left letters and the embedding,
# override and isolate controls.
_REORDERING = {"R", "AL", "RLE", "RLO", "LRE", "LRO", "RLI", "LRI", "FSI", "PDF", "PDI"}


@register.filter
def isolated(text):
    """`text` between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE when it holds right-to-left
    letters or bidi controls, so a user-chosen name cannot reorder a plain-text line (a subject, a text
    email) around it; other text unchanged (HTML uses <bdi>)."""
    text = str(text)
    if any(unicodedata.bidirectional(char) in _REORDERING for char in text):
        return f"\u2068{text}\u2069"
    return text


@register.filter
def breakable_key(key: str) -> str:
    """A metric key or rule name that may wrap after each "/" or "_" (collapse/traj/retrieval_above_chance),
    escaped: in a narrow column it broke inside a word ("chanc e") where no break was offered."""
    return mark_safe(re.sub(r"([/_])", r"\1<wbr>", str(escape(key))))


@register.simple_tag
def chart_grid(charts):
    """The charts' empty figures, filled by the page's script: a figure's label is the name a screen reader
    says before the plot's tick labels (its values are behind the chart's "table" switch). Python, not an
    included template: a run may log thousands of keys, one chart each (10,000 took 4.6 s as a template)."""
    return format_html(
        '<div class="chart-grid">{}</div>', format_html_join("", "{}", ((_chart(c),) for c in charts))
    )


def _chart(chart) -> str:
    note = (
        format_html(
            '<figcaption class="chart-note muted" id="chart-note-{}">{}</figcaption>',
            chart["id"],
            chart["note"],
        )
        if chart.get("note")
        else ""
    )
    return format_html(
        '<figure class="chart" aria-label="Chart: {} ({})"><div id="chart-{}" class="chart-plot"></div>{}</figure>',
        chart["title"],
        ", ".join(chart["keys"]),
        chart["id"],
        note,
    )
