"""What every figure shares: the headless figure, one colour per meaning, value labels."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet
from nsysmoe.renderers.names import distinct, side_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from nsysmoe.results import Side, TraceAnalysis

MAX_BARS = 4000  # per lane; beyond, sub-pixel gaps are closed before drawing
WIDTH = 12.0  # inches: readable on a laptop screen and in a PR at 100 % zoom

#: One colour per meaning, the same in every figure (colour-blind safe where it matters:
#: exposed vs hidden differ in lightness as well as hue).
COLORS = {
    "exposed comm": "#d62728",
    "hidden comm": "#2ca02c",
    "GEMM/attention": "#1f77b4",
    "other compute": "#9ecae1",
    "CUDA graph": "#8c564b",
    "compute only": "#1f77b4",
    "copies": "#9467bd",
    "copies only": "#9467bd",
    "idle": "#bdbdbd",
    # the critical-path lane of a timeline, by what the path was doing
    "path compute": "#1f77b4",
    "path comm": "#d62728",
    "path host": "#ff7f0e",
    "path gap": "#636363",
}
PART_HELP = {
    "exposed comm": "exposed comm (no compute running)",
    "hidden comm": "hidden comm (under compute)",
    "compute only": "compute only (no comm)",
    "copies only": "memcpy/memset only",
    "idle": "idle (no kernel or copy)",
}


def figure(width: float, height: float) -> Figure:
    """A figure on an Agg canvas, laid out by the constrained engine (no overlapping labels),
    its text drawn literally (:mod:`~nsysmoe.renderers.plot.literal`: no mathtext, no control
    characters), whoever sets it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        from nsysmoe.renderers.plot.literal import LiteralFigure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise NsysmoeError("plots need matplotlib; install it: pip install matplotlib") from exc
    fig = LiteralFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def ms_label(ns: float) -> str:
    """Milliseconds with enough digits to tell small parts apart, few enough to fit a bar."""
    v = ns / 1e6
    return f"{v:,.1f} ms" if abs(v) >= 10 else f"{v:.3g} ms"


def pct_label(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} %"


def hidden_label(hidden_pct: float | None) -> str:
    return pct_label(hidden_pct) if hidden_pct is not None else "none, no communication kernels"


def bars(iset: IntervalSet, origin: int, pixel_ns: int) -> list[tuple[float, float]]:
    """(start, width) in ms since ``origin``, as ``broken_barh`` wants them.

    Past :data:`MAX_BARS` intervals, gaps up to ``pixel_ns`` wide are closed first (a
    morphological closing: grow each end, union, shrink back): invisible at the figure's
    resolution, and it keeps a long interval from becoming a 10-MB SVG. Lane totals in the
    labels always come from the exact sets.
    """
    if len(iset) > MAX_BARS and pixel_ns > 0:
        grown = IntervalSet.from_arrays(iset.starts, iset.ends + pixel_ns)
        iset = IntervalSet.from_arrays(grown.starts, grown.ends - pixel_ns)
    starts = (iset.starts - origin) / 1e6
    return list(zip(starts.tolist(), ((iset.ends - iset.starts) / 1e6).tolist(), strict=True))


def label_room(ends: Sequence[tuple[float, str]], fontsize: float, axes_in: float) -> float:
    """The x-axis limit at which each label, written just right of its bar's end (``(end,
    text)`` in data units), still ends inside an axes about ``axes_in`` inches wide: labels
    never run off the figure, however long the longest bar's is. Text width is estimated
    generously (0.6 em a character)."""
    limit = 0.0
    for end, text in ends:
        share = len(text) * 0.6 * fontsize / 72 / axes_in  # of the axes width
        limit = max(limit, end / max(0.97 - 0.01 - share, 0.2))
    return limit


def patch(color_key: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=COLORS[color_key], label=label)


