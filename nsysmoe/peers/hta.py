"""HolisticTraceAnalysis (HTA) 0.5.0 ``get_comm_comp_overlap``, reproduced on canonical tables.

HTA and nsysmoe both report per rank how much communication ran under computation, and give
different numbers for the same trace. The differences are conventions, not errors on either side,
so this module applies HTA's conventions (read from the HTA 0.5.0 wheel's source; each line of
:data:`HTA_CONVENTIONS` names the file and function) to a :class:`~nsysmoe.model.Trace`. A user
holding an HTA figure can reproduce it here and see which convention moves it away from nsysmoe's.

Exactness: HTA works in float µs parsed from the JSON text. For Kineto's at most three decimals
that float is the correctly rounded ``ns / 1000``, which :func:`_us_floats` rebuilds from the
canonical integer ns; HTA's ``ts + dur`` and ceil/floor are then redone in double precision, as
HTA does them, and everything after that is exact integer µs arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
import polars as pl

from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.overlap import per_gpu
from nsysmoe.model import ClassifiedTrace, Trace
from nsysmoe.results import CompatResult

HTA_VERSION = "0.5.0"
TOOL = f"HolisticTraceAnalysis {HTA_VERSION} TraceAnalysis.get_comm_comp_overlap"

#: One line per convention, for reports; paths are inside the HTA 0.5.0 wheel.
HTA_CONVENTIONS: tuple[str, ...] = (
    "one figure per rank (trace file): every stream and device of the process pooled, over the "
    "whole loaded trace, no per-iteration averaging "
    "(hta/analyzers/communication_analysis.py: get_comm_comp_overlap)",
    "communication = kernel name matching ^nccl.*Kernel (ncclKernel_*, ncclDevKernel_*) and "
    "nothing else, so DeepEP, NVSHMEM and custom all-reduce kernels count as computation "
    "(hta/utils/utils.py: is_comm_kernel, get_kernel_type)",
    "computation = every other kernel except names starting Memcpy/Memset/dma (memory) or "
    "containing Memcpy or Sync (neither); memcpy/memset operations are memory and left out "
    "(hta/utils/utils.py: is_memory_kernel, is_compute_kernel)",
    "ns-resolution traces (float ts) are rounded inward to whole µs: start up, start+dur (in "
    "double precision) down, so sub-µs kernels vanish or invert "
    "(hta/common/trace_parser.py: round_down_time_stamps)",
    "when the traces loaded together name two or more distinct ProfilerStep ranges, a kernel is "
    "kept only if its launch (CPU event with the same correlation) starts before the rank's last "
    "ProfilerStep starts: the last step and kernels whose launch is not in the trace are dropped; "
    "with one or no ProfilerStep nothing is dropped "
    "(hta/common/trace.py: Trace._filter_irrelevant_gpu_kernels)",
    "ratio = |merged comm ∩ merged compute| / Σ merged comm intervals in integer µs; a sub-µs "
    "comm kernel rounded to [t, t-1) that merges with nothing subtracts 1 µs from the total; "
    "no communication gives NaN (hta/utils/utils.py: merge_kernel_intervals; "
    "communication_analysis.py: get_comm_comp_overlap)",
    "reported as round(100 × ratio, 2), numpy rounding (communication_analysis.py)",
)

STEP_MARK = "ProfilerStep"
COMM, MEMORY, COMPUTE, NEITHER = "communication", "memory", "computation", "other"
COMM_RE = r"^nccl.*Kernel"
MEMORY_RE = r"^(?:Memcpy|Memset|dma)"
NOT_COMPUTE_RE = r"^(?:nccl.*Kernel|.*Memcpy|Memset|.*Sync)"
#: why HTA leaves a kernel out (column ``dropped_because`` of :func:`hta_kernels`)
NO_LAUNCH = "no launch in the trace"
LATE = "launched at or after the last ProfilerStep's start"
NO_STEP = "its rank names no ProfilerStep"
_EXACT_INT = 2**53  # below this an int64 converts to float64 exactly


def profiler_step_names(trace: Trace) -> frozenset[str]:
    """Distinct names containing ``ProfilerStep``, the set whose size decides HTA's filtering.

    HTA counts them over every rank loaded together; pass the union over your rank files as
    ``step_names`` to :func:`hta_overlap` to match a multi-rank HTA run exactly.
    """
    names = pl.concat([trace.nvtx["name"], trace.kernels["name"]]).drop_nulls().unique()
    return frozenset(names.filter(names.str.contains(STEP_MARK, literal=True)).to_list())


def hta_kernels(trace: Trace, *, step_names: Collection[str] | None = None) -> pl.DataFrame:
    """Every kernel (canonical order) with HTA's view of it: ``ts_us``/``end_us`` (rounded
    inward), ``hta_type``, ``kept`` and ``dropped_because`` (null when kept)."""
    steps = profiler_step_names(trace) if step_names is None else frozenset(step_names)
    k = trace.kernels
    ts, end = _hta_times(k["start"].to_numpy(), k["end"].to_numpy())
    k = k.with_columns(
        pl.Series("ts_us", ts, pl.Int64),
        pl.Series("end_us", end, pl.Int64),
        _kernel_type(pl.col("name").fill_null("")).alias("hta_type"),
    )
    if len(steps) < 2:
        return k.with_columns(kept=pl.lit(True), dropped_because=pl.lit(None, pl.String))
    cutoff = _last_step_starts(trace, steps)
    launches = _launches(trace)
    k = k.join(cutoff, on="pid", how="left", maintain_order="left").join(
        launches, on=["pid", "corr_id"], how="left", maintain_order="left"
    )
    correlated = pl.col("corr_id").fill_null(-1).ge(0) & pl.col("stream").fill_null(-1).ge(0)
    kept = (
        pl.when(correlated)
        .then(pl.col("launch_us") < pl.col("cutoff_us"))
        .otherwise(pl.col("ts_us") < pl.col("cutoff_us"))
        .fill_null(False)
    )
    reason = (
        pl.when(kept)
        .then(pl.lit(None, pl.String))
        .when(pl.col("cutoff_us").is_null())
        .then(pl.lit(NO_STEP))
        .when(correlated & pl.col("launch_us").is_null())
        .then(pl.lit(NO_LAUNCH))
        .otherwise(pl.lit(LATE))
    )
    return k.with_columns(kept=kept, dropped_because=reason).drop("cutoff_us", "launch_us")


def hta_overlap(trace: Trace, *, step_names: Collection[str] | None = None) -> pl.DataFrame:
    """HTA 0.5.0's comm-comp overlap per GPU (pid, device) of ``trace``.

    Columns: pid, device, comm_kernels, compute_kernels, hta_comm_us, hta_overlap_us, hta_ratio,
    hta_overlap_pct. HTA computes one figure per rank, pooling its devices: a process with several
    GPUs gets that pooled figure on each of its rows.
    """
    return _overlap_table(hta_kernels(trace, step_names=step_names), trace.gpu_keys)


def compat_analysis(
    source: ClassifiedTrace, *, step_names: Collection[str] | None = None
) -> CompatResult:
    """HTA's figure and nsysmoe's default whole-trace hidden % per GPU, and why they differ."""
    trace, classified = source.trace, source.kernels
    steps = profiler_step_names(trace) if step_names is None else frozenset(step_names)
    kernels = hta_kernels(trace, step_names=steps)
    hta = _overlap_table(kernels, trace.gpu_keys)
    default, _ = per_gpu(classified, trace.memops)
    gpus = hta.join(
        default.select("pid", "device", "comm_ns", "hidden_ns", "hidden_pct"),
        on=["pid", "device"],
        how="left",
        maintain_order="left",
    ).select(
        "pid",
        "device",
        "hta_overlap_pct",
        "hidden_pct",
        (pl.col("hidden_pct") - pl.col("hta_overlap_pct")).alias("diff_pp"),
        "hta_ratio",
        "hta_comm_us",
        "hta_overlap_us",
        "comm_ns",
        "hidden_ns",
    )
    both = kernels.with_columns(classified["class"], classified["subclass"])
    reasons = _reasons(trace, both, steps, gpus)
    text = "; ".join(reasons) if reasons else "no convention differs on this trace"
    return CompatResult(trace.path, TOOL, gpus, HTA_CONVENTIONS, reasons, text)


# --- HTA's arithmetic -------------------------------------------------------------------------


def _us_floats(ns: np.ndarray) -> np.ndarray:
    """``ns / 1000`` as the correctly rounded double: what ``float("1.234")`` handed HTA.

    Below 2**53 the int converts exactly and one IEEE division rounds once; beyond it Python's
    int true division (also correctly rounded) is used, element by element.
    """
    if ns.size == 0 or int(np.abs(ns).max()) < _EXACT_INT:
        return ns.astype(np.float64) / 1000.0
    return np.array([v / 1000 for v in ns.tolist()], dtype=np.float64)


def _hta_times(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's rounded µs interval: ceil(ts), floor(ts + dur) with ts, dur and the sum in doubles.

    HTA rounds only when the JSON's ts column is float; on whole-µs values this is the identity,
    so it is applied unconditionally.
    """
    ts = _us_floats(start)
    stop = ts + _us_floats(end - start)
    return np.ceil(ts).astype(np.int64), np.floor(stop).astype(np.int64)


