"""Per-GPU overlap metrics: how much communication ran under compute, exact to the nanosecond.

Definitions (per GPU = (pid, device), over the analysis window):

* ``comm_ns``   = |⋃C|, C = communication kernels; ``compute_ns`` = |⋃K|, K = every other kernel
* ``hidden_ns`` = |⋃C ∩ ⋃K|; ``exposed_ns`` = comm_ns − hidden_ns;
  ``hidden_pct`` = 100 · hidden_ns / comm_ns (null without communication)
* ``comm_gemm_attn_ns`` = |⋃C ∩ ⋃(GEMM ∪ attention)|
* ``active_ns`` = |⋃(kernels ∪ memcpy ∪ memset)|; ``span_ns`` = last end − first start of that
  work; ``idle_ns`` = span_ns − active_ns
* per class: ``count``, ``sum_ns`` (durations added, NOT wall time), ``union_ns``

Kernel durations are never added up and called wall time: concurrent kernels overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysmoe.classify import CLASSES, COMPUTE_GEMM_ATTN
from nsysmoe.intervals import IntervalSet

COMM = "comm"

#: Columns of the per-GPU table, in report order (all integers are nanoseconds).
GPU_COLUMNS = (
    "pid",
    "device",
    "kernels",
    "span_ns",
    "active_ns",
    "idle_ns",
    "comm_ns",
    "compute_ns",
    "hidden_ns",
    "exposed_ns",
    "hidden_pct",
    "comm_gemm_attn_ns",
)


@dataclass(frozen=True)
class Window:
    """Half-open analysis window [start_ns, end_ns) on the trace timeline; None = unbounded."""

    start_ns: int | None = None
    end_ns: int | None = None
    #: the bounds count from the trace's first GPU activity (``--window +2s:+5s``), so one
    #: window means the same on traces with different time origins (epoch-stamped, Kineto)
    relative: bool = False

    def anchored(self, origin: int) -> Window:
        """The absolute window, for a trace whose first GPU activity starts at ``origin``."""
        if not self.relative:
            return self
        lo, hi = self.start_ns, self.end_ns
        return Window(None if lo is None else lo + origin, None if hi is None else hi + origin)

    @property
    def bounded(self) -> bool:
        return self.start_ns is not None or self.end_ns is not None

    def bounds(self) -> tuple[int, int]:
        lo = self.start_ns if self.start_ns is not None else np.iinfo(np.int64).min
        hi = self.end_ns if self.end_ns is not None else np.iinfo(np.int64).max
        return int(lo), int(hi)

    def select(self, df: pl.DataFrame) -> pl.DataFrame:
        """Rows whose interval meets the window, clipped to it (zero-length rows: start inside)."""
        if not self.bounded:
            return df
        lo, hi = self.bounds()
        inside = ((pl.col("end") > lo) | (pl.col("start") >= lo)) & (pl.col("start") < hi)
        return df.filter(inside).with_columns(
            pl.col("start").clip(lo, hi), pl.col("end").clip(lo, hi)
        )


WHOLE_TRACE = Window()


def _iset(df: pl.DataFrame) -> IntervalSet:
    return IntervalSet.from_arrays(df["start"].to_numpy(), df["end"].to_numpy())


def gpu_overlap(kernels: pl.DataFrame, memops: pl.DataFrame) -> dict[str, int | float | None]:
    """Metrics of one GPU from its (already windowed, classified) kernels and memory ops."""
    is_comm = kernels["class"] == COMM
    comm = _iset(kernels.filter(is_comm))
    compute = _iset(kernels.filter(~is_comm))
    gemm_attn = _iset(kernels.filter(pl.col("class").is_in(COMPUTE_GEMM_ATTN)))
    work = pl.concat([kernels.select("start", "end"), memops.select("start", "end")])
    active = _iset(work)
    hidden = comm.intersect_length(compute)
    span = int(work["end"].max() - work["start"].min()) if len(work) else 0
    return {
        "kernels": len(kernels),
        "span_ns": span,
        "active_ns": active.length,
        "idle_ns": span - active.length,
        "comm_ns": comm.length,
        "compute_ns": compute.length,
        "hidden_ns": hidden,
        "exposed_ns": comm.length - hidden,
        "hidden_pct": 100.0 * hidden / comm.length if comm.length else None,
        "comm_gemm_attn_ns": comm.intersect_length(gemm_attn),
    }


def class_totals(kernels: pl.DataFrame) -> list[dict[str, object]]:
    """count, sum of durations and union length per class, every class listed (zeros included)."""
    rows = []
    for klass in CLASSES:
        sub = kernels.filter(pl.col("class") == klass)
        rows.append(
            {
                "class": klass,
                "count": len(sub),
                "sum_ns": int((sub["end"] - sub["start"]).sum()) if len(sub) else 0,
                "union_ns": _iset(sub).length,
            }
        )
    return rows


def per_gpu(
    kernels: pl.DataFrame, memops: pl.DataFrame, window: Window | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-GPU metric table and per-(GPU, class) table; kernels must carry a ``class`` column.

    Python loops here run once per GPU and per class, never per kernel.
    """
    window = window or WHOLE_TRACE
    kernels, memops = window.select(kernels), window.select(memops)
    keys = sorted(
        pl.concat([kernels.select("pid", "device"), memops.select("pid", "device")])
        .unique()
        .iter_rows()
    )
    k_parts = kernels.partition_by("pid", "device", as_dict=True)
    m_parts = memops.partition_by("pid", "device", as_dict=True)
    gpu_rows, class_rows = [], []
    for key in keys:
        k = k_parts.get(key, kernels.clear())
        m = m_parts.get(key, memops.clear())
        gpu_rows.append({"pid": key[0], "device": key[1], **gpu_overlap(k, m)})
        class_rows += [{"pid": key[0], "device": key[1], **r} for r in class_totals(k)]
    gpu_schema = {c: pl.Int64 for c in GPU_COLUMNS} | {"hidden_pct": pl.Float64}
    class_schema = {
        "pid": pl.Int64,
        "device": pl.Int64,
        "class": pl.String,
        "count": pl.Int64,
        "sum_ns": pl.Int64,
        "union_ns": pl.Int64,
    }
    return (
        pl.DataFrame(gpu_rows, schema=gpu_schema, orient="row"),
        pl.DataFrame(class_rows, schema=class_schema, orient="row"),
    )