def grid(ax: Axes, axis: str) -> None:
    ax.grid(axis=axis, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


_TRACE_EXT = re.compile(r"\.(sqlite|nsys-rep|json(\.gz)?)(?=:)")


def short_ranks(ranks: Sequence[str], limit: int = 34) -> list[str]:
    """Rank labels without their file extension (kept where dropping it would make two ranks
    read the same), cut to ``limit`` characters by :func:`nsysmoe.renderers.names.distinct`:
    never so far that two ranks read alike."""
    bare = [_TRACE_EXT.sub("", r) for r in ranks]
    owners: dict[str, set[str]] = {}
    for rank, b in zip(ranks, bare, strict=True):
        owners.setdefault(b, set()).add(rank)
    keep = [r if len(owners[b]) > 1 else b for r, b in zip(ranks, bare, strict=True)]
    return distinct(keep, limit)


def side_names(sides: Sequence[Side]) -> list[str]:
    """The sides' names (``Side.name``: "overlap off", …) cut as the report's tables cut them
    (:func:`~nsysmoe.renderers.names.side_labels`), told apart by their place ("off", "on")
    should two sides carry the same name."""
    names = list(side_labels(*(s.name for s in sides))) if len(sides) == 2 else [
        s.name for s in sides]  # fmt: skip
    if len(set(names)) == len(names):
        return names
    return [f"{n} ({s.label})" if names.count(n) > 1 else n
            for n, s in zip(names, sides, strict=True)]  # fmt: skip


def window_key(a: TraceAnalysis) -> tuple[object, ...]:
    """What an analysis' window *is*, comparable across traces (whose clocks differ): the
    iteration numbers of an iteration window, the bounds of a time window (counted from the
    first GPU activity for a relative one), or the whole trace. Two windows with equal keys
    are the same window however their descriptions differ (e.g. "7 of 8" vs "7 of 9 complete
    iterations")."""
    choice = a.window_choice
    if choice.kind == "whole":
        return ("whole trace",)
    if choice.kind == "time":
        origin = choice.origin_ns or 0
        lo, hi = a.window.start_ns, a.window.end_ns
        return ("time", choice.origin_ns is not None, None if lo is None else lo - origin,
                None if hi is None else hi - origin)  # fmt: skip
    return ("iterations", tuple(sorted(a.iterations["step"].to_list())))


def same_window_text(a: TraceAnalysis) -> str:
    """A window the traces share (equal :func:`window_key`), in words true of every one of
    them, for when their own descriptions differ in side details (warm-up, clock origin)."""
    key = window_key(a)
    if key[0] == "iterations":
        steps = sorted(a.iterations["step"].to_list())
        return f"the same {len(steps)} iterations, {steps[0]}–{steps[-1]}"
    if key[0] == "time":
        lo, hi = ("start" if v is None else f"{v:,} ns" for v in key[2:])
        return f"the same time window, [{lo}, {hi})" + (" from the first GPU activity"
                                                          if key[1] else "")  # fmt: skip
    return "the whole trace"


def windows_line(sides: Sequence[Side]) -> str:
    """The sides' windows for a title, wrapped: once when they are the same window (in the
    sides' own words where those agree); "windows differ" only when they are not the same
    window, with each side's."""
    analyses = [s.analysis for s in sides]
    texts = [a.window_choice.description for a in analyses]
    if len({window_key(a) for a in analyses}) > 1:
        each = "; ".join(f"{n}: {t}" for n, t in zip(side_names(sides), texts, strict=True))
        line = f"windows differ: {each}"
    elif len(set(texts)) == 1:
        line = f"window (both sides): {texts[0]}"
    else:
        line = f"window (both sides): {same_window_text(analyses[0])}"
    return "\n".join(textwrap.wrap(line, 130))


def stacked_segments(ax: Axes, y: int, parts: Sequence[tuple[str, float]], longest: float) -> float:
    """Parts (colour key, width in ms) of one horizontal bar, left to right, each labelled
    inside only when at least 7 % of ``longest`` (labels never spill over their segment);
    returns where the bar ends."""
    left = 0.0
    for color, width in parts:
        ax.barh(y, width, left=left, height=0.6, color=COLORS[color], edgecolor="white",
                linewidth=0.8)  # fmt: skip
        if width >= 0.07 * longest:
            ax.text(left + width / 2, y, ms_label(width * 1e6), ha="center", va="center",
                    fontsize=9, color="black" if color == "idle" else "white")  # fmt: skip
        left += width
    return left