def _ceil_us(start: pl.Series) -> pl.Series:
    return pl.Series(np.ceil(_us_floats(start.to_numpy())).astype(np.int64), dtype=pl.Int64)


def _kernel_type(name: pl.Expr) -> pl.Expr:
    """get_kernel_type: communication, then memory, then computation, else neither."""
    return (
        pl.when(name.str.contains(COMM_RE))
        .then(pl.lit(COMM))
        .when(name.str.contains(MEMORY_RE))
        .then(pl.lit(MEMORY))
        .when(~name.str.contains(NOT_COMPUTE_RE))
        .then(pl.lit(COMPUTE))
        .otherwise(pl.lit(NEITHER))
    )


def _last_step_starts(trace: Trace, steps: frozenset[str]) -> pl.DataFrame:
    """Per pid, the rounded start of its last ProfilerStep range (HTA's cut-off)."""
    rows = trace.nvtx.filter(pl.col("name").is_in(list(steps)))
    rows = rows.with_columns(_ceil_us(rows["start"]).alias("cutoff_us"))
    return rows.group_by("pid").agg(pl.col("cutoff_us").max())


def _launches(trace: Trace) -> pl.DataFrame:
    """Per (pid, correlation), the earliest rounded start of a CPU event carrying it."""
    rt = trace.runtime.filter(pl.col("corr_id").is_not_null())
    rt = rt.with_columns(_ceil_us(rt["start"]).alias("launch_us"))
    return rt.group_by("pid", "corr_id").agg(pl.col("launch_us").min())


