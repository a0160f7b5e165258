"""Plain text for a terminal (and ``-o`` files): any document, blocks separated by a blank line.

Trace text is hostile here too: an ESC or OSC sequence in a kernel name would clear the screen or
retitle the terminal, a newline would break a table, a bidi override would reorder what is read.
:func:`safe` is the one place it is neutralised: such characters are shown as ``\\xNN`` /
``\\uNNNN`` escapes, line breaks as a space.
"""

from __future__ import annotations

import re

from nsysmoe.renderers.document import Block, Caption, Details, Document, Heading, Lines, Table

#: C0 and C1 controls, DEL, and the Unicode bidi and line/paragraph-separator controls
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in "\n\r\t\v\f\x85\u2028\u2029":
        return " "
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def safe(text: str) -> str:
    """``text`` with every control character made visible and inert (one line)."""
    return _CONTROL.sub(_escape, text)


def format_table(t: Table) -> str:
    t = Table(safe(t.title), tuple(map(safe, t.header)),
              tuple(tuple(map(safe, r)) for r in t.rows), t.right)  # fmt: skip
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
    lines = tuple(map(safe, b.lines))
    if b.style == "list":
        return "\n".join([safe(b.title), *("  - " + x for x in lines)])
    if b.hanging:
        return "\n".join(lines[:1] + tuple("  " + x for x in lines[1:]))
    return "\n".join(lines)


def _block(b: Block) -> list[str]:
    """Zero or more text parts of one block (a heading without terminal text shows nothing)."""
    if isinstance(b, Table):
        return [format_table(b)]
    if isinstance(b, Heading):
        return [safe(b.terminal)] if b.terminal else []
    if isinstance(b, Caption):
        return ["   ".join(f"{safe(label)}: {safe(value)}" for label, value, _ in b.facts)]
    if isinstance(b, Lines):
        return [_lines(b)]
    if isinstance(b, Details):
        return [part for inner in b.blocks for part in _block(inner)]
    return []  # Figures: a terminal cannot show them; the CLI says where they were written


def format_document(doc: Document) -> str:
    return "\n\n".join(part for b in doc.blocks for part in _block(b)) + "\n"
