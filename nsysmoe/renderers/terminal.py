"""Plain text for a terminal (and ``-o`` files): any document, blocks separated by a blank line."""

from __future__ import annotations

from nsysmoe.renderers.document import Block, Caption, Details, Document, Heading, Lines, Table


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


def _lines(b: Lines) -> str:
    if b.style == "list":
        return "\n".join([b.title, *("  - " + x for x in b.lines)])
    if b.hanging:
        return "\n".join(b.lines[:1] + tuple("  " + x for x in b.lines[1:]))
    return "\n".join(b.lines)


def _block(b: Block) -> list[str]:
    """Zero or more text parts of one block (a heading without terminal text shows nothing)."""
    if isinstance(b, Table):
        return [format_table(b)]
    if isinstance(b, Heading):
        return [b.terminal] if b.terminal else []
    if isinstance(b, Caption):
        return ["   ".join(f"{label}: {value}" for label, value, _ in b.facts)]
    if isinstance(b, Lines):
        return [_lines(b)]
    if isinstance(b, Details):
        return [part for inner in b.blocks for part in _block(inner)]
    return []  # Figures: a terminal cannot show them; the CLI says where they were written


def format_document(doc: Document) -> str:
    return "\n\n".join(part for b in doc.blocks for part in _block(b)) + "\n"
