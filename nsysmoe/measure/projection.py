"""NVTX ranges projected onto the GPU work they launched, as ``nsys stats --report nvtxgpuproj``
(2024+: ``nvtx_gpu_proj_trace``) does it.

Why the launching API call and not the kernel's own time: an NVTX range lives on a CPU thread
while the kernels it enqueues run later, asynchronously, on the GPU. A GPU op (kernel, memcpy or
memset) belongs to a range when its launching CUDA API call — the runtime row with the same
``(pid, corr_id)`` — lies inside the range on the same thread::

    range.tid == api.tid and range.start <= api.start and range.end >= api.end

Every enclosing range gets the op, so nested ranges all do. Cross-thread start/end ranges are
left out (NVIDIA's ``endGlobalTid IS NULL``); ops with a null ``corr_id`` or without an API row
belong to no range.

Columns of :func:`project_nvtx` (one row per range instance with at least one GPU op; ns):

* ``range_id``: row index of the range in the input ``nvtx`` frame
* ``pid``, ``tid`` (full globalTid), ``name`` (``Domain:name`` in a named domain), ``style``,
  ``cpu_start``, ``cpu_end``: the range itself
* ``gpu_start``/``gpu_end``: first op start / last op end (nsys' Projected Start, and Projected
  Duration = ``gpu_end - gpu_start``)
* ``gpu_ops``: distinct ops (kernels + memops); ``kernels``: the kernels among them;
  ``api_calls``: distinct launching API calls — nsys' ``NumGPUOps``, which is
  ``count(DISTINCT correlationId)``; it differs from ``gpu_ops`` only when one call launched
  several ops (a CUDA graph launch, a memcpy split into several copies)
* ``busy_ns``: |⋃ op intervals|, the exact union (not the sum, not the span)
* with a ``class`` column on ``kernels`` (:func:`nsysmoe.classify.classify`): ``comm_ns`` =
  |⋃ comm kernels|, ``compute_ns`` = |⋃ other kernels|, ``hidden_ns`` = |⋃comm ∩ ⋃compute|,
  all among that range's own kernels

Deliberate differences from nsys 2022.4.2 (checked on every recorded nvtxgpuproj report in
``tests/data/nsys_stats``): none in the ranges, starts, durations or op counts. Our runtime
table holds only eventClass 0/1 rows (the reader drops backtrace duplicates), which nsys joins
too but which repeat a real call's correlation id and cannot add ops.

Speed: a single IEJoin (``join_where``) finds every (range, call) containment on all threads at
once, with the thread folded into the sort keys; per-range unions use a per-group running max.
1M kernels under 2M nested ranges take seconds, with no per-op or per-range Python loop.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from nsysmoe.measure.nvtx import display_name

COMM = "comm"

PROJECTION_SCHEMA: dict[str, pl.DataType] = {
    "range_id": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "name": pl.String,
    "style": pl.String,
    "cpu_start": pl.Int64,
    "cpu_end": pl.Int64,
    "gpu_start": pl.Int64,
    "gpu_end": pl.Int64,
    "gpu_ops": pl.Int64,
    "kernels": pl.Int64,
    "api_calls": pl.Int64,
    "busy_ns": pl.Int64,
}
CLASS_SCHEMA: dict[str, pl.DataType] = {
    "comm_ns": pl.Int64,
    "compute_ns": pl.Int64,
    "hidden_ns": pl.Int64,
}
TOTALS_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String,
    "style": pl.String,
    "count": pl.Int64,
    "gpu_span_total_ns": pl.Int64,
    "busy_total_ns": pl.Int64,
    "kernels": pl.Int64,
}


def project_nvtx(
    nvtx: pl.DataFrame, kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame
) -> pl.DataFrame:
    """One row per NVTX range instance that launched GPU work (module docstring: columns).

    Sorted by ``range_id``. The inputs are the canonical tables of :mod:`nsysmoe.model`;
    ``kernels`` may carry ``class``, which adds ``comm_ns``/``compute_ns``/``hidden_ns``.
    """
    with_class = "class" in kernels.columns
    schema = PROJECTION_SCHEMA | (CLASS_SCHEMA if with_class else {})
    ops = _gpu_ops(kernels, memops)
    calls = _launching_calls(runtime, ops)
    ranges = _projectable_ranges(nvtx)
    pairs = _enclosing_pairs(ranges, calls)
    if pairs.is_empty():
        return pl.DataFrame(schema=schema)
    members = _range_ops(pairs, calls, ops)
    stats = _range_stats(members, with_class)
    meta = ranges.select(
        "range_id",
        "pid",
        "tid",
        display_name().alias("name"),
        "style",
        pl.col("start").alias("cpu_start"),
        pl.col("end").alias("cpu_end"),
    )
    out = meta.join(stats, on="range_id", how="inner").sort("range_id")
    return out.select(list(schema)).cast(schema)


def projected_totals(projected: pl.DataFrame) -> pl.DataFrame:
    """Per (name, style): instances with GPU work and their summed GPU figures.

    ``gpu_span_total_ns`` adds each instance's first-op-to-last-op span (what nsys' projected
    durations add up to); ``busy_total_ns`` adds the exact per-instance unions instead, so idle
    gaps inside a range are not counted. Nested or concurrent instances are each counted in
    full, as ``nvtxsum`` does on the CPU side. Sorted by ``busy_total_ns`` descending.
    """
    extra = [c for c in CLASS_SCHEMA if c in projected.columns]
    schema = TOTALS_SCHEMA | {c: pl.Int64 for c in extra}
    if projected.is_empty():
        return pl.DataFrame(schema=schema)
    table = projected.group_by("name", "style").agg(
        pl.len().alias("count"),
        (pl.col("gpu_end") - pl.col("gpu_start")).sum().alias("gpu_span_total_ns"),
        pl.col("busy_ns").sum().alias("busy_total_ns"),
        pl.col("kernels").sum(),
        *(pl.col(c).sum() for c in extra),
    )
    table = table.sort(["busy_total_ns", "name", "style"], descending=[True, False, False])
    return table.select(list(schema)).cast(schema)


def _gpu_ops(kernels: pl.DataFrame, memops: pl.DataFrame) -> pl.DataFrame:
    """Kernels then memops as one op table (op_id = position); null corr ids can never match."""
    comm = (pl.col("class") == COMM) if "class" in kernels.columns else pl.lit(False)
    cols = ["pid", "corr_id", "start", "end"]
    parts = [
        kernels.select(*cols, pl.lit(True).alias("is_kernel"), comm.fill_null(False).alias("comm")),
        memops.select(*cols, pl.lit(False).alias("is_kernel"), pl.lit(False).alias("comm")),
    ]
    ops = pl.concat([p.cast({c: pl.Int64 for c in cols}) for p in parts])
    return ops.with_row_index("op_id").filter(pl.col("corr_id").is_not_null())


def _launching_calls(runtime: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Distinct API rows that launched at least one op, numbered by call_id."""
    calls = runtime.select("pid", "tid", "corr_id", "start", "end").drop_nulls()
    calls = calls.join(ops.select("pid", "corr_id").unique(), on=["pid", "corr_id"], how="semi")
    return calls.unique(maintain_order=True).with_row_index("call_id")


