"""What every figure shares: the headless figure, one colour per meaning, value labels."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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
}
PART_HELP = {
    "exposed comm": "exposed comm (no compute running)",
    "hidden comm": "hidden comm (under compute)",
    "compute only": "compute only (no comm)",
    "copies only": "memcpy/memset only",
    "idle": "idle (no kernel or copy)",
}


def figure(width: float, height: float) -> Figure:
    """A figure on an Agg canvas, laid out by the constrained engine (no overlapping labels)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise NsysmoeError("plots need matplotlib; install it: pip install matplotlib") from exc
    fig = Figure(figsize=(width, height), layout="constrained")
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


def patch(color_key: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=COLORS[color_key], label=label)


def grid(ax: Axes, axis: str) -> None:
    ax.grid(axis=axis, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


def short_rank(rank: str, limit: int = 34) -> str:
    """A rank label without its file extension, middle-truncated to fit under a tick."""
    rank = re.sub(r"\.(sqlite|nsys-rep|json(\.gz)?)(?=:)", "", rank)
    return rank if len(rank) <= limit else rank[: limit // 2 - 1] + "…" + rank[-(limit // 2) :]
