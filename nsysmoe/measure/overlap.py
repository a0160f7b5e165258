"""Per-GPU overlap metrics: how much communication ran under compute, exact to the nanosecond.

Definitions (per GPU = (pid, device), over the analysis window):

* ``comm_ns``   = |⋃C|, C = communication kernels; ``compute_ns`` = |⋃K|, K = every other kernel
  (whole CUDA-graph rows included: class ``graph`` is compute, see :mod:`nsysmoe.measure.graphs`)
* ``kernels``: kernel rows; a whole-graph row is one replay, not a kernel, and is not counted
* ``hidden_ns`` = |⋃C ∩ ⋃K| = |⋃C| + |⋃K| − |⋃C ∪ ⋃K|; ``exposed_ns`` = comm_ns − hidden_ns;
  ``hidden_pct`` = 100 · hidden_ns / comm_ns (null without communication)
* ``comm_gemm_attn_ns`` = |⋃C ∩ ⋃(GEMM ∪ attention)|
* ``active_ns`` = |⋃(kernels ∪ memcpy ∪ memset)|; ``span_ns`` = last end − first start of that
  work; ``idle_ns`` = span_ns − active_ns
* per class: ``count``, ``sum_ns`` (durations added, NOT wall time), ``union_ns``; ``graph``
  is listed only on a GPU that ran whole-graph rows

Kernel durations are never added up and called wall time: concurrent kernels overlap. The
functions :func:`hidden_ns`, :func:`hidden_pct` (and their polars forms) are the one definition
every figure uses: per GPU, per iteration, per NVTX range, summed over GPUs, ranks or an A/B.
"""

from __future__ import annotations

from typing import TypeVar

import polars as pl

from nsysmoe.classify import CLASSES, COMPUTE_GEMM_ATTN, GRAPH
from nsysmoe.intervals import IntervalSet
from nsysmoe.model import WHOLE_TRACE, Window
from nsysmoe.results import Totals

COMM = "comm"
N = TypeVar("N", int, pl.Expr)  # a length in ns, or a polars column of them

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




def hidden_ns(comm_ns: N, compute_ns: N, kernel_union_ns: N) -> N:
    """|⋃C ∩ ⋃K| from the two unions and the union of both (inclusion–exclusion, exact)."""
    return comm_ns + compute_ns - kernel_union_ns


def hidden_pct(hidden: int, comm: int) -> float | None:
    """Share of communication time under compute; None without communication."""
    return 100.0 * hidden / comm if comm else None


def hidden_pct_expr(hidden: pl.Expr, comm: pl.Expr) -> pl.Expr:
    """:func:`hidden_pct` on polars columns (null where there is no communication)."""
    return pl.when(comm > 0).then(100.0 * hidden / comm)


def totals(gpus: pl.DataFrame) -> Totals:
    """All GPUs of a per-GPU table (:data:`GPU_COLUMNS`) together: sums, hidden % of the sums."""
    s = {c: int(gpus[c].sum()) for c in GPU_COLUMNS if c not in ("pid", "device", "hidden_pct")}
    return Totals(**s, hidden_pct=hidden_pct(s["hidden_ns"], s["comm_ns"]))


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
    hidden = hidden_ns(comm.length, compute.length, _iset(kernels).length)
    span = int(work["end"].max() - work["start"].min()) if len(work) else 0
    return {
        "kernels": len(kernels) - int((kernels["graph"] == "whole").sum()),
        "span_ns": span,
        "active_ns": active.length,
        "idle_ns": span - active.length,
        "comm_ns": comm.length,
        "compute_ns": compute.length,
        "hidden_ns": hidden,
        "exposed_ns": comm.length - hidden,
        "hidden_pct": hidden_pct(hidden, comm.length),
        "comm_gemm_attn_ns": comm.intersect_length(gemm_attn),
    }


def class_totals(kernels: pl.DataFrame) -> list[dict[str, object]]:
    """count, sum of durations and union length per class, every class listed (zeros included)."""
    rows = []
    for klass in CLASSES:
        sub = kernels.filter(pl.col("class") == klass)
        if klass == GRAPH and sub.is_empty():
            continue  # listed only where whole-graph rows ran
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
