"""Figure text is literal text: the one place it is made so, for every figure.

Names from a trace or the command line (side labels, file names, GPU and channel names) reach
titles, tick labels, legends and annotations. matplotlib would read ``$…$`` in them as mathtext
(``${HOST}_$RANK.sqlite`` fails to parse: an internal error) and draw a control character as a
missing glyph, with a warning that prints the character itself. :class:`LiteralFigure` makes
every text of the figure literal just before it is drawn, whoever set it: controls shown as
escapes (:func:`nsysmoe.text.visible_lines`: a newline stays a line break), ``$`` escaped
(``\\$``, which matplotlib draws as ``$``), each line cut to :data:`MAX_LINE` characters.
Tick labels are set from their formatter while the axis draws, so the formatters that hold
given labels (``set_ticks(ticks, labels)``: a function of a dict, or a fixed list) give literal
labels; numeric tick labels are matplotlib's own and left alone.

This module imports matplotlib: only :func:`nsysmoe.renderers.plot.common.figure` imports it,
when a figure is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, Formatter, FuncFormatter

from nsysmoe.text import visible_lines

#: a line of figure text longer than this is cut (with "…"): a name from a trace can be any
#: length, and laying out a 100,000-character title costs seconds and megabytes of SVG
MAX_LINE = 300

_DONE = "_nsysmoe_literal"  # on a Text: the text it was given; on a formatter: True


def _literal_func(func: Any) -> Any:
    def labels(x: float, pos: int | None = None) -> str:
        return literal(str(func(x, pos)))

    return labels


def literal(text: str) -> str:
    """``text`` as a figure draws it as written: controls visible, ``$`` escaped, lines cut."""
    lines = visible_lines(text).split("\n")
    lines = [ln if len(ln) <= MAX_LINE else ln[: MAX_LINE - 1] + "…" for ln in lines]
    return "\n".join(lines).replace("$", r"\$")


def _texts(artist: Artist) -> Iterator[Text]:
    """Every text under ``artist`` but tick labels (an axis' own label included)."""
    for child in artist.get_children():
        if isinstance(child, Axis):
            yield child.label
            continue
        if isinstance(child, Text):
            yield child
        yield from _texts(child)


def make_literal(fig: Figure) -> None:
    """Every text of ``fig`` literal (:func:`literal`), once: a text set since is done again."""
    for t in _texts(fig):
        raw = t.get_text()
        if raw and getattr(t, _DONE, None) != raw:
            shown = literal(raw)
            t.set_text(shown)
            setattr(t, _DONE, shown)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for f in (axis.get_major_formatter(), axis.get_minor_formatter()):
                _literal_labels(f)


def _literal_labels(f: Formatter) -> None:
    """A formatter of given labels made to give them literally (once)."""
    if getattr(f, _DONE, False):
        return
    if isinstance(f, FixedFormatter):
        f.seq = [literal(str(s)) for s in f.seq]
    elif isinstance(f, FuncFormatter):
        f.func = _literal_func(f.func)
    else:
        return
    setattr(f, _DONE, True)


class LiteralFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` whose text is literal when drawn (saved, shown)."""

    def draw(self, renderer: Any) -> None:
        make_literal(self)
        super().draw(renderer)
