"""Plain-text report for a terminal."""

from __future__ import annotations

from nsysmoe.render.tables import (
    Table,
    class_table,
    gpu_table,
    notes,
    optional_tables,
    source_text,
    wall_lines,
    window_text,
)
from nsysmoe.result import TraceAnalysis


def format_table(t: Table) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in t.rows)) if t.rows else len(h)
        for i, h in enumerate(t.header)
    ]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(cells, widths, t.right, strict=True)
        ).rstrip()

    out = [t.title, line(t.header), line(tuple("-" * w for w in widths))]
    out += [line(r) for r in t.rows] or ["(none)"]
    return "\n".join(out)


def render_terminal(analyses: list[TraceAnalysis]) -> str:
    return "\n\n".join(_one(a) for a in analyses) + "\n"


def _one(a: TraceAnalysis) -> str:
    parts = [
        f"nsysmoe: {source_text(a)}",
        f"window: {window_text(a)}   rules: {a.rules_source}",
        format_table(gpu_table(a)),
        "\n".join(wall_lines(a)),
        format_table(class_table(a)),
    ]
    parts += [format_table(t) for t in optional_tables(a)]
    if notes(a):
        parts.append("\n".join(notes(a)))
    return "\n\n".join(parts)
