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
  ``cpu_start_ns``, ``cpu_end_ns``: the range itself
* ``gpu_start_ns``/``gpu_end_ns``: first op start / last op end (nsys' Projected Start, and
  Projected Duration = ``gpu_end_ns - gpu_start_ns``)
* ``gpu_ops``: distinct ops (kernels + memops); ``kernels``: the kernels among them;
  ``api_calls``: distinct launching API calls — nsys' ``NumGPUOps``, which is
  ``count(DISTINCT correlationId)``; it differs from ``gpu_ops`` only when one call launched
  several ops (a CUDA graph launch, a memcpy split into several copies)
* ``busy_ns``: |⋃ op intervals|, the exact union (not the sum, not the span)
* with a ``class`` column on ``kernels`` (:func:`nsysmoe.classify.classify`): ``comm_ns`` =
  |⋃ comm kernels|, ``compute_ns`` = |⋃ other kernels|, ``hidden_ns`` = |⋃comm ∩ ⋃compute|,
  all among that range's own kernels

Deliberate differences from nsys 2022.4.2 (checked on every recorded nvtxgpuproj report in
``tests/data/nsys_stats``): none in the ranges, starts, durations or op counts. nsys also joins
the runtime table's eventClass-67 backtrace rows, which our reader drops; each repeats a real
call's correlation id on its thread with a slightly wider span, so any range enclosing it encloses
the real call too and dropping it changes nothing.

Speed: traces carry 10^6 kernels under 10^6+ NVTX ranges nested 5-10 deep, so nothing loops
per op or per range in Python. One IEJoin (``join_where``) finds every (range, call) containment
on all threads at once, the thread folded into the sort keys, and every per-range union comes
from a single sort and plain cumulative maxima. 1M kernels and 1M API calls under 2M ranges
(8M range-op pairs, 2 processes x 2 threads) take 7-9 s and ~1.3 GiB on 2 CPU cores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

from nsysmoe.enclosing import enclosing_pairs
from nsysmoe.measure.launch_calls import Launches
from nsysmoe.measure.nvtx import display_name
from nsysmoe.measure.overlap import COMM, hidden_ns

Int64Array = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

PROJECTION_SCHEMA: dict[str, pl.DataType] = {
    "range_id": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "name": pl.String,
    "style": pl.String,
    "cpu_start_ns": pl.Int64,
    "cpu_end_ns": pl.Int64,
    "gpu_start_ns": pl.Int64,
    "gpu_end_ns": pl.Int64,
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
    nvtx: pl.DataFrame,
    kernels: pl.DataFrame,
    memops: pl.DataFrame,
    runtime: pl.DataFrame,
    *,
    launches: Launches | None = None,
) -> pl.DataFrame:
    """One row per NVTX range instance that launched GPU work (module docstring: columns).

    Sorted by ``range_id``. The inputs are the canonical tables of :mod:`nsysmoe.model`;
    ``kernels`` may carry ``class``, which adds ``comm_ns``/``compute_ns``/``hidden_ns``.
    ``launches``: the trace's shared launch join of these very kernels and memops
    (:func:`nsysmoe.measure.launch_calls.launches_of`), so no call is joined again.
    """
    with_class = "class" in kernels.columns
    schema = PROJECTION_SCHEMA | (CLASS_SCHEMA if with_class else {})
    ops, end_times = _gpu_ops(kernels, memops)
    ranges = _projectable_ranges(nvtx)
    if launches is not None and launches.unique and len(launches.ops) == len(kernels) + len(
            memops):  # fmt: skip
        members, api_calls = _members_of_launches(ranges, ops, launches)
    else:
        calls = _launching_calls(runtime, ops)
        pairs = enclosing_pairs(ranges, calls)
        members, api_calls = _range_ops(pairs, calls, ops)
    if members.is_empty():
        return pl.DataFrame(schema=schema)
    stats = _range_stats(members, end_times, with_class).join(
        api_calls, on="range_id", maintain_order="left"
    )
    meta = ranges.select(
        "range_id",
        "pid",
        "tid",
        display_name().alias("name"),
        "style",
        pl.col("start").alias("cpu_start_ns"),
        pl.col("end").alias("cpu_end_ns"),
    )
    out = stats.join(meta, on="range_id", maintain_order="left")  # stats come sorted
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
        (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).sum().alias("gpu_span_total_ns"),
        pl.col("busy_ns").sum().alias("busy_total_ns"),
        pl.col("kernels").sum(),
        *(pl.col(c).sum() for c in extra),
    )
    table = table.sort(["busy_total_ns", "name", "style"], descending=[True, False, False])
    return table.select(list(schema)).cast(schema)


