"""Other trainers' metric names renamed to ours (the table of both is diagnostics.metrics).

The detector only reads our keys. `canonical()` renames the known foreign keys so a metrics file
exported from another trainer can be checked as it is. When a step carries both our key and an alias,
our key wins: it is the one our trainer wrote on purpose.
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .metrics import ALIASES, BY_KEY, CHART_KEYS, alias_of

# Our keys the run page's standard charts draw, with what each one means: the keys other trainers' names
# are renamed to, with the collapse/* keys (RAGEN-2's names). The detector's rules read some of them and
# two collapse/* keys.
KEYS = {key: BY_KEY[key].meaning for key in CHART_KEYS}

# ALIASES (foreign key -> our key) comes from diagnostics.metrics. Keys without an equivalent (TRL's
# completions/clipped_ratio, clip_ratio/low_mean, veRL's timing_s/*) pass through under their own names.
__all__ = ["ALIASES", "KEYS", "alias_of", "canonical", "finite", "renaming"]


def renaming(keys: Iterable[str]) -> dict[str, str]:
    """Each key's name once renamed to ours: unknown keys and ours keep theirs. When two keys mean the
    same (our own and an alias, or two aliases: `reward` and `critic/score/mean`), our own key, else the
    first alias, takes our name; the other keeps its own name, so nothing logged is lost. Keys matching
    one pattern alias (RAGEN's train/<env>/success) are renamed only when the step has just one: with two
    training environments, neither is the run's success."""
    keys = list(keys)
    ours = {key: alias_of(key) for key in keys}
    patterned = [key for key in keys if ours[key] is not None and key not in ALIASES]
    if len(patterned) > 1:
        matches = Counter(ours[key] for key in patterned)
        for key in patterned:
            if matches[ours[key]] > 1:
                ours[key] = None
    names = {key: key for key in keys if ours[key] is None}
    taken = set(names)
    for key in keys:
        name = ours[key]
        if name is not None:
            names[key] = name if name not in taken else key
            taken.add(names[key])
    return names


def canonical(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Return `metrics` keyed by our names (`renaming`), values as floats; None means "not logged" and
    is dropped. Unknown keys pass through unchanged (the detector ignores them). A value that is not a
    number raises ValueError naming the key: a worker that sends strings has a bug worth seeing.
    """
    numbers: dict[str, float] = {}
    for key, value in metrics.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"metric {key!r}: {value!r} is not a number")
        numbers[key] = float(value)
    return {name: numbers[key] for key, name in renaming(numbers).items()}


def finite(value: float | None) -> float | None:
    """The value if it is a finite number, else None: most rules treat NaN/inf as no data."""
    return value if value is not None and math.isfinite(value) else None
