"""Text for a terminal (and ``-o`` files): any document, laid out by rich to a width, blocks
separated by a blank line.

Width: ``width``, else ``COLUMNS``, else the terminal's width when stdout is one, else
:data:`DEFAULT_WIDTH` (a report piped into a file or a CI log is the same everywhere). Tables
fit it: text cells wrap (or fold a word longer than the column), numbers stay whole and
right-aligned, headers wrap before numbers do; prose wraps with later lines indented. Colour
(verdicts, contract roles, warnings) only when writing to a terminal and ``NO_COLOR`` is unset
(https://no-color.org), or when ``FORCE_COLOR`` asks for it; otherwise plain text, no escape
sequences at all.

Trace text is hostile here: an ESC or OSC sequence in a kernel name would clear the screen or
retitle the terminal, a newline would break a table, a bidi override would reorder what is
read. :func:`safe` neutralises it before rich sees it, with the neutraliser every medium and
every stderr line shares (:func:`nsysmoe.text.visible`): such characters are shown as
``\\xNN`` / ``\\uNNNN`` escapes, line breaks as a space. Rich gets the result as
:class:`~rich.text.Text`, never as markup, so ``[bold red]`` in a name is printed as it is.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from collections.abc import Iterator

import numpy as np
from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from nsysmoe.renderers.document import (
    Block,
    Caption,
    Details,
    Document,
    Heading,
    Lines,
    Section,
    Table,
)
from nsysmoe.text import visible

#: the width when nothing says otherwise (stdout is not a terminal, ``COLUMNS`` unset)
DEFAULT_WIDTH = 100
#: narrower than this, tables are laid out as if this wide (lines are then longer than asked)
MIN_WIDTH = 40

#: whole cells coloured by what they say (verdicts, contract roles)
CELL_STYLES = {"improvement": "green", "regression": "red", "DIFFERS": "bold red",
               "variable under test": "cyan", "expected": "dim"}  # fmt: skip
#: words coloured in running text
_WORDS = re.compile(r"\b(improvement|regression|DIFFERS)\b")
_WARNING = "WARNING:"

#: the header rule: one line under the header, nothing else
_RULE_PLAIN = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
_RULE_COLOR = box.SIMPLE_HEAD
#: what ends a line: blanks, and colour escapes (kept) between them
_TRAILING = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+$", re.MULTILINE)
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def safe(text: str) -> str:
    """``text`` with every control character made visible and inert (one line):
    :func:`nsysmoe.text.visible`."""
    return visible(text)


def _stdout_is_tty() -> bool:
    try:
        return bool(sys.stdout is not None and sys.stdout.isatty())
    except (AttributeError, ValueError, OSError):  # a replaced or closed stdout
        return False


def detect_width(*, tty: bool | None = None) -> int:
    """``COLUMNS`` when set to a number, else the terminal's width when the text goes to a
    terminal (``tty``; None: when stdout is one), else :data:`DEFAULT_WIDTH`."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if _stdout_is_tty() if tty is None else tty:
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns or DEFAULT_WIDTH
    return DEFAULT_WIDTH


def detect_color(*, tty: bool | None = None) -> bool:
    """Colour when the text goes to a terminal (``tty``; None: when stdout is one) that is not
    ``TERM=dumb``, unless ``NO_COLOR`` is set (non-empty); ``FORCE_COLOR`` (non-empty, not
    ``0``) forces it, into a pipe too. ``NO_COLOR`` wins over both."""
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR", "")
    if force:
        return force.lower() not in ("0", "false", "no")
    return (_stdout_is_tty() if tty is None else tty) and os.environ.get("TERM") != "dumb"


def format_document(doc: Document, *, width: int | None = None, color: bool | None = None,
                    tty: bool | None = None) -> str:  # fmt: skip
    """``doc`` as terminal text ``width`` columns wide, coloured or not; the caller writes it.
    None detects each (:func:`detect_width`, :func:`detect_color`) for where the text goes:
    ``tty`` says whether that is a terminal (None: whether stdout is one; ``-o FILE``: False).
    """
    width = detect_width(tty=tty) if width is None else width
    color = detect_color(tty=tty) if color is None else color
    out = io.StringIO()
    console = Console(
        file=out, width=max(width, MIN_WIDTH), color_system="standard" if color else None,
        force_terminal=color, force_jupyter=False, force_interactive=False, no_color=not color,
        legacy_windows=False, markup=False, emoji=False, highlight=False, soft_wrap=False,
        tab_size=1,
    )  # fmt: skip
    first = True
    for b in doc.blocks:
        for part in _block(b, console, color):
            if not first:
                console.print()
            first = False
            for renderable in part:
                console.print(renderable, soft_wrap=isinstance(renderable, _Unwrapped))
    return _TRAILING.sub(lambda m: "".join(_SGR.findall(m.group())), out.getvalue())


class _Unwrapped(Text):
    """A line printed whole, however long (a command line is copied whole, not wrapped)."""


