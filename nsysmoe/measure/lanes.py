"""What the figures draw, measured here so the plotter only draws: per-GPU timeline lanes of one
iteration (exact interval unions, communication one lane per channel), and the A/B time
breakdown whose parts add up to the span."""

from __future__ import annotations

import polars as pl

from nsysmoe.classify import COMPUTE_GEMM_ATTN, GRAPH, OTHER_CHANNEL
from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.overlap import COMM, hidden_pct
from nsysmoe.model import Window, channel_order_key
from nsysmoe.results import GpuLanes, Timeline, Totals, TraceAnalysis

MAX_GPUS = 8  # timeline rows; more GPUs make unreadable slivers (the title says how many left out)
#: channel lanes per GPU; past it, the GPU's smallest channels share its last lane (named there)
MAX_CHANNEL_LANES = 4
#: Parts of the breakdown, in drawing order; they add up to the span exactly.
PARTS = ("exposed comm", "hidden comm", "compute only", "copies only", "idle")


def _iset(df: pl.DataFrame) -> IntervalSet:
    return IntervalSet.from_arrays(df["start"].to_numpy(), df["end"].to_numpy())


def path_step(analysis: TraceAnalysis) -> int | None:
    """The iteration whose critical path :attr:`~nsysmoe.results.CriticalPath.drawn` holds
    (the median step of the slowest process), where the analysis has one among its iterations."""
    cp = analysis.critical_path
    if cp is None or cp.drawn.is_empty() or analysis.iterations.is_empty():
        return None
    step = int(cp.drawn["step"][0])
    return step if step in analysis.iterations["step"] else None