def _gpu_ops(kernels: pl.DataFrame, memops: pl.DataFrame) -> tuple[pl.DataFrame, Int64Array]:
    """Kernels then memops as one op table (op_id = position); null corr ids can never match.

    Also returns the sorted distinct op ends, and each op's ``end_rank`` among them, which
    `_GroupedOps` needs to run a per-range maximum as one plain cumulative maximum.
    """
    comm = (pl.col("class") == COMM) if "class" in kernels.columns else pl.lit(False)
    cols = ["pid", "corr_id", "start", "end"]
    parts = [
        kernels.select(*cols, pl.lit(True).alias("is_kernel"), comm.fill_null(False).alias("comm")),
        memops.select(*cols, pl.lit(False).alias("is_kernel"), pl.lit(False).alias("comm")),
    ]
    ops = pl.concat([p.cast({c: pl.Int64 for c in cols}) for p in parts])
    ops = ops.with_row_index("op_id").filter(pl.col("corr_id").is_not_null())
    ends = ops["end"].to_numpy()
    end_times = _distinct_sorted(ends)
    return ops.with_columns(end_rank=np.searchsorted(end_times, ends)), end_times


def _distinct_sorted(values: Int64Array) -> Int64Array:
    """``np.unique`` without its cost: numpy 2.x hashes integers there, 100× slower than a sort
    on 2M values."""
    s = np.sort(values)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s


