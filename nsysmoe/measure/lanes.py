"""What the figures draw, measured here so the plotter only draws: per-GPU timeline lanes of one
iteration (exact interval unions), and the A/B time breakdown whose parts add up to the span."""

from __future__ import annotations

import polars as pl

from nsysmoe.classify import COMPUTE_GEMM_ATTN
from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.overlap import COMM, hidden_pct
from nsysmoe.model import Window
from nsysmoe.results import GpuLanes, Timeline, Totals, TraceAnalysis

MAX_GPUS = 8  # timeline rows; more GPUs make unreadable slivers (the title says how many left out)
#: Parts of the breakdown, in drawing order; they add up to the span exactly.
PARTS = ("exposed comm", "hidden comm", "compute only", "copies only", "idle")


def _iset(df: pl.DataFrame) -> IntervalSet:
    return IntervalSet.from_arrays(df["start"].to_numpy(), df["end"].to_numpy())


def drawn_iteration(analysis: TraceAnalysis, step: int | None) -> tuple[int, int, str]:
    """[lo, hi) of the iteration to draw and how it was chosen, for the title.

    The median-duration iteration is the typical one (warm-up and hiccups sit in the tails);
    its window is the one the per-iteration table measured.
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
    else:
        rows = it.filter(pl.col("step") == step)
        if rows.is_empty():
            have = ", ".join(str(s) for s in it["step"])
            raise NsysmoeError(f"iteration {step} is not among the analysed ones ({have})")
        row, how = rows.row(0, named=True), f"iteration {step}"
    return row["start_ns"], row["end_ns"], how


def _work_bounds(analysis: TraceAnalysis) -> tuple[int, int]:
    trace, window = _source(analysis).trace, analysis.window
    work = pl.concat(
        [
            window.select(trace.kernels).select("start", "end"),
            window.select(trace.memops).select("start", "end"),
        ]
    )
    return int(work["start"].min()), int(work["end"].max())


def _source(analysis: TraceAnalysis):  # noqa: ANN202 - a ClassifiedTrace
    if analysis.source is None:
        raise NsysmoeError(f"{analysis.path}: analysis was detached from its trace; re-analyse it")
    return analysis.source


def gpu_lanes(pid: int, device: int, gpu_name: str | None, kernels: pl.DataFrame,
              memops: pl.DataFrame) -> GpuLanes:  # fmt: skip
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
    hidden = comm & compute
    return GpuLanes(pid, device, gpu_name, comm=comm, exposed=comm - compute, hidden=hidden,
                    gemm_attn=gemm, other_compute=other, copies=copies, idle=span - active,
                    hidden_pct=hidden_pct(hidden.length, comm.length))  # fmt: skip


def timeline(analysis: TraceAnalysis, step: int | None = None) -> Timeline:
    """The lanes of the first :data:`MAX_GPUS` GPUs over one iteration (default: the
    median-duration one; without iterations, the middle 10 % of the window), from the classes
    the analysis was measured with."""
    lo, hi, how = drawn_iteration(analysis, step)
    source, w = _source(analysis), Window(lo, hi)
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
    return Timeline(analysis.path, lo, hi, how, lanes, len(gpus), hidden_pct(hidden, comm))


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