def _lone_inverted(starts: np.ndarray, ends: np.ndarray) -> int:
    """µs that inverted intervals left as groups of their own take off HTA's comm total.

    merge_kernel_intervals starts a group where ``ts > max(previous ends)`` and sums
    ``max end − min ts`` per group; a sub-µs kernel rounded to [t, t-1) opens such a group when
    nothing before it reaches t, and nothing after it can join (it starts at ≥ t > t-1), so it
    adds −1 µs. ``starts`` must be sorted, ties in trace order (HTA's quicksort does not promise
    an order for ties; trace order is what it keeps on small inputs).
    """
    if starts.size == 0:
        return 0
    reach = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(ends)[:-1]))
    lone = (ends < starts) & (starts > reach)
    return int((starts - ends)[lone].sum())


def _ratio(overlap_us: int, comm_us: int) -> float:
    """overlap / comm as numpy divides HTA's two sums: 0/0 is NaN (no communication)."""
    if comm_us == 0:
        return math.nan if overlap_us == 0 else math.copysign(math.inf, overlap_us)
    return overlap_us / comm_us


def _rank_overlap(k: pl.DataFrame) -> dict[str, int | float]:
    """HTA's figure from one rank's kept kernels (canonical order)."""
    comm = k.filter(pl.col("hta_type") == COMM).sort("ts_us", maintain_order=True)
    comp = k.filter(pl.col("hta_type") == COMPUTE)
    starts, ends = comm["ts_us"].to_numpy(), comm["end_us"].to_numpy()
    comm_set = IntervalSet.from_arrays(starts, ends)
    comp_set = IntervalSet.from_arrays(comp["ts_us"].to_numpy(), comp["end_us"].to_numpy())
    comm_us = comm_set.length - _lone_inverted(starts, ends)
    overlap_us = comm_set.intersect_length(comp_set)
    ratio = _ratio(overlap_us, comm_us)
    return {
        "comm_kernels": len(comm),
        "compute_kernels": len(comp),
        "hta_comm_us": comm_us,
        "hta_overlap_us": overlap_us,
        "hta_ratio": ratio,
        "hta_overlap_pct": float(np.round(100.0 * ratio, 2)),
    }


OVERLAP_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "comm_kernels": pl.Int64,
    "compute_kernels": pl.Int64,
    "hta_comm_us": pl.Int64,
    "hta_overlap_us": pl.Int64,
    "hta_ratio": pl.Float64,
    "hta_overlap_pct": pl.Float64,
}


