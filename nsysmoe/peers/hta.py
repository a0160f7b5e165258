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
from nsysmoe.peers.hta_conventions import (
    COMM,
    COMM_RE,
    COMPUTE,
    HTA_CONVENTIONS,
    LATE,
    MEMORY,
    MEMORY_RE,
    NEITHER,
    NO_LAUNCH,
    NO_STEP,
    NOT_COMPUTE_RE,
    STEP_MARK,
    TOOL,
)
from nsysmoe.peers.hta_reasons import reasons as why_differ
from nsysmoe.results import CompatResult

__all__ = ["HTA_CONVENTIONS", "compat_analysis", "hta_kernels", "hta_overlap",
           "profiler_step_names"]  # fmt: skip

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
    reasons = why_differ(trace, both, steps, gpus)
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
