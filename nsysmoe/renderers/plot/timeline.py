"""Per-GPU timeline of one steady iteration: where communication ran, and what part of it ran
under compute (hidden) or alone (exposed). Draws the lanes :mod:`nsysmoe.measure.lanes` measured:
each is an exact interval union, never single kernels, so overlapping streams do not double-draw."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nsysmoe.intervals import IntervalSet
from nsysmoe.renderers.plot.common import (
    COLORS,
    PART_HELP,
    WIDTH,
    bars,
    figure,
    hidden_label,
    ms_label,
    patch,
)
from nsysmoe.results import GpuLanes, Timeline

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: lane name → the GpuLanes fields drawn in it (colour keys in COLORS)
LANES = {
    "communication": (("exposed", "exposed comm"), ("hidden", "hidden comm")),
    "GEMM/attention": (("gemm_attn", "GEMM/attention"),),
    "other compute": (("other_compute", "other compute"),),
    "memcpy/memset": (("copies", "copies"),),
    "idle": (("idle", "idle"),),
}
TOTAL = {"communication": "comm", "GEMM/attention": "gemm_attn", "other compute": "other_compute",
         "memcpy/memset": "copies", "idle": "idle"}  # fmt: skip


def timeline_figure(tl: Timeline) -> Figure:
    """The timeline of ``tl``: one panel per drawn GPU, its lanes labelled with their busy time."""
    names = ["communication", "GEMM/attention", "other compute"]
    names += ["memcpy/memset"] if any(len(g.copies) for g in tl.gpus) else []
    names += ["idle"]
    lane_h = 0.34 if len(tl.gpus) <= 2 else 0.24  # many GPUs: thinner lanes, still one page
    fig = figure(WIDTH, 1.3 + len(tl.gpus) * (0.65 + lane_h * len(names)))
    axes = fig.subplots(len(tl.gpus), 1, sharex=True, squeeze=False)[:, 0]
    for ax, g in zip(axes, tl.gpus, strict=True):
        _draw_gpu(ax, g, names, tl.lo_ns, (tl.hi_ns - tl.lo_ns) // 4000)
    axes[-1].set_xlim(0, (tl.hi_ns - tl.lo_ns) / 1e6)
    start = "iteration" if tl.how.startswith("iteration") else "interval"
    axes[-1].set_xlabel(f"time since the {start} started (ms)")
    fig.suptitle(_title(tl), fontsize=11)
    _legend(fig, names)
    return fig


def _title(tl: Timeline) -> str:
    which = f"the first {len(tl.gpus)} of {tl.n_gpus} GPUs" if tl.n_gpus > len(tl.gpus) else (
        "all GPUs")  # fmt: skip
    return (
        f"{Path(tl.path).name}: {tl.how} ({ms_label(tl.hi_ns - tl.lo_ns)})\n"
        f"communication hidden under compute ({which}): {hidden_label(tl.hidden_pct)}"
    )


def _legend(fig: Figure, names: list[str]) -> None:
    """One legend for all GPUs, listing only the lanes drawn (copies only when there were any)."""
    handles = [patch(k, PART_HELP.get(k, k)) for k in ("exposed comm", "hidden comm")]
    handles += [patch(k, k) for k in ("GEMM/attention", "other compute")]
    handles += [patch("copies", "memcpy/memset")] if "memcpy/memset" in names else []
    handles += [patch("idle", PART_HELP["idle"])]
    # below the axes: above them, constrained layout lets the legend run into the title
    fig.legend(
        handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8.5, frameon=False
    )


def _draw_gpu(ax: Axes, g: GpuLanes, names: list[str], origin: int, pixel: int) -> None:
    """One GPU's lanes, top to bottom in ``names`` order, each labelled with its busy time."""
    labels = []
    for y, name in enumerate(reversed(names)):
        for field, color in LANES[name]:
            # an edge as wide as a hairline keeps µs-long intervals visible at this zoom
            ax.broken_barh(bars(getattr(g, field), origin, pixel), (y - 0.4, 0.8),
                           facecolors=COLORS[color], edgecolors=COLORS[color],
                           linewidth=0.4)  # fmt: skip
        total: IntervalSet = getattr(g, TOTAL[name])
        labels.append(f"{name}  {ms_label(total.length)}")
    ax.set_yticks(range(len(names)), labels, fontsize=8.5)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    comm = g.comm.length
    name = f" ({g.gpu_name})" if g.gpu_name else ""
    exposed = ms_label(g.exposed.length)
    what = f"{hidden_label(g.hidden_pct)} of communication hidden, {exposed} exposed"
    lanes = (g.comm, g.exposed, g.hidden, g.gemm_attn, g.other_compute, g.copies, g.idle)
    if not any(len(x) for x in lanes):
        what = "no GPU work in this interval"
        ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center", color="grey")
    elif not comm:
        what = "no communication kernels in this interval"
    ax.set_title(f"GPU: pid {g.pid}, device {g.device}{name}: {what}", fontsize=9.5, loc="left")
