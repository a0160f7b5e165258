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

from nsysmoe.intervals import by_group, grouped_union_lengths, start_order
from nsysmoe.measure.overlap import (
    COMM_CODE,
    MEMOP,
    NULL_CODE,
    Arrays,
    by_gpu,
    class_code,
    gpu_keys,
    hidden_ns,
    hidden_pct_expr,
)
from nsysmoe.measure.steps import process_windows
from nsysmoe.model import Window
from nsysmoe.results import ITERATION_SCHEMA, Steps


def assign_rows(s: np.ndarray, e: np.ndarray, starts: np.ndarray,
                ends: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Each row once per window it meets (windows sorted, starts and ends non-decreasing),
    clipped to it; a zero-length row belongs to the window its instant falls in: (row index,
    window, clipped start, clipped end) per piece."""
    first = np.searchsorted(ends, s, side="right")  # first window ending after s
    last = np.searchsorted(starts, np.maximum(e, s + 1), side="left") - 1  # last starting before e
    count = np.clip(last - first + 1, 0, None)
    if count.size and count.max() <= 1:  # no row crosses a window boundary: no repeats
        rows = np.flatnonzero(count)
        win = first[rows].astype(np.int64)
    else:
        rows = np.repeat(np.arange(s.size), count)
        offset = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
        win = (first[rows] + offset).astype(np.int64)
    return rows, win, np.maximum(s[rows], starts[win]), np.minimum(e[rows], ends[win])


def _gpu_windows(gpu: Arrays, ops: Arrays | None, lo: np.ndarray,
                 hi: np.ndarray) -> np.ndarray:  # fmt: skip
    """comm, hidden and idle ns of one GPU per window (3 × windows), from one start order of its
    kernels and copies clipped to the windows: every union is a mask of it, grouped by window."""
    none = np.zeros(0, dtype=np.int64)
    ms, me = (ops["start"], ops["end"]) if ops else (none, none)
    s, e = np.concatenate((gpu["start"], ms)), np.concatenate((gpu["end"], me))
    code = np.concatenate((gpu["code"].astype(np.int8), np.full(ms.size, MEMOP, np.int8)))
    rows, win, s, e = assign_rows(s, e, lo, hi)
    code, n = code[rows], lo.size
    present = np.bincount(win, minlength=n) > 0  # a window with any row of the GPU, even empty
    keep = e > s
    win, s, e, code = win[keep], s[keep], e[keep], code[keep]
    order = start_order(s)
    order = order[by_group(win[order])]
    win, s, e, code = win[order], s[order], e[order], code[order]

    def union(mask: np.ndarray) -> np.ndarray:
        return grouped_union_lengths(win[mask], s[mask], e[mask], n)

    is_comm, is_kernel = code == COMM_CODE, (code != MEMOP) & (code != NULL_CODE)
    comm = union(is_comm)
    hidden = hidden_ns(comm, union(is_kernel & ~is_comm), union(is_kernel))
    idle = np.where(present, (hi - lo) - union(np.ones(s.size, dtype=bool)), 0)
    return np.stack((comm, hidden, idle))


def _process_metrics(gpus: list[tuple[Arrays, Arrays | None]], lo: np.ndarray,
                     hi: np.ndarray) -> pl.DataFrame:  # fmt: skip
    """Per window index: comm_ns, hidden_ns, idle_ns summed over the process's GPUs."""
    if np.all(np.diff(lo) >= 0) and np.all(np.diff(hi) >= 0):
        sums = sum((_gpu_windows(k, m, lo, hi) for k, m in gpus), np.zeros((3, lo.size), np.int64))
    else:  # pragma: no cover - one process's step windows are monotonic
        sums = np.zeros((3, lo.size), np.int64)
        for i in range(lo.size):
            for k, m in gpus:
                sums[:, i] += _gpu_windows(k, m, lo[i : i + 1], hi[i : i + 1])[:, 0]
    return pl.DataFrame({"window": np.arange(lo.size, dtype=np.int64), "comm_ns": sums[0],
                         "hidden_ns": sums[1], "idle_ns": sums[2]})  # fmt: skip


def _narrow(kernels: pl.DataFrame, memops: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    return (kernels.select("pid", "device", "start", "end", class_code()),
            memops.select("pid", "device", "start", "end"))  # fmt: skip


def _gpus(k: pl.DataFrame, m: pl.DataFrame) -> dict[int, list[tuple[Arrays, Arrays | None]]]:
    """Each process's GPUs (kernel and copy arrays), GPUs in sorted order."""
    keys = gpu_keys(k, m)
    k_parts, m_parts = by_gpu(k, keys), by_gpu(m, keys)
    none = np.zeros(0, dtype=np.int64)
    empty = {"start": none, "end": none, "code": none.astype(np.int8)}
    out: dict[int, list[tuple[Arrays, Arrays | None]]] = {}
    for key in keys:
        out.setdefault(key[0], []).append((k_parts.get(key, empty), m_parts.get(key)))
    return out


def iteration_metrics(
    kernels: pl.DataFrame, memops: pl.DataFrame, windows: Sequence[Window]
) -> pl.DataFrame:
    """Per window index: comm_ns, hidden_ns, idle_ns (ns, summed over GPUs); kernels must carry
    ``class``. Windows that overlap out of order are measured one at a time."""
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    ends = np.array([w.end_ns for w in windows], dtype=np.int64)
    gpus = [g for per_pid in _gpus(*_narrow(kernels, memops)).values() for g in per_pid]
    return _process_metrics(gpus, starts, ends)


#: :func:`process_iterations`: one process's figures in one of its iteration windows
PROCESS_ITERATION_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "step": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
    "comm_ns": pl.Int64, "hidden_ns": pl.Int64, "idle_ns": pl.Int64,
}  # fmt: skip


def process_iterations(
    kernels: pl.DataFrame, memops: pl.DataFrame, steps: Steps, kept: list[int]
) -> pl.DataFrame:
    """Per (pid, step): the process measured in its own iteration window, its GPUs summed
    (:data:`PROCESS_ITERATION_SCHEMA`); kernels must carry ``class``. A process's rows are what
    it alone gives (its windows, its GPUs): an A/B's per-rank values read them."""
    windows = process_windows(steps, kept)
    if windows.is_empty():
        return pl.DataFrame(schema=PROCESS_ITERATION_SCHEMA)
    parts = []
    gpus = _gpus(*_narrow(kernels, memops))
    for (pid,), w in windows.partition_by("pid", as_dict=True, maintain_order=True).items():
        lo, hi = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        metrics = _process_metrics(gpus.get(pid, []), lo, hi)
        parts.append(pl.concat([w.select("pid", "step", "start_ns", "end_ns"),
                                metrics.drop("window")], how="horizontal"))  # fmt: skip
    return pl.concat(parts).cast(PROCESS_ITERATION_SCHEMA)


def iteration_table(
    kernels: pl.DataFrame,
    memops: pl.DataFrame,
    steps: Steps,
    kept: list[int],
    *,
    per_process: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Step time and communication per iteration, all GPUs together (:data:`ITERATION_SCHEMA`).

    Each process is measured in its own iteration windows (ranks drift apart in time), then
    the processes are added up; the step time is the median of the processes' GPU periods.
    ``per_process``: their :func:`process_iterations`, when known (kernels are then not read).
    """
    if per_process is None:
        per_process = process_iterations(kernels, memops, steps, kept)
    if per_process.is_empty():
        return pl.DataFrame(schema=ITERATION_SCHEMA)
    period = steps.table.group_by("step").agg(pl.col("step_ns").median())
    comm, hidden = pl.col("comm_ns"), pl.col("hidden_ns")
    return (
        per_process.group_by("step")
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
