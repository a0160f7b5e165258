"""Figures for reports: a per-GPU timeline of one steady iteration, the A/B time breakdown, and
communication per rank.

The tables say *how much* communication the compute hid; these figures show *where* (timeline),
*what the time was spent on* (breakdown, exact parts that add up to the span) and *which rank*
lags (ranks). matplotlib is imported inside the functions, so it stays an optional dependency and
costs the CLI nothing, and only :class:`matplotlib.figure.Figure` objects on an Agg canvas are
used, never pyplot's global state, so figures draw headless and in worker processes in parallel.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from nsysmoe.classify import COMPUTE_GEMM_ATTN, RuleSet, classify, default_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.overlap import COMM, Window
from nsysmoe.model import Trace
from nsysmoe.result import TraceAnalysis

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from nsysmoe.compare import Comparison
    from nsysmoe.compare.side import Side
    from nsysmoe.multirank import RunAnalysis

MAX_GPUS = 8  # timeline rows; more GPUs make unreadable slivers (the title says how many left out)
MAX_NAMED_RANKS = 16  # above this, ticks are rank indices and a mapping panel names the ranks
MAX_BARS = 4000  # per lane; beyond, sub-pixel gaps are closed before drawing
WIDTH = 12.0  # inches: readable on a laptop screen and in a PR at 100 % zoom

#: One colour per meaning, the same in every figure (colour-blind safe where it matters:
#: exposed vs hidden differ in lightness as well as hue).
COLORS = {
    "exposed comm": "#d62728",
    "hidden comm": "#2ca02c",
    "GEMM/attention": "#1f77b4",
    "other compute": "#9ecae1",
    "compute only": "#1f77b4",
    "copies": "#9467bd",
    "copies only": "#9467bd",
    "idle": "#bdbdbd",
}
#: Parts of the breakdown, in drawing order; they add up to the span exactly.
PARTS = ("exposed comm", "hidden comm", "compute only", "copies only", "idle")
PART_HELP = {
    "exposed comm": "exposed comm (no compute running)",
    "hidden comm": "hidden comm (under compute)",
    "compute only": "compute only (no comm)",
    "copies only": "memcpy/memset only",
    "idle": "idle (no kernel or copy)",
}


def _figure(width: float, height: float) -> Figure:
    """A figure on an Agg canvas, laid out by the constrained engine (no overlapping labels)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise NsysmoeError("plots need matplotlib; install it: pip install matplotlib") from exc
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _ms(ns: float) -> str:
    """Milliseconds with enough digits to tell small parts apart, few enough to fit a bar."""
    v = ns / 1e6
    return f"{v:,.1f} ms" if abs(v) >= 10 else f"{v:.3g} ms"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} %"


def _hidden(hidden: int, comm: int) -> str:
    return f"{100 * hidden / comm:.1f} %" if comm else "none, no communication kernels"


def _iset(df: pl.DataFrame) -> IntervalSet:
    return IntervalSet.from_arrays(df["start"].to_numpy(), df["end"].to_numpy())


def _bars(iset: IntervalSet, origin: int, pixel_ns: int) -> list[tuple[float, float]]:
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


# --- timeline -------------------------------------------------------------------------------