def _block(b: Block, console: Console, color: bool) -> Iterator[list[RenderableType]]:
    """Zero or more parts of one block, each a list of renderables printed together (a heading
    without terminal text shows nothing)."""
    if isinstance(b, Table):
        yield _table(b, console, color)
    elif isinstance(b, Heading):
        if b.terminal:
            yield [_para(b.terminal)]
    elif isinstance(b, Section):
        yield [_para(b.text, "bold")]
    elif isinstance(b, Caption):
        yield [_para(f"{label}: {value}") for label, value, _ in b.facts]
    elif isinstance(b, Lines):
        yield _lines(b)
    elif isinstance(b, Details):
        for inner in b.blocks:
            yield from _block(inner, console, color)
    # Figures: a terminal cannot show them; the CLI says where they were written


def _para(text: str, style: str = "", indent: int = 2) -> _Hanging:
    """A paragraph: trace text made safe, wrapped, lines after the first indented."""
    t = Text(safe(text), style=style)
    if not style:
        t.highlight_regex(_WORDS, style=lambda word: CELL_STYLES.get(word, ""))
    return _Hanging(t, indent)


#: the space between a number and its unit ("+6.5 %", "97.4 ms", "57.0 GiB"): never a line's end
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:%|[mµn]?s|[KMGT]i?B)(?!\w))")


def _bound(text: Text) -> tuple[Text, str]:
    """``text`` with each space between a number and its unit replaced by a character rich does
    not break at (a private-use one the text lacks; one cell wide, like the space), and it."""
    plain = text.plain
    bind = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in plain)
    bound = text.copy()
    bound.plain = _UNIT_SPACE.sub(bind, plain)  # the same length: the styles stay in place
    return bound, bind


class _Hanging:
    """``text`` wrapped to the console's width at spaces (a word longer than a line folded; a
    number kept with its unit), its later lines indented by ``indent``."""

    def __init__(self, text: Text, indent: int) -> None:
        self.text, self.indent = text, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        width = options.max_width
        text, bind = _bound(self.text)
        lines = list(text.wrap(console, width, overflow="fold"))
        if len(lines) > 1:  # what follows the first line, wrapped again narrower
            rest = text[len(lines[0].plain) :]
            rest = rest[len(rest.plain) - len(rest.plain.lstrip()) :]
            narrow = rest.wrap(console, max(1, width - self.indent), overflow="fold")
            lines = lines[:1] + [Text(" " * self.indent) + line for line in narrow]
        for line in lines:
            line.plain = line.plain.replace(bind, " ")
            line.end = "\n"
            yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text)


def _lines(b: Lines) -> list[RenderableType]:
    if b.style == "list":
        head = [_para(b.title)] if b.title else []
        return head + [_Unwrapped("  - " + safe(x)) for x in b.lines]
    out: list[RenderableType] = []
    for k, line in enumerate(b.lines):
        style = "yellow" if _WARNING in line else ""
        if b.hanging and k:
            out.append(Padding(_para(line, style), (0, 0, 0, 2)))
        else:
            out.append(_para(line, style))
    return out


def _table(t: Table, console: Console, color: bool) -> list[RenderableType]:
    header = [safe(h) for h in t.header]
    rows = [[safe(c) for c in r] for r in t.rows]
    widths = _widths(header, rows, t.right, console.width)
    for c, w in enumerate(widths):  # text too long for its column breaks after _ - . : / ,
        if w is not None and not t.right[c]:
            header[c] = _breakable(header[c], w)
            for r in rows:
                r[c] = _breakable(r[c], w)
    table = RichTable(
        box=_RULE_COLOR if color else _RULE_PLAIN, show_edge=False, padding=(0, 1, 0, 0),
        header_style="bold", expand=False, highlight=False,
    )  # fmt: skip
    for h, right, w in zip(header, t.right, widths, strict=True):
        table.add_column(Text(h), justify="right" if right else "left", overflow="fold", width=w)
    for r in rows:
        table.add_row(*(Text(c, style=CELL_STYLES.get(c, "")) for c in r))
    if not rows:
        table.add_row(*(["(none)"] + [""] * (len(header) - 1)))
    return [_para(t.title, "bold"), table] if t.title else [table]


#: where a word too long for its column may break: after these (a name's own separators), so
#: ``overlap_moe_expert_parallel_comm`` reads ``overlap_moe_`` / ``expert_parallel_`` / ``comm``
#: at 16 columns, not ``overlap_moe_expe`` / ``rt_parallel_comm``
_BREAK_AFTER = re.compile(r"[_\-.:/,]")


def _breakable(cell: str, width: int) -> str:
    """``cell`` with each word longer than ``width`` split into lines at :data:`_BREAK_AFTER`
    (the last such place on a line, if it fills at least half of it; else the word is cut at
    the width, as rich folds it). Rich wraps the rest at spaces. Words of wide characters
    are left to rich."""
    if all(len(word) <= width for word in cell.split()):
        return cell
    return " ".join(_pieces(word, width) if len(word) > width and cell_len(word) == len(word)
                    else word for word in cell.split(" "))  # fmt: skip


