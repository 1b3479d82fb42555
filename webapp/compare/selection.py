"""Which runs a compare URL names: `?runs=3,7,12` (or repeated `runs=` from a checkbox form).

Ids that do not exist and ids of other users' runs get the same notice, so the page never tells a
user whether someone else's run exists."""

from dataclasses import dataclass, field

from webapp.core.converters import parse_id
from webapp.experiments.models import Run

MAX_RUNS = 100


@dataclass
class Selection:
    runs: list[Run] = field(default_factory=list)
    requested: list[int] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # tokens that are not run ids
    unavailable: list[int] = field(default_factory=list)  # missing, or not the caller's
    truncated: int = 0  # how many ids beyond MAX_RUNS were left out

    @property
    def ids(self) -> list[int]:
        return [run.pk for run in self.runs]

    def notices(self) -> list[str]:
        out = []
        if self.invalid:
            shown = ", ".join(repr(token) for token in self.invalid[:5])
            more = f" and {len(self.invalid) - 5} more" if len(self.invalid) > 5 else ""
            out.append(
                f"runs: {shown}{more} {'is not a run id' if len(self.invalid) == 1 else 'are not run ids'} "
                "(expected whole numbers separated by commas, like runs=3,7,12)"
            )
        if self.unavailable:
            ids = ", ".join(str(pk) for pk in self.unavailable)
            out.append(
                f"Run {ids} {'is' if len(self.unavailable) == 1 else 'are'} not among your runs and left out."
            )
        if self.truncated:
            out.append(
                f"You selected {MAX_RUNS + self.truncated} runs; a compare page shows at most "
                f"{MAX_RUNS}, so the last {self.truncated} were left out. Compare fewer runs at a time."
            )
        return out


def split_ids(values: list[str]) -> tuple[list[int], list[str]]:
    """["3,7", "12"] -> ([3, 7, 12], []); duplicates dropped, order kept; bad tokens returned apart."""
    ids, invalid = {}, []  # a dict keeps the order and finds a duplicate at once (a POST of 2 million ids)
    for value in values:
        for token in value.split(","):
            token = token.strip()
            if not token:
                continue
            number = parse_id(token)
            if number:  # not None, nor 0, which no run has
                ids.setdefault(number)
            else:
                invalid.append(token[:40])
    return list(ids), invalid


def select(user, values: list[str]) -> Selection:
    ids, invalid = split_ids(values)
    selection = Selection(requested=ids, invalid=invalid)
    if len(ids) > MAX_RUNS:
        selection.truncated = len(ids) - MAX_RUNS
        ids = ids[:MAX_RUNS]
    found = Run.objects.for_user(user).select_related("experiment").in_bulk(ids)
    selection.runs = [found[pk] for pk in ids if pk in found]
    selection.unavailable = [pk for pk in ids if pk not in found]
    return selection


class Refused(Exception):
    """A download's runs= that names no run, too many, a bad id or a run not the user's."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def every_run(user, values: list[str], limit: int = MAX_RUNS) -> list[Run]:
    """Each run `runs=` names, in its order, all the user's, or Refused: a download cannot carry the page's
    notices, so it leaves nothing out. A missing run and another user's are the same 404."""
    ids, invalid = split_ids(values)
    if invalid:
        raise Refused(400, f"runs: {invalid[0]!r} is not a run id (expected runs=3,7,12)")
    if not ids or len(ids) > limit:
        raise Refused(400, f"runs: select between 1 and {limit} runs")
    found = Run.objects.for_user(user).select_related("experiment").in_bulk(ids)
    missing = [pk for pk in ids if pk not in found]
    if missing:
        raise Refused(404, f"runs: run {missing[0]} is not among your runs")
    return [found[pk] for pk in ids]


def canonical_query(ids: list[int]) -> str:
    return "runs=" + ",".join(str(pk) for pk in ids)
