"""The key tables of docs/METRICS.md and docs/DETECTOR.md, generated from the registry (diagnostics.metrics).

    python -m diagnostics.metrics_tables            print every table
    python -m diagnostics.metrics_tables --write    rewrite the tables in docs/ in place

In a doc, a table stands between `<!-- metrics table: NAME -->` and `<!-- end metrics table -->`; the prose
around it is written by hand. A test fails when a doc's table differs from what the registry generates.
"""

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .metrics import COLLAPSE_PREFIX, METRICS, RAGEN, TRL, TRL_PREFIX, VERL, Alias, Metric, chart_log

DOCS = Path(__file__).resolve().parents[1] / "docs"
DOC_FILES = ("METRICS.md", "DETECTOR.md")
BLOCK = re.compile(r"(<!-- metrics table: (\w+) -->\n)(.*?)(<!-- end metrics table -->)", re.DOTALL)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = [_row(header), "|" + "---|" * len(header), *(_row(row) for row in rows)]
    return "\n".join(lines) + "\n"


def _code(name: str) -> str:
    return f"`{name}`"


def _chart_title(metric: Metric) -> str:
    if metric.chart is None:
        return ""
    # a <part> outside code would read as an HTML tag
    title = re.sub(r"(<[a-z_]+>)", r"`\1`", metric.chart.title)
    return title + " (log)" if chart_log(metric.chart) else title


def _alias_text(alias: Alias) -> str:
    notes = [note for note in (alias.note, "" if alias.renamed else "not renamed") if note]
    return _code(alias.name) + (f" ({'; '.join(notes)})" if notes else "")


def _known_as(metric: Metric) -> str:
    by_source: dict[str, list[str]] = {}
    for alias in metric.aliases:
        by_source.setdefault(alias.source, []).append(_alias_text(alias))
    parts = [f"{source or 'generic'} {', '.join(names)}" for source, names in by_source.items()]
    return "; ".join(parts + ([metric.known_as] if metric.known_as else [])) or "—"


def trainer_table() -> str:
    """Every key the trainer writes but collapse/*: meaning, unit, the run-page chart, other trainers' names."""
    return _table(
        ["Key", "Meaning", "Unit", "Run-page chart", "Known as"],
        (
            [_code(m.key), m.meaning, m.unit, _chart_title(m), _known_as(m)]
            for m in METRICS
            if not m.key.startswith(COLLAPSE_PREFIX)
        ),
    )


def collapse_table() -> str:
    """The template-collapse keys (RAGEN-2's names under collapse/), and the names RAGEN-2 logs them by."""
    return _table(
        ["Key", "Meaning", "Unit", "RAGEN-2 logs it as"],
        (
            [_code(m.key), m.meaning, m.unit, ", ".join(_alias_text(a) for a in m.aliases) or "—"]
            for m in METRICS
            if m.key.startswith(COLLAPSE_PREFIX)
        ),
    )


def aliases_table() -> str:
    """The names canonical() renames to ours, by trainer; a key of ours that veRL shares is listed too."""

    def names(metric: Metric, sources: tuple[str, ...]) -> str:
        return ", ".join(_code(a.name) for a in metric.aliases if a.renamed and a.source in sources)

    return _table(
        ["our key", "RAGEN / veRL", f"TRL (also with a `{TRL_PREFIX}` prefix)", "other"],
        (
            [_code(m.key), names(m, (RAGEN, VERL)), names(m, (TRL,)), names(m, ("",))]
            for m in METRICS
            # the collapse/* keys' RAGEN-2 names are in docs/METRICS.md's collapse table
            if any(a.renamed and a.name != m.key for a in m.aliases) and not m.key.startswith(COLLAPSE_PREFIX)
        ),
    )


TABLES: dict[str, Callable[[], str]] = {
    "trainer": trainer_table,
    "collapse": collapse_table,
    "aliases": aliases_table,
}


def update(text: str) -> str:
    """`text` with each metrics table block's body regenerated; a block naming no table raises ValueError."""

    def regenerate(block: re.Match[str]) -> str:
        name = block.group(2)
        if name not in TABLES:
            raise ValueError(f"metrics table {name!r}: no such table (known: {', '.join(TABLES)})")
        return block.group(1) + TABLES[name]() + block.group(4)

    return BLOCK.sub(regenerate, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m diagnostics.metrics_tables", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--write", action="store_true", help=f"rewrite the tables in docs/ ({', '.join(DOC_FILES)})"
    )
    args = parser.parse_args(argv)
    if not args.write:
        for name, table in TABLES.items():
            print(f"<!-- metrics table: {name} -->\n{table()}<!-- end metrics table -->\n")
        return 0
    for name in DOC_FILES:
        path = DOCS / name
        text = path.read_text()
        updated = update(text)
        if updated != text:
            path.write_text(updated)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
