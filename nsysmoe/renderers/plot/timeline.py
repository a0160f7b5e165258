"""Per-GPU timeline of one steady iteration: where each communication channel ran, and what part
of it ran under compute (hidden) or alone (exposed). Draws the lanes :mod:`nsysmoe.measure.lanes`
measured: each is an exact interval union, never single kernels, so overlapping streams do not
double-draw.

Lanes of a GPU, top to bottom: one per communication channel on it in the drawn interval (report
order, exposed red and hidden green; past the cap, its smallest channels share the last lane),
GEMM/attention, other compute, whole CUDA-graph rows (contents unknown, only where there are any),
memcpy/memset (only where there are any), idle.

Where the timeline carries the critical path of its iteration (``Timeline.critical_path``),
each GPU panel gets one more lane above the others, "critical path": the path's intervals on
that GPU's process, coloured by what the path was doing (compute, communication, host/sync, a
gap: unexplained or idle); a panel of a process the path never visits keeps an empty lane. A
process with several drawn GPUs gets its path once, on its first panel (the path names the
process, not the device). Without a path the figure is as it was."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

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

GRAPH_LANE = "CUDA graph (contents unknown)"
NO_COMM = "communication"  # the one comm lane of a GPU without communication in the interval
#: non-communication lane name → (GpuLanes field, colour key in COLORS)
LANES = {
    "GEMM/attention": ("gemm_attn", "GEMM/attention"),
    "other compute": ("other_compute", "other compute"),
    GRAPH_LANE: ("graph", "CUDA graph"),
    "memcpy/memset": ("copies", "copies"),
    "idle": ("idle", "idle"),
}
PATH_LANE = "critical path"
#: colour key in COLORS → legend text of the path lane's groups; a category not named in
#: PATH_GROUP is a communication channel's (its own name, ``.transfer`` or ``.wait``)
PATH_HELP = {
    "path compute": "path: compute and copies",
    "path comm": "path: communication",
    "path host": "path: host and sync",
    "path gap": "path: gap (unexplained, idle)",
}
PATH_GROUP = {
    "gemm": "path compute", "attention": "path compute", "compute.other": "path compute",
    "memcpy": "path compute", "memset": "path compute", "host": "path host",
    "sync": "path host", "unexplained": "path gap", "idle": "path gap",
}  # fmt: skip
#: below this many lanes in all, lanes keep their full height; past it they shrink to fit a page
_LANE_BUDGET = 40


def timeline_figure(tl: Timeline, side: str = "") -> Figure:
    """The timeline of ``tl``: one panel per drawn GPU, its lanes labelled with their busy time
    (and, where ``tl`` carries its critical path, a path lane on top of each panel); ``side``:
    the A/B side's name ("overlap off"), put before the file name in the title."""
    names = _other_lanes(tl)
    counts = [max(len(g.channels), 1) + len(names) for g in tl.gpus]
    paths = _path_sets(tl)
    n_lanes = sum(counts) + (len(tl.gpus) if paths is not None else 0)
    lane_h = 0.34 if len(tl.gpus) <= 2 else 0.24  # many GPUs: thinner lanes, still one page
    if n_lanes > _LANE_BUDGET:  # 8 GPUs × several channels: thinner still
        lane_h = max(0.15, lane_h * _LANE_BUDGET / n_lanes)
    fontsize = 8.5 if lane_h >= 0.2 else 7.5
    fig = figure(WIDTH, 1.5 + len(tl.gpus) * 0.65 + lane_h * n_lanes
                 + (0.4 if paths is not None else 0))  # fmt: skip
    if paths is None:
        axes = fig.subplots(len(tl.gpus), 1, sharex=True, squeeze=False,
                            gridspec_kw={"height_ratios": counts})[:, 0]  # fmt: skip
    else:
        axes = _path_axes(fig, counts)
    pixel = (tl.hi_ns - tl.lo_ns) // 4000
    for ax, g in zip(axes, tl.gpus, strict=True):
        _draw_gpu(ax, g, names, tl.lo_ns, pixel, fontsize)
    if paths is not None:
        for ax, top, (sets, label) in zip(axes, fig.axes[len(tl.gpus):], paths, strict=True):
            _draw_path(top, sets, label, tl.lo_ns, pixel, fontsize)
            top.set_title(ax.get_title(loc="left"), fontsize=9.5, loc="left")
            ax.set_title("", loc="left")
    axes[-1].set_xlim(0, (tl.hi_ns - tl.lo_ns) / 1e6)
    start = "iteration" if tl.how.startswith("iteration") else "interval"
    axes[-1].set_xlabel(f"time since the {start} started (ms)")
    fig.suptitle(_title(tl, side), fontsize=11)
    _legend(fig, tl, names)
    return fig