def _overlap_table(kernels: pl.DataFrame, keys: list[tuple[int, int]]) -> pl.DataFrame:
    kept = kernels.filter("kept")
    parts = kept.partition_by("pid", as_dict=True, maintain_order=True)
    ranks = {pid: _rank_overlap(parts.get((pid,), kept.clear())) for pid in {p for p, _ in keys}}
    rows = [{"pid": pid, "device": device, **ranks[pid]} for pid, device in keys]
    return pl.DataFrame(rows, schema=OVERLAP_SCHEMA, orient="row")


# --- why the two figures differ ----------------------------------------------------------------


def _reasons(
    trace: Trace, k: pl.DataFrame, steps: frozenset[str], gpus: pl.DataFrame
) -> tuple[str, ...]:
    """The conventions that move HTA's figure away from nsysmoe's on this trace, with counts."""
    out: list[str] = []
    if trace.source_format != "kineto-json":
        out.append(
            f"HTA reads only PyTorch profiler JSON; for this {trace.source_format} trace these are "
            "the figures HTA would give on the same kernels exported at ns resolution"
        )
    is_comm = pl.col("class") == "comm"
    for hta_type, sub in k.filter(is_comm & (pl.col("hta_type") != COMM)).group_by(
        "hta_type", maintain_order=True
    ):
        out.append(
            f"HTA counts {len(sub)} kernels nsysmoe classes as communication "
            f"({_by_subclass(sub)}) as {hta_type[0]}: its only communication rule is {COMM_RE}"
        )
    extra = k.filter(~is_comm & (pl.col("hta_type") == COMM))
    if len(extra):
        out.append(
            f"HTA counts {len(extra)} kernels matching {COMM_RE} as communication that nsysmoe "
            f"classes as compute ({_by_subclass(extra)})"
        )
    left_out = k.filter(~is_comm & pl.col("hta_type").is_in([MEMORY, NEITHER]))
    if len(left_out):
        out.append(
            f"HTA leaves out {len(left_out)} kernels named like copies or syncs (Memcpy/Memset/dma "
            "prefix, or Memcpy/Sync inside) that nsysmoe counts as compute"
        )
    out += _filter_reasons(trace, k, steps)
    off = k.filter((pl.col("start") % 1000 != 0) | (pl.col("end") % 1000 != 0))
    if len(off):
        gone = off.filter((pl.col("end_us") <= pl.col("ts_us")) & (pl.col("end") > pl.col("start")))
        out.append(
            f"timestamps rounded to µs: {len(off)} kernels not on whole µs shrink to "
            f"[ceil(start), floor(end)), {len(gone)} of them (shorter than a µs) vanish"
        )
    pooled = gpus.group_by("pid").len().filter(pl.col("len") > 1)["pid"].sort().to_list()
    if pooled:
        out.append(
            f"HTA pools the GPUs of a rank: pid {', '.join(map(str, pooled))} drives several GPUs, "
            "nsysmoe measures each GPU alone"
        )
    nan = gpus.filter(pl.col("hta_overlap_pct").is_nan())
    for row in nan.iter_rows(named=True):
        ours = "none either" if row["hidden_pct"] is None else f"{row['hidden_pct']:.2f} % hidden"
        out.append(
            f"HTA reports NaN for pid {row['pid']} device {row['device']}: it sees no "
            f"communication kernels; nsysmoe measures {ours}"
        )
    return tuple(out)


def _by_subclass(df: pl.DataFrame) -> str:
    counts = df.group_by("subclass").len().sort(["len", "subclass"], descending=[True, False])
    return ", ".join(f"{n} {sub}" for sub, n in counts.iter_rows())


def _filter_reasons(trace: Trace, k: pl.DataFrame, steps: frozenset[str]) -> list[str]:
    names = ", ".join(sorted(steps)) or "none"
    if len(steps) < 2:
        return [
            f"HTA drops no kernels: it drops the last ProfilerStep only when two or more are "
            f"named, this trace names {len(steps)} ({names})"
        ]
    out = []
    dropped = k.filter(~pl.col("kept"))
    late = dropped.filter(pl.col("dropped_because") == LATE)
    if len(late):
        last = trace.nvtx.filter(pl.col("name").is_in(list(steps))).sort("start")["name"][-1]
        out.append(
            f"last ProfilerStep dropped: {len(late)} kernels launched at or after {last} "
            "starts left out"
        )
    no_launch = dropped.filter(pl.col("dropped_because") == NO_LAUNCH)
    if len(no_launch):
        out.append(f"{len(no_launch)} kernels without launch in the trace dropped")
    no_step = dropped.filter(pl.col("dropped_because") == NO_STEP)
    if len(no_step):
        out.append(f"{len(no_step)} kernels of ranks naming no ProfilerStep dropped")
    return out