def drawn_iteration(analysis: TraceAnalysis, step: int | None) -> tuple[int, int, str]:
    """[lo, hi) of the iteration to draw and how it was chosen, for the title.

    The median-duration iteration is the typical one (warm-up and hiccups sit in the tails);
    its window is the one the per-iteration table measured. Where the analysis has a critical
    path, the iteration drawn is the path's (its median by the slowest process's step, most
    often the same one), so the path lane and the lanes under it show one iteration.
    """
    it = analysis.iterations
    if it.is_empty():
        if step is not None:
            raise NsysmoeError(f"{analysis.path}: no iterations were found; drop step={step}")
        lo, hi = _work_bounds(analysis)
        cut = (hi - lo) // 20
        return lo + 9 * cut, lo + 11 * cut, "middle 10 % of the window, as no iterations were found"
    if step is None:
        row = it.sort("step_ns", "step").row((len(it) - 1) // 2, named=True)
        how = f"iteration {row['step']}, the median-duration one of the {len(it)} analysed"
        on_path = path_step(analysis)
        if on_path is not None and on_path != row["step"]:
            row = it.filter(pl.col("step") == on_path).row(0, named=True)
            how = (f"iteration {on_path}, the one of the {len(it)} analysed whose critical path "
                   "is drawn (the median step of the slowest process)")  # fmt: skip
    else:
        rows = it.filter(pl.col("step") == step)
        if rows.is_empty():
            have = ", ".join(str(s) for s in it["step"])
            raise NsysmoeError(f"iteration {step} is not among the analysed ones ({have})")
        row, how = rows.row(0, named=True), f"iteration {step}"
    return row["start_ns"], row["end_ns"], how


def _work_bounds(analysis: TraceAnalysis) -> tuple[int, int]:
    trace, window = analysis.classified.trace, analysis.window
    work = pl.concat(
        [
            window.select(trace.kernels).select("start", "end"),
            window.select(trace.memops).select("start", "end"),
        ]
    )
    return int(work["start"].min()), int(work["end"].max())


def channel_sets(comm_kernels: pl.DataFrame) -> dict[str, IntervalSet]:
    """⋃C_x per channel of one GPU's communication kernels, in report order (a kernel without
    a channel is :data:`~nsysmoe.classify.OTHER_CHANNEL`'s)."""
    if comm_kernels.is_empty():
        return {}
    if "channel" in comm_kernels.columns:
        channel = pl.col("channel").fill_null(OTHER_CHANNEL)
    else:
        channel = pl.lit(OTHER_CHANNEL)
    parts = comm_kernels.with_columns(channel.alias("channel")).partition_by(
        "channel", as_dict=True
    )
    names = sorted((k[0] for k in parts), key=channel_order_key)
    return {name: _iset(parts[(name,)]) for name in names}


def channel_lanes(sets: dict[str, IntervalSet], compute: IntervalSet,
                  cap: int = MAX_CHANNEL_LANES) -> tuple[GpuLanes.Channel, ...]:  # fmt: skip
    """One lane per channel (exposed = C_x − compute, hidden = C_x ∩ compute), in the order of
    ``sets``. Past ``cap`` channels, the ``cap - 1`` with the most communication time keep their
    own lane (still in report order) and the rest share the last one, their exact union."""
    names = list(sets)
    if cap > 0 and len(names) > cap:
        by_size = sorted(names, key=lambda n: (-sets[n].length, names.index(n)))
        keep = set(by_size[: cap - 1])
        groups = [(n,) for n in names if n in keep]
        groups.append(tuple(n for n in names if n not in keep))
    else:
        groups = [(n,) for n in names]
    lanes = []
    for group in groups:
        c = IntervalSet.empty()
        for n in group:
            c = c | sets[n]
        lanes.append(GpuLanes.Channel(group, exposed=c - compute, hidden=c & compute))
    return tuple(lanes)


def gpu_lanes(pid: int, device: int, gpu_name: str | None, kernels: pl.DataFrame,
              memops: pl.DataFrame, cap: int = MAX_CHANNEL_LANES) -> GpuLanes:  # fmt: skip
    """Union intervals per lane of one GPU; idle = gaps between its first and last work.

    Compute is every kernel that is not communication (whole CUDA-graph rows of unknown
    contents, class ``graph``, included, as in :mod:`nsysmoe.measure.overlap`); the graph rows
    get their own lane, so ``other_compute`` leaves them out."""
    klass = pl.col("class")
    comm_kernels = kernels.filter(klass == COMM)
    comm = _iset(comm_kernels)
    gemm = _iset(kernels.filter(klass.is_in(COMPUTE_GEMM_ATTN)))
    graph = _iset(kernels.filter(klass == GRAPH))
    other = _iset(kernels.filter((klass != COMM) & (klass != GRAPH)
                                 & ~klass.is_in(COMPUTE_GEMM_ATTN)))  # fmt: skip
    copies = _iset(memops)
    compute = gemm | other | graph
    active = comm | compute | copies
    span = (
        IntervalSet.from_arrays([active.first_start], [active.last_end])
        if len(active)
        else IntervalSet.empty()
    )
    hidden = comm & compute
    channels = channel_lanes(channel_sets(comm_kernels), compute, cap)
    return GpuLanes(pid, device, gpu_name, comm=comm, exposed=comm - compute, hidden=hidden,
                    gemm_attn=gemm, other_compute=other, copies=copies, idle=span - active,
                    hidden_pct=hidden_pct(hidden.length, comm.length), graph=graph,
                    channels=channels)  # fmt: skip


def timeline(analysis: TraceAnalysis, step: int | None = None) -> Timeline:
    """The lanes of the first :data:`MAX_GPUS` GPUs over one iteration (default: the
    median-duration one; without iterations, the middle 10 % of the window), from the classes
    and channels the analysis was measured with; at most :data:`MAX_CHANNEL_LANES` channel
    lanes per GPU."""
    lo, hi, how = drawn_iteration(analysis, step)
    source, w = analysis.classified, Window(lo, hi)
    gpus = list(analysis.gpus.iter_rows(named=True))
    kernels = w.select(source.kernels)
    k_parts = kernels.partition_by("pid", "device", as_dict=True)
    memops = source.trace.memops
    m_parts = w.select(memops).partition_by("pid", "device", as_dict=True)
    lanes = tuple(
        gpu_lanes(g["pid"], g["device"], g.get("gpu_name"),
                  k_parts.get((g["pid"], g["device"]), kernels.clear()),
                  m_parts.get((g["pid"], g["device"]), memops.clear()))
        for g in gpus[:MAX_GPUS]
    )  # fmt: skip
    comm = sum(g.comm.length for g in lanes)
    hidden = sum(g.hidden.length for g in lanes)
    return Timeline(analysis.path, lo, hi, how, lanes, len(gpus), hidden_pct(hidden, comm),
                    max_channel_lanes=MAX_CHANNEL_LANES,
                    critical_path=path_intervals(analysis, step, lo, hi))  # fmt: skip


def path_intervals(analysis: TraceAnalysis, step: int | None, lo: int, hi: int
                   ) -> pl.DataFrame:  # fmt: skip
    """The drawn critical path's intervals (step, pid, start_ns, end_ns, category) clipped to
    [lo, hi), where the iteration drawn is the path's (``step`` None or the path's); else an
    empty frame: the figure then has no path lane."""
    on_path, cp = path_step(analysis), analysis.critical_path
    if on_path is None or cp is None or (step is not None and step != on_path):
        return pl.DataFrame()
    return cp.drawn.with_columns(pl.col("start_ns").clip(lo, hi), pl.col("end_ns").clip(lo, hi)
                              ).filter(pl.col("end_ns") > pl.col("start_ns"))  # fmt: skip


def breakdown(t: Totals) -> dict[str, int]:
    """A window's GPU time (all GPUs summed, ns) split into :data:`PARTS`.

    The parts are disjoint and add up to ``span_ns`` exactly: comm = exposed + hidden;
    comm ∪ compute = comm + (compute − hidden); active adds the copies that ran with neither
    (active − comm − compute + hidden); span = active + idle.
    """
    return {
        "exposed comm": t.exposed_ns,
        "hidden comm": t.hidden_ns,
        "compute only": t.compute_ns - t.hidden_ns,
        "copies only": t.active_ns - t.comm_ns - t.compute_ns + t.hidden_ns,
        "idle": t.idle_ns,
    }