def _iteration(trace: Trace, analysis: TraceAnalysis, step: int | None) -> tuple[int, int, str]:
    """[lo, hi) of the iteration to draw and how it was chosen, for the title.

    The median-duration iteration is the typical one (warm-up and hiccups sit in the tails);
    its window is the one the per-iteration table measured.
    """
    it = analysis.iterations
    if it.is_empty():
        if step is not None:
            raise NsysmoeError(f"{analysis.path}: no iterations were found; drop step={step}")
        lo, hi = _work_bounds(trace, analysis.window)
        cut = (hi - lo) // 20
        return lo + 9 * cut, lo + 11 * cut, "middle 10 % of the window, as no iterations were found"
    if step is None:
        row = it.sort("step_ns", "step").row((len(it) - 1) // 2, named=True)
        how = f"iteration {row['step']}, the median-duration one of the {len(it)} analysed"
    else:
        rows = it.filter(pl.col("step") == step)
        if rows.is_empty():
            have = ", ".join(str(s) for s in it["step"])
            raise NsysmoeError(f"iteration {step} is not among the analysed ones ({have})")
        row, how = rows.row(0, named=True), f"iteration {step}"
    return row["start_ns"], row["end_ns"], how


def _work_bounds(trace: Trace, window: Window) -> tuple[int, int]:
    work = pl.concat(
        [
            window.select(trace.kernels).select("start", "end"),
            window.select(trace.memops).select("start", "end"),
        ]
    )
    return int(work["start"].min()), int(work["end"].max())


def _lanes(kernels: pl.DataFrame, memops: pl.DataFrame) -> dict[str, IntervalSet]:
    """Union intervals per lane of one GPU; idle = gaps between its first and last work."""
    klass = pl.col("class")
    comm = _iset(kernels.filter(klass == COMM))
    gemm = _iset(kernels.filter(klass.is_in(COMPUTE_GEMM_ATTN)))
    other = _iset(kernels.filter((klass != COMM) & ~klass.is_in(COMPUTE_GEMM_ATTN)))
    copies = _iset(memops)
    compute = gemm | other
    active = comm | compute | copies
    span = (
        IntervalSet.from_arrays([active.first_start], [active.last_end])
        if len(active)
        else IntervalSet.empty()
    )
    return {
        "comm": comm,
        "exposed comm": comm - compute,
        "hidden comm": comm & compute,
        "GEMM/attention": gemm,
        "other compute": other,
        "copies": copies,
        "idle": span - active,
    }


def timeline_figure(
    trace: Trace, analysis: TraceAnalysis, *, rules: RuleSet | None = None, step: int | None = None
) -> Figure:
    """Per-GPU timeline of one steady iteration: where communication ran, and what part of it
    ran under compute (hidden) or alone (exposed).

    ``step``: the iteration number to draw (default: the median-duration one of
    ``analysis.iterations``; without iterations, the middle 10 % of the analysis window).
    ``rules`` must be the rules the analysis used, so the lanes match its numbers. Each lane
    draws the exact interval union of its kernels (:class:`IntervalSet`), never single kernels,
    so overlapping streams do not double-draw.
    """
    lo, hi, how = _iteration(trace, analysis, step)
    gpus = list(analysis.gpus.iter_rows(named=True))
    shown = gpus[:MAX_GPUS]
    lanes = _gpu_lanes(trace, shown, Window(lo, hi), rules)
    names = ["communication", "GEMM/attention", "other compute"]
    names += ["memcpy/memset"] if any(len(x["copies"]) for x in lanes) else []
    names += ["idle"]
    lane_h = 0.34 if len(shown) <= 2 else 0.24  # many GPUs: thinner lanes, still one page
    fig = _figure(WIDTH, 1.3 + len(shown) * (0.65 + lane_h * len(names)))
    axes = fig.subplots(len(shown), 1, sharex=True, squeeze=False)[:, 0]
    for ax, g, lane in zip(axes, shown, lanes, strict=True):
        _draw_gpu(ax, g, lane, names, lo, (hi - lo) // 4000)
    axes[-1].set_xlim(0, (hi - lo) / 1e6)
    start = "iteration" if how.startswith("iteration") else "interval"
    axes[-1].set_xlabel(f"time since the {start} started (ms)")
    fig.suptitle(_timeline_title(trace, how, hi - lo, len(gpus), lanes), fontsize=11)
    _timeline_legend(fig, names)
    return fig


def _gpu_lanes(
    trace: Trace, shown: list[dict], w: Window, rules: RuleSet | None
) -> list[dict[str, IntervalSet]]:
    """The lanes of each shown GPU inside ``w``; the window's kernels are classified once and
    split per GPU, not classified again for every GPU."""
    kernels = w.select(classify(trace.kernels, rules or default_rules()))
    k_parts = kernels.partition_by("pid", "device", as_dict=True)
    m_parts = w.select(trace.memops).partition_by("pid", "device", as_dict=True)
    return [
        _lanes(
            k_parts.get((g["pid"], g["device"]), kernels.clear()),
            m_parts.get((g["pid"], g["device"]), trace.memops.clear()),
        )
        for g in shown
    ]


def _timeline_title(
    trace: Trace, how: str, span: int, n_gpus: int, lanes: list[dict[str, IntervalSet]]
) -> str:
    """The headline share over the drawn GPUs only, so the title agrees with the lanes below."""
    comm = sum(x["comm"].length for x in lanes)
    hidden = sum(x["hidden comm"].length for x in lanes)
    which = f"the first {MAX_GPUS} of {n_gpus} GPUs" if n_gpus > MAX_GPUS else "all GPUs"
    return (
        f"{Path(trace.path).name}: {how} ({_ms(span)})\n"
        f"communication hidden under compute ({which}): {_hidden(hidden, comm)}"
    )


def _timeline_legend(fig: Figure, names: list[str]) -> None:
    """One legend for all GPUs, listing only the lanes drawn (copies only when there were any)."""
    handles = [_patch(k, PART_HELP.get(k, k)) for k in ("exposed comm", "hidden comm")]
    handles += [_patch(k, k) for k in ("GEMM/attention", "other compute")]
    handles += [_patch("copies", "memcpy/memset")] if "memcpy/memset" in names else []
    handles += [_patch("idle", PART_HELP["idle"])]
    # below the axes: above them, constrained layout lets the legend run into the title
    fig.legend(
        handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8.5, frameon=False
    )


def _patch(color_key: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=COLORS[color_key], label=label)


def _draw_gpu(
    ax: Axes, gpu: dict, lanes: dict[str, IntervalSet], names: list[str], origin: int, pixel: int
) -> None:
    """One GPU's lanes, top to bottom in ``names`` order, each labelled with its busy time."""
    keys = {
        "communication": ("exposed comm", "hidden comm"),
        "GEMM/attention": ("GEMM/attention",),
        "other compute": ("other compute",),
        "memcpy/memset": ("copies",),
        "idle": ("idle",),
    }
    labels = []
    for y, name in enumerate(reversed(names)):
        for key in keys[name]:
            # an edge as wide as a hairline keeps µs-long intervals visible at this zoom
            ax.broken_barh(
                _bars(lanes[key], origin, pixel),
                (y - 0.4, 0.8),
                facecolors=COLORS[key],
                edgecolors=COLORS[key],
                linewidth=0.4,
            )
        total = lanes["comm" if name == "communication" else keys[name][0]].length
        labels.append(f"{name}  {_ms(total)}")
    ax.set_yticks(range(len(names)), labels, fontsize=8.5)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    comm, hidden = lanes["comm"].length, lanes["hidden comm"].length
    name = f" ({gpu['gpu_name']})" if gpu.get("gpu_name") else ""
    what = f"{_hidden(hidden, comm)} of communication hidden, {_ms(comm - hidden)} exposed"
    if not any(len(x) for x in lanes.values()):
        what = "no GPU work in this interval"
        ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center", color="grey")
    elif not comm:
        what = "no communication kernels in this interval"
    title = f"GPU: pid {gpu['pid']}, device {gpu['device']}{name}: {what}"
    ax.set_title(title, fontsize=9.5, loc="left")


# --- A/B breakdown --------------------------------------------------------------------------


def breakdown_parts(comparison: Comparison) -> dict[str, dict[str, int]]:
    """Per side label, the window's GPU time (all GPUs summed, ns) split into :data:`PARTS`.

    The parts are disjoint and add up to ``span_ns`` exactly: comm = exposed + hidden;
    comm ∪ compute = comm + (compute − hidden); active adds the copies that ran with neither
    (active − comm − compute + hidden); span = active + idle.
    """
    out = {}
    for side in (comparison.off, comparison.on):
        g = side.analysis.gpus
        s = {
            c: int(g[c].sum())
            for c in ("exposed_ns", "hidden_ns", "comm_ns", "compute_ns", "active_ns", "idle_ns")
        }
        out[side.label] = {
            "exposed comm": s["exposed_ns"],
            "hidden comm": s["hidden_ns"],
            "compute only": s["compute_ns"] - s["hidden_ns"],
            "copies only": s["active_ns"] - s["comm_ns"] - s["compute_ns"] + s["hidden_ns"],
            "idle": s["idle_ns"],
        }
    return out


def breakdown_figure(comparison: Comparison) -> Figure:
    """A/B stacked bars of where the window's GPU time went, all GPUs summed.

    Each bar is the span (first to last GPU work, per GPU, summed); the parts are disjoint, so
    a shorter bar is a faster window and a shrinking red part is communication that got hidden.
    Values too small to label inside their segment are in the legend, which lists every part.
    """
    parts = breakdown_parts(comparison)
    sides = (comparison.off, comparison.on)
    used = [p for p in PARTS if any(parts[s.label][p] for s in sides)]
    fig = _figure(WIDTH, 4.6)
    ax = fig.add_subplot()
    longest = max(sum(parts[s.label].values()) for s in sides) / 1e6 or 1.0
    for y, side in enumerate(sides):
        _stacked_bar(ax, y, parts[side.label], used, longest)
    ax.set_yticks(range(len(sides)), [_side_label(s) for s in sides], fontsize=9.5)
    ax.invert_yaxis()  # off on top, as in the tables
    ax.set_xlim(0, longest * 1.14)  # room for the span label
    ax.set_xlabel("GPU time in the analysed window (ms, summed over GPUs)")
    _grid(ax, "x")
    _breakdown_legend(fig, parts, used, sides)
    fig.suptitle(
        "Where the GPU time went, overlap "
        + " vs ".join(s.label for s in sides)
        + "\n"
        + _wrap_windows(sides),
        fontsize=10.5,
    )
    return fig


def _stacked_bar(ax: Axes, y: int, values: dict[str, int], used: list[str], longest: float) -> None:
    """One side's bar, parts left to right, then its span to the right of it.

    A part is labelled inside only when at least 7 % of the longest bar, so labels never spill
    over their segment; the legend carries every value anyway.
    """
    left = 0.0
    for part in used:
        width = values[part] / 1e6
        ax.barh(
            y,
            width,
            left=left,
            height=0.6,
            color=COLORS[part],
            edgecolor="white",
            linewidth=0.8,
        )
        if width >= 0.07 * longest:
            ax.text(
                left + width / 2,
                y,
                _ms(width * 1e6),
                ha="center",
                va="center",
                fontsize=9,
                color="black" if part == "idle" else "white",
            )
        left += width
    ax.text(left + 0.01 * longest, y, f"span {_ms(left * 1e6)}", va="center", fontsize=9)


def _breakdown_legend(
    fig: Figure, parts: dict[str, dict[str, int]], used: list[str], sides: Sequence[Side]
) -> None:
    """Every used part with its value per side (off → on), so parts too thin to label in the
    bars are still readable."""
    handles = [
        _patch(p, f"{PART_HELP[p]}: " + " → ".join(_ms(parts[s.label][p]) for s in sides))
        for p in used
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=3,
        fontsize=8.5,
        frameon=False,
        title=f"values: {' → '.join(s.label for s in sides)}",
        title_fontsize=8.5,
    )


def _side_label(side: Side) -> str:
    g = side.analysis.gpus
    comm = int(g["comm_ns"].sum())
    hidden = 100 * int(g["hidden_ns"].sum()) / comm if comm else None
    n = len(g)
    return f"overlap {side.label}\n{_pct(hidden)} of comm hidden\n{n} GPU{'s' if n != 1 else ''}"


def _wrap_windows(sides: Sequence[Side]) -> str:
    texts = [s.analysis.window_text for s in sides]
    if len(set(texts)) == 1:
        line = f"window (both sides): {texts[0]}"
    else:
        line = "; ".join(f"window {s.label}: {t}" for s, t in zip(sides, texts, strict=True))
    return "\n".join(textwrap.wrap(line, 130))


# --- ranks ----------------------------------------------------------------------------------


def _short(rank: str, limit: int = 34) -> str:
    """A rank label without its file extension, middle-truncated to fit under a tick."""
    rank = re.sub(r"\.(sqlite|nsys-rep|json(\.gz)?)(?=:)", "", rank)
    return rank if len(rank) <= limit else rank[: limit // 2 - 1] + "…" + rank[-(limit // 2) :]


def ranks_figure(run: RunAnalysis) -> Figure:
    """Exposed and hidden communication per rank (stacked: the bar is the rank's communication
    union), the median step time in a panel above when iterations were found, stragglers
    outlined and their tick labels coloured.

    Collectives wait for the slowest peer, so the straggler is the rank with the *least*
    communication (everyone else waits in comm kernels) and, with steps, the longest step.
    Step times get their own panel, not a twin axis, so no marker reads against the wrong
    scale. Up to :data:`MAX_NAMED_RANKS` ranks are named under the bars; beyond that the ticks
    are indices and a key below maps index → rank, so 64 ranks stay readable.
    """
    r = run.ranks
    if r.is_empty():
        raise NsysmoeError("no rank was analysed (every file failed); nothing to plot")
    n, ranks = len(r), r["rank"].to_list()
    x = np.arange(n)
    exposed, hidden, step = _per_rank_ms(r)
    has_steps, named = bool(np.isfinite(step).any()), n <= MAX_NAMED_RANKS
    fig, grid = _ranks_layout(n, has_steps, named)
    ax = fig.add_subplot(grid[int(has_steps)])
    width = 0.8 if n <= 32 else 0.9
    ax.bar(x, exposed, width, color=COLORS["exposed comm"], label=PART_HELP["exposed comm"])
    ax.bar(
        x,
        hidden,
        width,
        bottom=exposed,
        color=COLORS["hidden comm"],
        label=PART_HELP["hidden comm"],
    )
    colored = _mark_stragglers(ax, run, ranks, exposed + hidden, width)
    ax.set_ylim(0, (float(np.max(exposed + hidden)) or 1.0) * 1.3)  # headroom for the legend
    ax.set_ylabel("communication in the window (ms)")
    ax.set_xlim(-0.7, n - 0.3)
    _rank_ticks(ax, x, ranks, colored, key=None if named else (fig, grid))
    _grid(ax, "y")
    ax.legend(loc="upper left", fontsize=8, ncols=2, framealpha=0.9)
    if has_steps:
        _step_panel(fig.add_subplot(grid[0], sharex=ax), x, step, colored)
    fig.suptitle(_ranks_title(run, n, has_steps), fontsize=10.5)
    return fig


def _per_rank_ms(r: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exposed, hidden and median step time per rank in ms; steps are NaN where a run found no
    iterations (the column may be missing), so the caller can tell "no steps" from "0 ms"."""
    n = len(r)
    exposed, hidden = r["exposed_ns"].to_numpy() / 1e6, r["hidden_ns"].to_numpy() / 1e6
    step = (
        np.asarray(r["step_ns"].to_numpy() if "step_ns" in r.columns else [np.nan] * n, dtype=float)
        / 1e6
    )
    return exposed, hidden, step


def _ranks_layout(n: int, has_steps: bool, named: bool) -> tuple[Figure, Any]:
    """The figure and its row grid: step panel (if any), bars, index key (if not named).

    The key grows with its rows and the bars keep a fixed height, so 64 ranks stay as legible
    as 6.
    """
    key_rows = 0 if named else -(-n // 4)
    heights = [1.6] * has_steps + [4.0] + [0.13 * key_rows + 0.3] * (not named)
    fig = _figure(WIDTH, sum(heights) + (1.8 if named else 1.2))
    return fig, fig.add_gridspec(len(heights), 1, height_ratios=heights)


def _mark_stragglers(
    ax: Axes, run: RunAnalysis, ranks: list[str], total: np.ndarray, width: float
) -> dict[int, str]:
    """Outline each straggler's bar and return index → colour, for ticks, key and markers.

    A rank that is the straggler both ways gets both outlines but keeps the first colour for
    its tick, key entry and step marker.
    """
    marks = {
        "by_step_time": ("longest step", "#e6550d", "-"),
        "by_comm_wait": ("least comm: the others wait for it", "#6a3d9a", "--"),
    }
    colored: dict[int, str] = {}
    for kind, info in run.stragglers.items():
        if kind in marks and info.get("rank") in ranks:
            what, color, style = marks[kind]
            i = ranks.index(info["rank"])
            colored.setdefault(i, color)
            label = f"straggler ({what}): #{i} {_short(str(info['rank']), 60)}"
            ax.bar(
                i,
                total[i],
                width,
                fill=False,
                edgecolor=color,
                linewidth=2.2,
                linestyle=style,
                label=label,
            )
    return colored


def _rank_ticks(
    ax: Axes,
    x: np.ndarray,
    ranks: list[str],
    colored: dict[int, str],
    key: tuple[Figure, Any] | None,
) -> None:
    """Rank names under the bars, or (``key`` given) indices and a key panel naming them;
    stragglers' labels in their colour either way."""
    n = len(ranks)
    if key is None:
        ax.set_xticks(
            x,
            [f"#{i} {_short(s)}" for i, s in enumerate(ranks)],
            rotation=30,
            ha="right",
            rotation_mode="anchor",
            fontsize=8,
        )
        ax.set_xlabel("rank (file:pid:device)")
    else:
        # every index up to 64 (vertical, so they never touch); beyond, every k-th + stragglers
        ticks = sorted(set(x[:: max(1, -(-n // 64))].tolist()) | set(colored))
        ax.set_xticks(ticks, [str(i) for i in ticks], fontsize=7, rotation=90)
        ax.set_xlabel("rank index (names in the key below)")
        fig, grid = key
        _rank_key(fig.add_subplot(grid[-1]), ranks, colored)
    for tick, text in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True):
        if round(tick) in colored:
            text.set_color(colored[round(tick)])
            text.set_fontweight("bold")


def _step_panel(top: Axes, x: np.ndarray, step: np.ndarray, colored: dict[int, str]) -> None:
    """Median step time per rank against the median over ranks; stragglers in their colour."""
    n = len(x)
    top.plot(x, step, "D", color="black", markersize=3.5 if n > 32 else 5)
    for i, color in colored.items():  # the stragglers' markers in their colour
        top.plot([i], step[i : i + 1], "D", color=color, markersize=6 if n > 32 else 8)
    top.axhline(
        float(np.nanmedian(step)),
        color="grey",
        linewidth=0.8,
        linestyle=":",
        label="median over ranks",
    )
    top.set_ylabel("median step\ntime (ms)")
    top.set_ylim(0, np.nanmax(step) * 1.15)
    top.tick_params(labelbottom=False)
    top.legend(loc="lower right", fontsize=8)
    _grid(top, "y")


def _ranks_title(run: RunAnalysis, n: int, has_steps: bool) -> str:
    """Title with the window; one text when all files agree, so 64 ranks do not repeat it."""
    texts = {a.window_text for a in run.analyses}
    window = texts.pop() if len(texts) == 1 else "windows differ per file"
    note = "" if has_steps else " (no iterations found, so no step times)"
    title = f"Communication per rank ({n} ranks), exposed vs hidden under compute{note}; window: "
    return "\n".join(textwrap.wrap(title + window, 130))


def _grid(ax: Axes, axis: str) -> None:
    ax.grid(axis=axis, color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


def _rank_key(ax: Axes, ranks: list[str], colored: dict[int, str]) -> None:
    """index → rank, four columns, for runs too wide to name ranks under the bars."""
    ax.set_axis_off()
    rows = -(-len(ranks) // 4)
    for i, rank in enumerate(ranks):
        col, row = divmod(i, rows)
        ax.text(
            col / 4,
            1 - (row + 0.5) / rows,
            f"{i:>3} {_short(rank, 48)}",
            fontsize=6.5,
            family="monospace",
            va="center",
            transform=ax.transAxes,
            color=colored.get(i, "black"),
            fontweight="bold" if i in colored else "normal",
        )


# --- files ----------------------------------------------------------------------------------


def _slug(path: str) -> str:
    """The file name without its trace extension, safe in a file name and a Markdown link."""
    stem = re.sub(r"\.(sqlite|nsys-rep|json(\.gz)?)$", "", Path(path).name)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-") or "trace"


def write_plots(
    outdir: Path,
    *,
    analyses: Sequence[TraceAnalysis] = (),
    comparison: Comparison | None = None,
    run: RunAnalysis | None = None,
    traces: Sequence[Trace] = (),
    rules: RuleSet | None = None,
    formats: Sequence[str] = ("png", "svg"),
) -> list[Path]:
    """Write every figure that applies into ``outdir`` (created) and return the written paths.

    ``timeline-<file stem>`` for each analysis (given, or a side of ``comparison``, or a rank of
    ``run``) whose :class:`Trace` is in ``traces`` (matched by path: the timeline needs the
    kernels, which analyses do not keep); ``breakdown`` for a comparison; ``ranks`` for a run of
    more than one rank. One file per format; names that would collide get ``-2``, ``-3``…
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    todo = _figure_makers(analyses, comparison, run, traces, rules)
    written, used = [], set()
    for stem, make in todo:
        name, k = stem, 1
        while name in used:
            k += 1
            name = f"{stem}-{k}"
        used.add(name)
        written += _save(make(), outdir, name, formats)
    return written


def _figure_makers(
    analyses: Sequence[TraceAnalysis],
    comparison: Comparison | None,
    run: RunAnalysis | None,
    traces: Sequence[Trace],
    rules: RuleSet | None,
) -> list[tuple[str, Callable[[], Figure]]]:
    """(file stem, figure maker) for every figure that applies, one timeline per trace path.

    Makers, not figures: each figure is drawn only when its turn comes and dropped after it is
    saved, so a 64-rank run never holds 64 timelines in memory.
    """
    by_path = {t.path: t for t in traces}
    todo: list[tuple[str, Callable[[], Figure]]] = []
    every = list(analyses)
    every += [comparison.off.analysis, comparison.on.analysis] if comparison else []
    every += list(run.analyses) if run else []
    seen: set[str] = set()
    for a in every:
        if a.path in by_path and a.path not in seen:
            seen.add(a.path)
            make = partial(timeline_figure, by_path[a.path], a, rules=rules)
            todo.append((f"timeline-{_slug(a.path)}", make))
    if comparison is not None:
        todo.append(("breakdown", partial(breakdown_figure, comparison)))
    if run is not None and len(run.ranks) > 1:
        todo.append(("ranks", partial(ranks_figure, run)))
    return todo


def _save(fig: Figure, outdir: Path, name: str, formats: Sequence[str]) -> list[Path]:
    """``fig`` as ``outdir/name.<fmt>`` per format, the SVG without its creation date."""
    written = []
    for fmt in formats:
        path = outdir / f"{name}.{fmt}"
        # no creation date in the SVG, so regenerated plots diff only where they changed
        meta = {"Date": None} if fmt == "svg" else None
        fig.savefig(path, format=fmt, dpi=110, metadata=meta)
        written.append(path)
    return written