def _launching_calls(runtime: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Distinct API rows that launched at least one op, numbered by call_id."""
    calls = runtime.select("pid", "tid", "corr_id", "start", "end").drop_nulls()
    calls = calls.join(ops.select("pid", "corr_id").unique(), on=["pid", "corr_id"], how="semi")
    return calls.unique(maintain_order=True).with_row_index("call_id")


def _projectable_ranges(nvtx: pl.DataFrame) -> pl.DataFrame:
    """Ranges that start and end on one thread, keeping their input row index as range_id."""
    ranges = nvtx.with_row_index("range_id").with_columns(pl.col("range_id").cast(pl.Int64))
    same_thread = ~pl.col("cross_thread").fill_null(False)
    return ranges.filter(
        same_thread & pl.all_horizontal(pl.col("tid", "start", "end").is_not_null())
    )


def _range_ops(
    pairs: pl.DataFrame, calls: pl.DataFrame, ops: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each range's ops (one row per distinct op) and its count of distinct launching calls."""
    keyed = pairs.join(calls.select("call_id", "pid", "corr_id"), on="call_id").drop("call_id")
    members = keyed.join(ops, on=["pid", "corr_id"]).drop("pid", "corr_id")
    if calls.select("pid", "corr_id").is_duplicated().any():
        # Two API rows with one (pid, corr_id) inside one range would count its ops twice.
        keyed = keyed.unique(["range_id", "corr_id"])
        members = members.unique(["range_id", "op_id"])
    # A range lies on one thread, hence one pid: distinct corr ids are distinct calls.
    return members, keyed.group_by("range_id").agg(pl.len().alias("api_calls"))


def _members_of_launches(
    ranges: pl.DataFrame, ops: pl.DataFrame, launches: Launches
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`_range_ops` from the shared launch join, when no (pid, corr_id) names two
    runtime rows: each op stands for its own call, so the containment query gives (range,
    op) pairs directly, and a range's calls are its distinct corr ids."""
    api = launches.ops.with_row_index("op_id").select(
        "op_id", pl.col("api_tid").alias("tid"), pl.col("api_start").alias("start"),
        pl.col("api_end").alias("end"),
    )  # fmt: skip
    calls = api.join(ops.select("op_id"), on="op_id", how="semi").rename({"op_id": "call_id"})
    pairs = enclosing_pairs(ranges, calls).rename({"call_id": "op_id"})
    members = pairs.join(ops, on="op_id")
    api_calls = members.group_by("range_id").agg(pl.col("corr_id").n_unique().alias("api_calls"))
    return members.drop("pid", "corr_id"), api_calls


def _range_stats(members: pl.DataFrame, end_times: Int64Array, with_class: bool) -> pl.DataFrame:
    """Per range: GPU span, op counts and exact unions, all from one sort by (range, start)."""
    g = _GroupedOps.of(members.sort("range_id", "start"), end_times)
    cols = {
        "range_id": g.range_id[g.heads],
        "gpu_start_ns": g.start[g.heads],
        "gpu_end_ns": np.maximum.reduceat(g.end, g.heads),
        "gpu_ops": np.diff(np.append(g.heads, g.start.size)),
        "kernels": np.add.reduceat(g.is_kernel.astype(np.int64), g.heads),
        "busy_ns": g.union_ns(np.ones(g.start.size, dtype=bool)),
    }
    if with_class:
        cols["comm_ns"] = g.union_ns(g.is_kernel & g.comm)
        cols["compute_ns"] = g.union_ns(g.is_kernel & ~g.comm)
        cols["hidden_ns"] = hidden_ns(cols["comm_ns"], cols["compute_ns"], g.union_ns(g.is_kernel))
    return pl.DataFrame(cols)


@dataclass(frozen=True)
class _GroupedOps:
    """A range's ops as contiguous rows sorted by start: numpy arrays plus group bookkeeping."""

    range_id: Int64Array
    start: Int64Array
    end: Int64Array
    is_kernel: BoolArray
    comm: BoolArray
    heads: Int64Array  # first row of each range
    group: Int64Array  # 0, 1, ... per range, for every row
    end_key: Int64Array  # group << 32 | end_rank (< 2**32 distinct ends): grows with group
    end_times: Int64Array  # end_rank -> end

    @classmethod
    def of(cls, m: pl.DataFrame, end_times: Int64Array) -> _GroupedOps:
        range_id = m["range_id"].to_numpy()
        new = np.empty(range_id.size, dtype=bool)
        new[:1] = True
        np.not_equal(range_id[1:], range_id[:-1], out=new[1:])
        group = np.cumsum(new, dtype=np.int64) - 1
        arrays = {c: m[c].to_numpy() for c in ("start", "end", "is_kernel", "comm")}
        end_key = (group << 32) | m["end_rank"].to_numpy().astype(np.int64)
        heads = np.flatnonzero(new)
        return cls(
            range_id, heads=heads, group=group, end_key=end_key, end_times=end_times, **arrays
        )

    def union_ns(self, mask: BoolArray) -> Int64Array:
        """Per range, |⋃ [start, end)| over the masked rows.

        In start order, a row adds ``max(0, end - max(start, reach))``, ``reach`` being the
        largest end of the earlier rows of its range: only the part past what they cover.
        The group number in the high bits of ``end_key`` turns the per-range running maximum
        into one ``np.maximum.accumulate``: a value from an earlier range is always smaller
        and is recognised by its group bits. Masked-out rows carry -1 and add nothing.
        """
        reach = np.maximum.accumulate(np.where(mask, self.end_key, -1))
        prev = np.concatenate(([-1], reach[:-1]))
        same = (prev >= 0) & ((prev >> 32) == self.group)
        reach_ns = self.end_times[np.where(same, prev & 0xFFFFFFFF, 0)]
        covered = np.where(same, np.maximum(self.start, reach_ns), self.start)
        fresh = np.where(mask, np.maximum(self.end - covered, 0), 0)
        return np.add.reduceat(fresh, self.heads)
