"""Hostile text made visible and inert: the one neutraliser of every character that would act
instead of print.

Kernel and NVTX names, file names, GPU names and option values reach a terminal (reports, error
and warning lines, progress labels), Markdown, HTML and figures. An ESC or OSC sequence would
clear the screen or retitle the terminal, a BEL would ring it, a C1 control (U+009B is CSI on
many terminals) would start a sequence of its own, and so would the byte 0x9b of a file name
that is not UTF-8 (Python holds such a byte as a lone surrogate, U+DC9B); a bidi override would
reorder what is read. :func:`visible` shows each such character as an escape instead —
``\\x1b``, ``\\u202e``, a byte of a name that is not UTF-8 as that byte (``\\x9b``, ``\\xff``:
no lone surrogate reaches a report, so every report encodes as UTF-8 and no stream or file
refuses it), another lone surrogate as ``\\udXXX`` — and a line break as a space, so a message
stays one line. Printable text, non-ASCII letters included, passes unchanged.

Every medium uses it: the terminal report (:func:`nsysmoe.renderers.terminal.safe`), Markdown
and HTML escaping, figure text (line breaks kept) and every line the CLI writes to stderr
(:func:`one_line`).
"""

from __future__ import annotations

import re

#: C0 and C1 controls, DEL, the Unicode bidi marks, embeddings, overrides and isolates, the
#: line and paragraph separators, and every lone surrogate (a byte of a name that is not UTF-8,
#: ``surrogateescape``: U+DC80-U+DCFF, or one a broken text holds)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                     r"\ud800-\udfff]")  # fmt: skip
#: a run of line breaks (one space on one line), or one other character to show
_ONE = re.compile(r"[\n\r\v\f\x85\u2028\u2029]+|" + CONTROL.pattern)
#: a line break (kept), or one other character to show
_LINES = re.compile(r"\r?\n|" + CONTROL.pattern)
_BLANK = "\t\r\v\f\x85\u2028\u2029"  # each a space


def escape_char(ch: str) -> str:
    """One character as its escape: ``\\x1b``, ``\\u202e``, a byte's surrogate as the byte."""
    n = ord(ch)
    if 0xDC80 <= n <= 0xDCFF:  # a byte of a name that is not UTF-8: the byte
        return f"\\x{n - 0xDC00:02x}"
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def _one(m: re.Match[str]) -> str:
    ch = m.group()
    return " " if len(ch) > 1 or ch in _BLANK or ch == "\n" else escape_char(ch)


def _lines(m: re.Match[str]) -> str:
    ch = m.group()
    if ch.endswith("\n"):
        return "\n"
    return " " if ch in _BLANK else escape_char(ch)


def visible(text: str) -> str:
    """``text`` on one line with every control character shown as an escape (``\\x1b``,
    ``\\u202e``), a tab and a run of line breaks as a space."""
    return _ONE.sub(_one, text)


def visible_lines(text: str) -> str:
    """:func:`visible`, but a newline (or CR LF) stays a newline (text laid out in lines:
    figure titles)."""
    return _LINES.sub(_lines, text)


def flat(text: str, limit: int | None = None) -> str:
    """``text`` on one line, as it is otherwise: every run of whitespace one space, cut to
    ``limit`` characters (the last one "…") when given. No character is escaped: the one cutter
    of :func:`one_line` and of a worker's messages (:func:`nsysmoe.parallel.one_line`)."""
    text = " ".join(text.split())
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: object, limit: int | None = None) -> str:
    """A message for one stderr line: made :func:`visible`, then :func:`flat` (runs of blanks as
    one space, cut to ``limit`` characters when given)."""
    return flat(visible(str(text)), limit)


def noun(n: int, word: str) -> str:
    """``word`` as it goes with ``n``: singular for one ("1 sample", "3 samples")."""
    return word if n == 1 else word + "s"