def _pieces(word: str, width: int) -> str:
    lines = []
    while len(word) > width:
        cut = max((m.end() for m in _BREAK_AFTER.finditer(word, 0, width)), default=0)
        cut = cut if 2 * cut >= width else width
        lines.append(word[:cut])
        word = word[cut:]
    return "\n".join([*lines, word])


def _widths(header: list[str], rows: list[list[str]], right: tuple[bool, ...],
            width: int) -> list[int | None]:  # fmt: skip
    """Column widths that fit ``width`` with the fewest lines: None (each as wide as its widest
    cell) where that fits. Else numbers are as wide as the widest (they never wrap; one with a
    share in parentheses may wrap before it: :func:`_unit`), text at
    least as wide as its longest word up to :data:`_WORD` (at least :data:`_NARROW`), and the
    room left goes where it saves the most lines (a header counts as a row, a word folded
    counts double). Big tables are measured on a sample of rows."""
    n = len(header)
    table = [header, *rows[:: max(1, len(rows) // _SAMPLE)]]
    words = [[[len(w) for w in row[c].split()] for row in table] for c in range(n)]
    natural = [max(sum(ws) + len(ws) - 1 for ws in col) for col in words]
    room = width - 2 * n + 1  # each column padded by one on the right, then one between
    if sum(natural) <= room:
        return [None] * n
    w = [_number_width(rows, c, max(words[c][0], default=1)) if right[c]
         else min(natural[c], max(_NARROW, min(_WORD, max(max(ws, default=1)
         for ws in words[c])))) for c in range(n)]  # fmt: skip
    spare = room - sum(w)
    if spare < 0:  # text narrower still, down to _TIGHT; numbers whole while that is enough
        text = [c for c in range(n) if not right[c]]
        room_text = room - sum(w[c] for c in range(n) if right[c])
        if text and room_text >= _TIGHT * len(text):
            level = max(_TIGHT, max(w[c] for c in text))
            while sum(min(w[c], level) for c in text) > room_text:
                level -= 1
            return [min(w[c], level) if not right[c] else w[c] for c in range(n)]
        return list(w)  # rich narrows every column (numbers fold): nothing else fits
    cache: dict[tuple[int, int], np.ndarray] = {}

    def heights(c: int, width: int) -> np.ndarray:
        if (c, width) not in cache:
            cache[c, width] = np.array([_height(ws, width) for ws in words[c]])
        return cache[c, width]

    while spare > 0:
        now = np.stack([heights(c, w[c]) for c in range(n)])
        top = now.max(axis=0)
        best: tuple[float, int, int] | None = None
        for c in range(n):
            others = np.delete(now, c, axis=0).max(axis=0) if n > 1 else np.ones_like(top)
            for d in range(1, min(spare, natural[c] - w[c]) + 1):
                new = heights(c, w[c] + d)
                rows_saved = int((top - np.maximum(others, new)).sum())
                cells_saved = int(now[c].sum() - new.sum())  # a wider neighbour may save rows
                gain = (_ROW * rows_saved + cells_saved) / d
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, c, d)
        if best is None:
            break
        _, c, d = best
        w[c] += d
        spare -= d
    for c in sorted(range(n), key=lambda c: -natural[c]):  # what no row needs: the widest text
        if not right[c] and spare > 0:
            d = min(spare, natural[c] - w[c])
            w[c], spare = w[c] + d, spare - d
    return list(w)


#: text columns are at least this wide, or as wide as their longest word up to _WORD (down to
#: _TIGHT where numbers would not fit otherwise); tables are measured on about _SAMPLE rows; a
#: row saved weighs _ROW cell lines saved
_NARROW, _WORD, _TIGHT, _SAMPLE, _ROW = 8, 16, 4, 200, 100


def _number_width(rows: list[list[str]], c: int, header_word: int) -> int:
    """A number column's least width: its widest number, or its header's longest word where
    that is wider, up to :data:`_WORD` (a longer word, a side's long name, folds)."""
    numbers = max((_unit(r[c]) for r in rows), default=1)
    return max(numbers, min(header_word, _WORD))


def _unit(number: str) -> int:
    """The widest part of a number cell that may not wrap: ``74.666 (0.13 %)`` may wrap before
    the parenthesis, ``-6.4 %`` and ``+36.86 pp`` not at all."""
    first, *more = number.split(" (")
    return max([len(first)] + [len(m) + 1 for m in more])


def _height(words: list[int], width: int) -> int:
    """Lines of a cell of words of these lengths wrapped at ``width``; a word folded over
    ``k`` lines counts ``2k - 1`` (a broken word reads worse than a wrapped line)."""
    lines, used = 1, 0
    for n in words:
        if used and used + 1 + n <= width:
            used += 1 + n
            continue
        if used:
            lines += 1
        folds = (n - 1) // width if n else 0
        lines += 2 * folds
        used = n - width * folds
    return lines
