"""The chart view a page keeps in its address (?x=, ?xrange=, ?smooth=), as static/js/chart_view.js reads
it: what a page cannot follow, and what it shows instead, for the page to say (never a silent default)."""

import math
import re

from diagnostics.quoting import quoted

# A number as an address writes one, read the same by static/js/chart_view.js (EchoChartView.DECIMAL):
# float() alone also takes "1_0", "inf" and " 1", JavaScript's Number() "0x10".
DECIMAL = re.compile(r"[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?")


def view_notices(query, run_page: bool = False) -> list[str]:
    """Notices for ?x=, ?smooth= and ?xrange=, and for ?detector= where the page offers the detector's
    view (`run_page`)."""
    notices = []
    x = query.get("x", "")
    if x not in ("", "step", "time"):
        notices.append(f"x: expected step or time, got {quoted(x)}; the x axis is the step.")
    detector = query.get("detector", "")
    if run_page and detector not in ("", "1"):
        notices.append(f"detector: expected 1 (the detector's view), got {quoted(detector)}; not shown.")
    smooth = query.get("smooth", "")
    if smooth and not _number_within(smooth, 0, 0.99):
        notices.append(f"smooth: expected a number from 0 to 0.99, got {quoted(smooth)}; no smoothing.")
    xrange = query.get("xrange", "")
    parts = xrange.split(",")
    if xrange and not (
        len(parts) == 2 and all(_number_within(p) for p in parts) and float(parts[0]) < float(parts[1])
    ):
        notices.append(
            f"xrange: expected two increasing steps like 10,50, got {quoted(xrange)}; every step is shown."
        )
    return notices


def _number_within(text: str, low: float = -math.inf, high: float = math.inf) -> bool:
    if not DECIMAL.fullmatch(text):
        return False
    value = float(text)
    return math.isfinite(value) and low <= value <= high