def _path_axes(fig: Figure, counts: list[int]) -> list[Axes]:
    """The GPU panels' lane axes, each under a one-lane axes for the critical path. The lane
    axes are made first, so ``fig.axes[i]`` is GPU i's lanes with or without a path lane."""
    gs = fig.add_gridspec(2 * len(counts), 1,
                          height_ratios=[r for c in counts for r in (1, c)])  # fmt: skip
    axes: list[Axes] = []
    for i in range(len(counts)):
        axes.append(fig.add_subplot(gs[2 * i + 1, 0], sharex=axes[0] if axes else None))
    tops = [fig.add_subplot(gs[2 * i, 0], sharex=axes[0]) for i in range(len(counts))]
    for ax in [*axes[:-1], *tops]:
        ax.tick_params(labelbottom=False)
    return axes


def _path_sets(tl: Timeline) -> list[tuple[dict[str, IntervalSet], str]] | None:
    """Per drawn GPU, its path lane: the path's intervals on its process by colour group (only
    on the process's first panel) and the lane's label; None where ``tl`` has no path."""
    if tl.critical_path.is_empty():
        return None
    path = tl.critical_path.with_columns(
        pl.col("category").replace_strict(PATH_GROUP, default="path comm").alias("group")
    )
    out: list[tuple[dict[str, IntervalSet], str]] = []
    first: dict[int, int] = {}
    for g in tl.gpus:
        if g.pid in first:
            out.append(({}, f"{PATH_LANE}  on device {first[g.pid]}"))
            continue
        first[g.pid] = g.device
        mine = path.filter(pl.col("pid") == g.pid)
        sets = {
            key: IntervalSet.from_arrays(rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy())
            for (key,), rows in mine.partition_by("group", as_dict=True).items()
        }
        total = int((mine["end_ns"] - mine["start_ns"]).sum())
        out.append((sets, f"{PATH_LANE}  {ms_label(total)}"))
    return out


def _draw_path(ax: Axes, sets: dict[str, IntervalSet], label: str, origin: int, pixel: int,
               fontsize: float) -> None:  # fmt: skip
    """One GPU's critical-path lane: its groups in the order of :data:`PATH_HELP`."""
    for key in PATH_HELP:
        if key in sets:
            _lane(ax, 0, sets[key], key, origin, pixel)
    ax.set_yticks([0], [label], fontsize=fontsize)
    ax.set_ylim(-0.6, 0.6)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


def _other_lanes(tl: Timeline) -> list[str]:
    """The lanes under the channel lanes, the same for every GPU: the graph and copy lanes only
    when a drawn GPU had whole-graph rows or copies in the interval."""
    names = ["GEMM/attention", "other compute"]
    names += [GRAPH_LANE] if any(len(g.graph) for g in tl.gpus) else []
    names += ["memcpy/memset"] if any(len(g.copies) for g in tl.gpus) else []
    return [*names, "idle"]


def channel_label(names: tuple[str, ...]) -> str:
    """A channel lane's name: the channel, or the channels sharing the lane."""
    if len(names) <= 2:
        return " + ".join(names)
    return f"{names[0]} + {len(names) - 1} more"


def _title(tl: Timeline, side: str = "") -> str:
    which = f"the first {len(tl.gpus)} of {tl.n_gpus} GPUs" if tl.n_gpus > len(tl.gpus) else (
        "all GPUs" if tl.n_gpus > 1 else "its GPU")  # fmt: skip
    start = "iteration" if tl.how.startswith("iteration") else "interval"
    name = f"{side}: {Path(tl.path).name}" if side else Path(tl.path).name
    title = (
        f"{name}: {tl.how} ({ms_label(tl.hi_ns - tl.lo_ns)})\n"
        f"communication hidden under compute in this {start} ({which}): "
        f"{hidden_label(tl.hidden_pct)}"
    )
    shared = sorted({c.names for g in tl.gpus for c in g.channels if len(c.names) > 1})
    if shared:
        title += (f"\nat most {tl.max_channel_lanes} channel lanes per GPU; the smallest share "
                  "the last: " + "; ".join(", ".join(s) for s in shared))  # fmt: skip
    if not tl.critical_path.is_empty():
        title += f"\n{_path_line(tl)}"
    return title


