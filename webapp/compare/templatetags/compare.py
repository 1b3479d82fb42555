import math

from django import template

from webapp.compare.selection import MAX_RUNS
from webapp.core.templatetags.echolab import significant

register = template.Library()


@register.simple_tag
def compare_max_runs() -> int:
    """How many runs one compare page shows (the selection tray warns beyond it)."""
    return MAX_RUNS


@register.filter
def number(value, digits=3):
    """A summary cell: 3 significant digits ("0" digits: a whole number, its thousands grouped: 2,131,477
    steps an hour); "–" when unknown."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "–"
    return f"{value:,.0f}" if str(digits) == "0" else significant(value, int(digits))


@register.filter
def sortable(value):
    """What the client-side sort compares: the number itself, empty (sorted last) when unknown."""
    return repr(float(value)) if isinstance(value, (int, float)) and math.isfinite(value) else ""
