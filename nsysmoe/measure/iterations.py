"""Per-iteration metrics for hundreds of iterations at once, on one process's timeline.

Measuring each iteration's window separately would filter the whole kernel table once per
iteration (505 iterations × 1M kernels); instead every kernel and copy is assigned to the
iteration windows it overlaps (searchsorted; the rare kernel that crosses a boundary is split),
clipped to them, and all unions are taken per (iteration, GPU) group in one sort
(:func:`nsysmoe.intervals.grouped_union_length`). Same definitions as
:mod:`nsysmoe.measure.overlap` (its :func:`~nsysmoe.measure.overlap.hidden_ns`), except that an
iteration's idle time is its window's length minus the GPU's active time: the gap before the
next iteration's first kernel is idle time of this iteration (host overhead), not lost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from nsysmoe.intervals import grouped_union_length
from nsysmoe.measure.overlap import COMM, hidden_ns, hidden_pct_expr
from nsysmoe.measure.steps import process_windows
from nsysmoe.model import Window
from nsysmoe.results import ITERATION_SCHEMA, Steps

KEYS = ["window", "pid", "device"]
COPY = "copy"


def _work(kernels: pl.DataFrame, memops: pl.DataFrame) -> pl.DataFrame:
    cols = ["pid", "device", "start", "end"]
    return pl.concat([
        kernels.select(*cols, pl.col("class").alias("kind")),
        memops.select(*cols, pl.lit(COPY).alias("kind")),
    ])  # fmt: skip


def assign(work: pl.DataFrame, starts: np.ndarray, ends: np.ndarray) -> pl.DataFrame:
    """Each row once per window it meets (windows sorted, starts and ends non-decreasing),
    clipped to it; a zero-length row belongs to the window its instant falls in."""
    s, e = work["start"].to_numpy(), work["end"].to_numpy()
    first = np.searchsorted(ends, s, side="right")  # first window ending after s
    last = np.searchsorted(starts, np.maximum(e, s + 1), side="left") - 1  # last starting before e
    count = np.clip(last - first + 1, 0, None)
    rows = np.repeat(np.arange(len(work)), count)
    offset = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
    win = first[rows] + offset
    return work[rows].with_columns(
        pl.Series("window", win, dtype=pl.Int64),
        pl.Series("start", np.maximum(s[rows], starts[win])),
        pl.Series("end", np.minimum(e[rows], ends[win])),
    )


def _measure(rows: pl.DataFrame, lengths: np.ndarray) -> pl.DataFrame:
    """comm/hidden/idle per window, all GPUs of the window together."""
    is_comm, is_copy = pl.col("kind") == COMM, pl.col("kind") == COPY
    parts = {
        "comm_ns": grouped_union_length(rows.filter(is_comm), KEYS),
        "compute_ns": grouped_union_length(rows.filter(~is_comm & ~is_copy), KEYS),
        "kernel_ns": grouped_union_length(rows.filter(~is_copy), KEYS),
        "active_ns": grouped_union_length(rows, KEYS),
    }
    spans = pl.DataFrame({"window": np.arange(len(lengths), dtype=np.int64), "span": lengths})
    per_gpu = rows.select(KEYS).unique().join(spans, on="window")
    for name, part in parts.items():
        per_gpu = per_gpu.join(part.rename({"union_ns": name}), on=KEYS, how="left")
    per_gpu = per_gpu.fill_null(0).with_columns(
        hidden_ns(pl.col("comm_ns"), pl.col("compute_ns"), pl.col("kernel_ns")).alias("hidden_ns"),
        (pl.col("span") - pl.col("active_ns")).alias("idle_ns"),
    )
    return per_gpu.group_by("window").agg(pl.col("comm_ns", "hidden_ns", "idle_ns").sum())


def iteration_metrics(
    kernels: pl.DataFrame, memops: pl.DataFrame, windows: Sequence[Window]
) -> pl.DataFrame:
    """Per window index: comm_ns, hidden_ns, idle_ns (ns, summed over GPUs); kernels must carry
    ``class``. Windows that overlap out of order are measured one at a time."""
    work = _work(kernels, memops)
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    ends = np.array([w.end_ns for w in windows], dtype=np.int64)
    if np.all(np.diff(starts) >= 0) and np.all(np.diff(ends) >= 0):
        out = _measure(assign(work, starts, ends), ends - starts)
    else:  # pragma: no cover - one process's step windows are monotonic
        one = [(starts[i : i + 1], ends[i : i + 1]) for i in range(len(windows))]
        out = pl.concat([
            _measure(assign(work, s, e), e - s).with_columns(pl.lit(i, pl.Int64).alias("window"))
            for i, (s, e) in enumerate(one)
        ])  # fmt: skip
    full = pl.DataFrame({"window": np.arange(len(windows), dtype=np.int64)})
    return full.join(out, on="window", how="left").fill_null(0).sort("window")


def iteration_table(
    kernels: pl.DataFrame, memops: pl.DataFrame, steps: Steps, kept: list[int]
) -> pl.DataFrame:
    """Step time and communication per iteration, all GPUs together (:data:`ITERATION_SCHEMA`).

    Each process is measured in its own iteration windows (ranks drift apart in time), then
    the processes are added up; the step time is the median of the processes' GPU periods.
    """
    windows = process_windows(steps, kept)
    if windows.is_empty():
        return pl.DataFrame(schema=ITERATION_SCHEMA)
    parts = []
    for (pid,), w in windows.partition_by("pid", as_dict=True, maintain_order=True).items():
        spans = [Window(a, b) for a, b in w.select("start_ns", "end_ns").iter_rows()]
        of_pid = pl.col("pid") == pid
        metrics = iteration_metrics(kernels.filter(of_pid), memops.filter(of_pid), spans)
        parts.append(pl.concat([w.select("step", "start_ns", "end_ns"), metrics.drop("window")],
                               how="horizontal"))  # fmt: skip
    period = steps.table.group_by("step").agg(pl.col("step_ns").median())
    comm, hidden = pl.col("comm_ns"), pl.col("hidden_ns")
    return (
        pl.concat(parts)
        .group_by("step")
        .agg(
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("comm_ns", "hidden_ns", "idle_ns").sum(),
        )
        .join(period, on="step", how="left")
        .with_columns(
            (comm - hidden).alias("exposed_ns"), hidden_pct_expr(hidden, comm).alias("hidden_pct")
        )
        .sort("step")
        .select(list(ITERATION_SCHEMA))
        .cast(ITERATION_SCHEMA)
    )
