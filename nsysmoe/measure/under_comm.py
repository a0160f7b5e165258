"""Each compute kernel's time under its GPU's communication, counted once: the SM budget's
kernels beside communication and the inflation states both read it, from one read of the
window's kernels.

Over the window (kernels clipped to it; zero-length ones left out): a compute kernel is one
that is neither communication nor a whole CUDA-graph row, and ``under`` = |k ∩ ⋃C| with ⋃C the
union of its GPU's communication kernels, from one sort of those per GPU and two prefix-sum
lookups per kernel (no loop per kernel). ``inside`` marks the compute kernels wholly inside the
window (their durations are not cut: the ones inflation compares).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysmoe.classify import GRAPH
from nsysmoe.intervals import covered_before, sorted_runs, start_order
from nsysmoe.measure.overlap import COMM
from nsysmoe.model import Window

#: the communication kernels' columns the SM budget reads
COMM_COLUMNS = ("pid", "device", "start", "end", "channel", "blocks", "threads", "registers",
                "shared_bytes")  # fmt: skip
#: the compute kernels' columns; ``name`` and ``class`` as dictionary codes (Categorical):
#: grouped by them, a million long names would otherwise be encoded row by row
COMPUTE_COLUMNS = ("pid", "device", "start", "end", "name", "class", "blocks")


@dataclass(frozen=True)
class UnderComm:
    """The window's communication kernels (:data:`COMM_COLUMNS`), its compute kernels
    (:data:`COMPUTE_COLUMNS`, ``inside``, ``under``), and each GPU's span in the window (first
    start to last end of any kernel)."""

    comm: pl.DataFrame
    compute: pl.DataFrame
    spans: dict[tuple[int, int], int]


def is_compute() -> pl.Expr:
    return pl.col("class").is_not_null() & ~pl.col("class").is_in([COMM, GRAPH])


def under_comm(kernels: pl.DataFrame, window: Window) -> UnderComm:
    """:class:`UnderComm` of classified kernels (with their launch shape) over ``window``."""
    lo, hi = window.bounds()
    read = kernels.lazy().select(*dict.fromkeys(COMM_COLUMNS + COMPUTE_COLUMNS),
                                 ((pl.col("start") >= lo) & (pl.col("end") <= hi)).alias("inside"))
    df = window.select(read).filter(pl.col("end") > pl.col("start"))
    comm, compute, spans = pl.collect_all([
        df.filter(pl.col("class") == COMM).select(COMM_COLUMNS),
        df.filter(is_compute()).select(*COMPUTE_COLUMNS, "inside").with_columns(
            pl.col("name", "class").cast(pl.Categorical)),
        df.group_by("pid", "device").agg((pl.col("end").max() - pl.col("start").min())
                                         .alias("span")),
    ])  # fmt: skip
    s, e = compute["start"].to_numpy(), compute["end"].to_numpy()
    pid, device = compute["pid"].to_numpy(), compute["device"].to_numpy()
    under = np.zeros(s.size, dtype=np.int64)
    for (p, d), c in comm.partition_by("pid", "device", as_dict=True).items():
        mine = np.flatnonzero((pid == p) & (device == d))  # a mask per GPU: few
        if not mine.size:
            continue
        cs, ce = c["start"].to_numpy(), c["end"].to_numpy()
        order = start_order(cs)
        runs = sorted_runs(cs[order], ce[order])
        under[mine] = covered_before(*runs, e[mine]) - covered_before(*runs, s[mine])
    return UnderComm(comm, compute.with_columns(pl.Series("under", under)),
                     {(r[0], r[1]): r[2] for r in spans.iter_rows()})  # fmt: skip
