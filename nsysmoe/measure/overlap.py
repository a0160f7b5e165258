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

import numpy as np
import polars as pl

from nsysmoe.classify import CLASSES, COMPUTE_GEMM_ATTN, GRAPH
from nsysmoe.intervals import intersection_runs, overlap_length, sorted_runs, start_order
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


#: class codes: a kernel's class by its index in CLASSES, then any other class, a null class
#: (neither communication nor compute, as a filter on ``class`` treats it), a memory op
_OTHER, NULL_CODE, MEMOP = len(CLASSES), len(CLASSES) + 1, len(CLASSES) + 2
COMM_CODE = CLASSES.index(COMM)
GEMM_ATTN_CODES = [CLASSES.index(c) for c in COMPUTE_GEMM_ATTN]
_FEW_GPUS = 32  # up to this many, a GPU's rows are found by a mask; beyond, by a partition
Arrays = dict[str, np.ndarray]


def class_code() -> pl.Expr:
    """``code``: the class as an int8 code (index in :data:`CLASSES`; see ``_OTHER``...)."""
    known = pl.col("class").cast(pl.Enum(CLASSES), strict=False).to_physical().cast(pl.Int8)
    other = pl.when(pl.col("class").is_null()).then(NULL_CODE).otherwise(_OTHER)
    return pl.coalesce(known, other).cast(pl.Int8).alias("code")


def by_gpu(df: pl.DataFrame, keys: list[tuple[int, int]]) -> dict[tuple[int, int], Arrays]:
    """Each GPU's columns of ``df`` but pid and device (its key) as numpy arrays, rows in table
    order (a mask per GPU for the usual few GPUs: cheaper than partitioning a million-row
    table)."""
    if len(keys) > _FEW_GPUS:
        parts = df.partition_by("pid", "device", as_dict=True, maintain_order=True,
                                include_key=False)  # fmt: skip
        return {key: {c: p[c].to_numpy() for c in p.columns}
                for key, p in parts.items()}  # fmt: skip
    pid, device = df["pid"].to_numpy(), df["device"].to_numpy()
    cols = {c: df[c].to_numpy() for c in df.columns if c not in ("pid", "device")}
    out = {}
    for key in keys:
        at = np.flatnonzero((pid == key[0]) & (device == key[1]))
        out[key] = {c: a[at] for c, a in cols.items()}
    return out


def gpu_keys(*frames: pl.DataFrame) -> list[tuple[int, int]]:
    """Sorted (pid, device) of every GPU with a row in any of the frames."""
    both = pl.concat([f.select("pid", "device") for f in frames])
    return sorted(both.group_by("pid", "device").len().select("pid", "device").iter_rows())


#: a GPU's figures, its class rows and ⋃K ∩ ⋃C (the compute under its communication)
Figures = tuple[dict[str, int | float | None], list[dict[str, object]],
                tuple[np.ndarray, np.ndarray]]


def _figures(s: np.ndarray, e: np.ndarray, code: np.ndarray, whole: int, ms: np.ndarray,
             me: np.ndarray) -> Figures:  # fmt: skip
    """The GPU's metrics, class rows and ⋃K ∩ ⋃C from one start order of its kernels and memory
    ops: every union is a mask (or a class grouping) of that order, not a new pair of sorts."""
    ws, we = np.concatenate((s, ms)), np.concatenate((e, me))
    wc = np.concatenate((code, np.full(ms.size, MEMOP, dtype=np.int8)))
    order = start_order(ws)
    ws, we, wc = ws[order], we[order], wc[order]
    keep = we > ws
    ws, we, wc = ws[keep], we[keep], wc[keep]

    def runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return sorted_runs(ws[mask], we[mask])

    def length(r: tuple[np.ndarray, np.ndarray]) -> int:
        return int((r[1].view(np.uint64) - r[0].view(np.uint64)).sum(dtype=np.uint64))

    is_comm = wc == COMM_CODE
    compute_mask = (wc != MEMOP) & ~is_comm & (wc != NULL_CODE)
    c_runs, k_runs = runs(is_comm), runs(compute_mask)
    g_runs = runs(np.isin(wc, GEMM_ATTN_CODES))
    comm, compute, active = length(c_runs), length(k_runs), length(runs(np.ones(wc.size, bool)))
    hidden = overlap_length(k_runs, c_runs)  # |C ∩ K| = |C| + |K| − |C ∪ K|
    span = _span((s, ms), (e, me))
    gpu = {
        "kernels": s.size - whole,
        "span_ns": span,
        "active_ns": active,
        "idle_ns": span - active,
        "comm_ns": comm,
        "compute_ns": compute,
        "hidden_ns": hidden,
        "exposed_ns": comm - hidden,
        "hidden_pct": hidden_pct(hidden, comm),
        "comm_gemm_attn_ns": overlap_length(g_runs, c_runs),
    }
    counts = np.bincount(code, minlength=MEMOP + 1)
    rows = []
    for i, klass in enumerate(CLASSES):
        if klass == GRAPH and counts[i] == 0:
            continue  # listed only where whole-graph rows ran
        mine = code == i
        total = int((e[mine] - s[mine]).sum())
        union = comm if i == COMM_CODE else length(runs(wc == i)) if counts[i] else 0
        rows.append({"class": klass, "count": int(counts[i]), "sum_ns": total,
                     "union_ns": union})  # fmt: skip
    return gpu, rows, intersection_runs(k_runs, c_runs)