def _path_line(tl: Timeline) -> str:
    """What the path lanes show: the critical path of iteration N, its length in the drawn
    interval, and how much of it ran on processes not drawn."""
    length = tl.critical_path["end_ns"] - tl.critical_path["start_ns"]
    total = int(length.sum())
    elsewhere = int(length.filter(~tl.critical_path["pid"].is_in([g.pid for g in tl.gpus])).sum())
    line = (f"top lane of each GPU: the critical path of iteration {tl.critical_path['step'][0]}, "
            f"what bound its step ({ms_label(total)})")  # fmt: skip
    if elsewhere:
        line += f"; {ms_label(elsewhere)} of it on GPUs not drawn"
    return line


def _legend(fig: Figure, tl: Timeline, names: list[str]) -> None:
    """One legend for all GPUs, listing only the lanes drawn, titled with the channels drawn."""
    handles = [patch(k, PART_HELP.get(k, k)) for k in ("exposed comm", "hidden comm")]
    handles += [patch(LANES[n][1], n if n != "idle" else PART_HELP["idle"]) for n in names]
    if not tl.critical_path.is_empty():
        handles += [patch(k, text) for k, text in PATH_HELP.items()]
    channels: list[str] = []
    for g in tl.gpus:
        channels += [n for c in g.channels for n in c.names if n not in channels]
    shared = any(len(c.names) > 1 for g in tl.gpus for c in g.channels)
    lanes = (f"a lane per channel, at most {tl.max_channel_lanes} per GPU" if shared
             else "one lane per channel")  # fmt: skip
    what = (f"communication: {lanes} (" + ", ".join(channels) + ")") if channels else (
        "no communication kernels on the drawn GPUs")  # fmt: skip
    if not tl.critical_path.is_empty():
        what += f"; top lane: the critical path of iteration {tl.critical_path['step'][0]}"
    # below the axes: above them, constrained layout lets the legend run into the title
    # one row while it fits the figure's width, else two (a row of six ran off its edges),
    # three past eight entries (the path lane's four)
    rows = 1 if len(handles) <= 4 else 2 if len(handles) <= 8 else 3
    ncols = -(-len(handles) // rows)
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols,
               fontsize=8.5, frameon=False, title=what, title_fontsize=8.5)  # fmt: skip


def _lane(ax: Axes, y: int, iset: IntervalSet, color: str, origin: int, pixel: int) -> None:
    # an edge as wide as a hairline keeps µs-long intervals visible at this zoom
    ax.broken_barh(bars(iset, origin, pixel), (y - 0.4, 0.8), facecolors=COLORS[color],
                   edgecolors=COLORS[color], linewidth=0.4)  # fmt: skip


def _draw_gpu(ax: Axes, g: GpuLanes, names: list[str], origin: int, pixel: int,
              fontsize: float) -> None:  # fmt: skip
    """One GPU's lanes, channel lanes on top, each labelled with its busy time."""
    labels = []
    rows = len(g.channels or (None,)) + len(names)
    y = rows - 1
    for c in g.channels:
        _lane(ax, y, c.exposed, "exposed comm", origin, pixel)
        _lane(ax, y, c.hidden, "hidden comm", origin, pixel)
        comm, exposed = c.exposed.length + c.hidden.length, c.exposed.length
        labels.append(f"{channel_label(c.names)}  {ms_label(comm)}, {ms_label(exposed)} exp.")
        y -= 1
    if not g.channels:
        labels.append(f"{NO_COMM}  {ms_label(0)}")
        y -= 1
    for name in names:
        field, color = LANES[name]
        total: IntervalSet = getattr(g, field)
        _lane(ax, y, total, color, origin, pixel)
        labels.append(f"{name}  {ms_label(total.length)}")
        y -= 1
    ax.set_yticks(range(rows - 1, -1, -1), labels, fontsize=fontsize)
    ax.set_ylim(-0.6, rows - 0.4)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    name = f" ({g.gpu_name})" if g.gpu_name else ""
    exposed = ms_label(g.exposed.length)
    what = f"{hidden_label(g.hidden_pct)} of communication hidden, {exposed} exposed"
    lanes = (g.comm, g.gemm_attn, g.other_compute, g.graph, g.copies, g.idle)
    if not any(len(x) for x in lanes):
        what = "no GPU work in this interval"
        ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center", color="grey")
    elif not g.comm.length:
        what = "no communication kernels in this interval"
    ax.set_title(f"GPU: pid {g.pid}, device {g.device}{name}: {what}", fontsize=9.5, loc="left")
