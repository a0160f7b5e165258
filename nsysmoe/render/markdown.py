"""GitHub-flavoured Markdown, ready to paste into a PR review."""

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


def _cell(text: str) -> str:
    """A table cell: ``|`` would end the cell and ``<…>`` (C++ templates) would be taken for
    HTML by GitHub and vanish."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def format_table(t: Table) -> str:
    lines = [f"**{t.title}**", "", "| " + " | ".join(_cell(h) for h in t.header) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in t.right) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.header) - 1)) + " |")
    return "\n".join(lines)


def render_markdown(analyses: list[TraceAnalysis]) -> str:
    return "\n\n".join(_one(a) for a in analyses) + "\n"


def _one(a: TraceAnalysis) -> str:
    wall = wall_lines(a)
    parts = [
        f"### nsysmoe: `{source_text(a)}`",
        f"Window: {window_text(a)} · rules: `{a.rules_source}` · "
        "hidden % = |⋃comm ∩ ⋃compute| / |⋃comm|, per GPU, exact to the ns",
        format_table(gpu_table(a)),
        "\n".join(["> " + wall[0]] + [">" + line[1:] for line in wall[1:]]),
        "<details><summary>Kernel classes</summary>\n\n"
        + format_table(class_table(a))
        + "\n\n</details>",
    ]
    parts += [format_table(t) for t in optional_tables(a)]
    if notes(a):
        parts.append("\n".join(f"- {n}" for n in notes(a)))
    return "\n\n".join(parts)