def _span(starts: tuple[np.ndarray, ...], ends: tuple[np.ndarray, ...]) -> int:
    """Last end minus first start of all rows (empty ones too), as an exact Python int."""
    if not any(a.size for a in starts):
        return 0
    return max(int(a.max()) for a in ends if a.size) - min(int(a.min()) for a in starts if a.size)


def _kernel_arrays(kernels: pl.DataFrame) -> pl.DataFrame:
    whole = (pl.col("graph") == "whole").fill_null(False).alias("whole")
    return kernels.select("pid", "device", "start", "end", class_code(), whole)


def gpu_overlap(kernels: pl.DataFrame, memops: pl.DataFrame) -> dict[str, int | float | None]:
    """Metrics of one GPU from its (already windowed, classified) kernels and memory ops."""
    k = _kernel_arrays(kernels)
    return _figures(k["start"].to_numpy(), k["end"].to_numpy(), k["code"].to_numpy(),
                    int(k["whole"].sum()), memops["start"].to_numpy(),
                    memops["end"].to_numpy())[0]  # fmt: skip


def class_totals(kernels: pl.DataFrame) -> list[dict[str, object]]:
    """count, sum of durations and union length per class, every class listed (zeros included)."""
    k = _kernel_arrays(kernels)
    none = np.zeros(0, dtype=np.int64)
    return _figures(k["start"].to_numpy(), k["end"].to_numpy(), k["code"].to_numpy(),
                    int(k["whole"].sum()), none, none)[1]  # fmt: skip


def per_gpu(
    kernels: pl.DataFrame, memops: pl.DataFrame, window: Window | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-GPU metric table and per-(GPU, class) table; kernels must carry a ``class`` column.

    Python loops here run once per GPU and per class, never per kernel.
    """
    gpus, classes, _ = per_gpu_and_busy(kernels, memops, window)
    return gpus, classes


#: :func:`per_gpu_and_busy`'s third table: per GPU, the intervals of ⋃K ∩ ⋃C
BUSY_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "device": pl.Int64, "start": pl.Int64, "end": pl.Int64,
}  # fmt: skip


def busy_table(per_gpu: list[tuple[tuple[int, int], np.ndarray, np.ndarray]]) -> pl.DataFrame:
    """:data:`BUSY_SCHEMA` rows from ((pid, device), starts, ends) per GPU, in the given order."""
    parts = [pl.DataFrame({"pid": np.full(s.size, pid, np.int64),
                           "device": np.full(s.size, device, np.int64), "start": s, "end": e})
             for (pid, device), s, e in per_gpu if s.size]  # fmt: skip
    return pl.concat(parts).cast(BUSY_SCHEMA) if parts else pl.DataFrame(schema=BUSY_SCHEMA)


def per_gpu_and_busy(
    kernels: pl.DataFrame, memops: pl.DataFrame, window: Window | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """:func:`per_gpu`'s two tables and, from the same unions, each GPU's ⋃K ∩ ⋃C as disjoint
    intervals in time order (:data:`BUSY_SCHEMA`; GPUs in sorted order, none without any):
    what :func:`nsysmoe.measure.collectives.compute_under_comm` gives, without its sorts."""
    window = window or WHOLE_TRACE
    narrow = window.select(_kernel_arrays(kernels))
    ops = window.select(memops.select("pid", "device", "start", "end"))
    keys = gpu_keys(narrow, ops)
    k_parts, m_parts = by_gpu(narrow, keys), by_gpu(ops, keys)
    gpu_rows, class_rows, busy = [], [], []
    for key in keys:
        k, m = k_parts.get(key), m_parts.get(key)
        none = np.zeros(0, dtype=np.int64)
        ks, ke, code = (k["start"], k["end"], k["code"]) if k else (none, none, none)
        ms, me = (m["start"], m["end"]) if m else (none, none)
        n_whole = int(k["whole"].sum()) if k else 0
        gpu, classes, both = _figures(ks, ke, code.astype(np.int8), n_whole, ms, me)
        gpu_rows.append({"pid": key[0], "device": key[1], **gpu})
        class_rows += [{"pid": key[0], "device": key[1], **r} for r in classes]
        busy.append((key, *both))
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
        busy_table(busy),
    )