def _projectable_ranges(nvtx: pl.DataFrame) -> pl.DataFrame:
    """Ranges that start and end on one thread, keeping their input row index as range_id."""
    ranges = nvtx.with_row_index("range_id").with_columns(pl.col("range_id").cast(pl.Int64))
    same_thread = ~pl.col("cross_thread").fill_null(False)
    return ranges.filter(same_thread & pl.all_horizontal(pl.col("tid", "start", "end").is_not_null()))


def _enclosing_pairs(ranges: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """(range_id, call_id) for every range enclosing a call on the same thread.

    One inequality join for all threads: each time is replaced by its rank among all the
    times (order-preserving, and it frees the high bits) and the thread's index goes above
    it, so ``key_start(range) <= key_start(call) and key_end(range) >= key_end(call)`` holds
    exactly when the threads are equal and the range contains the call.
    """
    tids = ranges.select("tid").unique().join(calls.select("tid").unique(), on="tid")
    if tids.is_empty():
        return pl.DataFrame(schema={"range_id": pl.Int64, "call_id": pl.UInt32})
    r = ranges.join(tids, on="tid", how="semi").select("range_id", "tid", "start", "end")
    c = calls.join(tids, on="tid", how="semi").select("call_id", "tid", "start", "end")
    times = np.concatenate([df[col].to_numpy() for df in (r, c) for col in ("start", "end")])
    ranks = np.unique(times, return_inverse=True)[1].astype(np.int64)
    thread = pl.concat([r["tid"], c["tid"]]).rank("dense").cast(pl.Int64).to_numpy() << 32
    n_r, n_c = len(r), len(c)
    bounds = np.cumsum([0, n_r, n_r, n_c, n_c])
    key = [thread[: n_r] + ranks[bounds[0] : bounds[1]], thread[: n_r] + ranks[bounds[1] : bounds[2]]]
    key += [thread[n_r:] + ranks[bounds[2] : bounds[3]], thread[n_r:] + ranks[bounds[3] : bounds[4]]]
    left = pl.DataFrame({"range_id": r["range_id"], "rs": key[0], "re": key[1]})
    right = pl.DataFrame({"call_id": c["call_id"], "cs": key[2], "ce": key[3]})
    pairs = left.join_where(right, pl.col("rs") <= pl.col("cs"), pl.col("re") >= pl.col("ce"))
    return pairs.select("range_id", "call_id")


def _range_ops(pairs: pl.DataFrame, calls: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Expand (range, call) pairs to (range, op) rows, once per distinct op."""
    keyed = pairs.join(calls.select("call_id", "pid", "corr_id"), on="call_id")
    members = keyed.join(ops, on=["pid", "corr_id"])
    if calls.select("pid", "corr_id").is_duplicated().any():
        # Two API rows with one (pid, corr_id) inside one range would count its ops twice.
        members = members.unique(["range_id", "op_id"])
    return members


def _range_stats(members: pl.DataFrame, with_class: bool) -> pl.DataFrame:
    """Per range: span, counts and exact unions of its ops."""
    stats = members.group_by("range_id").agg(
        pl.col("start").min().alias("gpu_start"),
        pl.col("end").max().alias("gpu_end"),
        pl.len().alias("gpu_ops"),
        pl.col("is_kernel").sum().alias("kernels"),
        pl.struct("pid", "corr_id").n_unique().alias("api_calls"),
    )
    stats = stats.join(_union_ns(members, "busy_ns"), on="range_id", how="left")
    if with_class:
        k = members.filter(pl.col("is_kernel"))
        parts = [
            _union_ns(k.filter(pl.col("comm")), "comm_ns"),
            _union_ns(k.filter(~pl.col("comm")), "compute_ns"),
            _union_ns(k, "kernel_ns"),
        ]
        for part in parts:
            stats = stats.join(part, on="range_id", how="left")
        stats = stats.with_columns(pl.col(*CLASS_SCHEMA, "kernel_ns").fill_null(0)).with_columns(
            (pl.col("comm_ns") + pl.col("compute_ns") - pl.col("kernel_ns")).alias("hidden_ns")
        )
    return stats


def _union_ns(members: pl.DataFrame, alias: str) -> pl.DataFrame:
    """Per range_id, the exact length of the union of its [start, end) intervals.

    Sorted by start within a range, interval i adds ``max(0, end_i - max(start_i, reach))``
    where ``reach`` is the largest end before it: the part past everything already covered.
    """
    reach = pl.col("end").cum_max().shift(1).over("range_id")
    fresh = pl.col("end") - pl.max_horizontal("start", reach)
    return (
        members.select("range_id", "start", "end")
        .sort("range_id", "start")
        .with_columns(fresh.clip(lower_bound=0).alias(alias))
        .group_by("range_id")
        .agg(pl.col(alias).sum())
    )
