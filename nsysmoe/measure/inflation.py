"""What hiding costs: each compute kernel's duration while communication runs on its GPU,
against its duration while none does — the compute time overlap adds, beside the communication
it hides.

Definitions (over the window; a compute kernel is one that is neither communication nor a
whole CUDA-graph row, and only those wholly inside the window count, so no duration is cut;
c_k = |k ∩ ⋃C| with ⋃C the communication kernels of k's GPU):

* k ran *overlapped* when c_k ≥ half its duration, *alone* when c_k = 0, *partly* otherwise
  (counted, in neither median: a kernel a collective met for a moment is neither)
* per compute kernel name and block count (the grid tells problem sizes apart), over the
  trace's GPUs: ``n_overlapped``, ``n_alone``, ``n_partial``; ``median_overlapped_ns`` and
  ``median_alone_ns``, each the lower median (the ⌈n/2⌉-th smallest: an integer, exact)
* ``comparable``: at least :data:`MIN_EACH` of each; the durations of each state within
  :data:`MAX_SPREAD` (interquartile range over the median, lower quartiles as the median); and
  the overlapped median within :data:`RATIO` of the alone one. A kernel whose work varies
  between launches (grouped GEMMs sized by the tokens routed to them, one GEMM name run on two
  shapes with the same grid) is not one size run two ways, and a ratio of two problem sizes is
  not an inflation: sharing SMs and bandwidth with communication slows a kernel by tens of
  percent, not by half, and does not speed it up. ``why`` says what fails.
* ``extra_ns`` = (median_overlapped_ns − median_alone_ns) · n_overlapped where comparable (null
  otherwise): the compute time the overlap added to those launches; negative where it ran faster
* totals (:class:`~nsysmoe.results.SmBudget`): ``extra_ns`` summed over comparable GEMM and
  attention rows (the A/B's "GEMM+attention" row) and over every comparable row; 0 where no
  such kernel ran overlapped, null where some did but none could be compared

Durations are kept per (name, class, blocks, state) as lists, so the parts of a trace measured
one process at a time add up to the whole trace's medians exactly (:func:`inflation_table`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from nsysmoe.measure.under_comm import UnderComm, under_comm
from nsysmoe.model import Window

OVERLAPPED, ALONE, PARTIAL = "overlapped", "alone", "partial"
#: fewest launches of each state for a comparable row
MIN_EACH = 3
#: the most the durations of either state may spread (IQR / median) for a comparable row
MAX_SPREAD = 0.25
#: the overlapped median over the alone one, for a comparable row: outside it, not one work
RATIO = (0.8, 2.0)
KEYS = ["name", "class", "blocks"]

INFLATION_SCHEMA: dict[str, pl.DataType] = {
    "kernel": pl.String, "class": pl.String, "blocks": pl.Int64,
    "n_overlapped": pl.Int64, "n_alone": pl.Int64, "n_partial": pl.Int64,
    "median_overlapped_ns": pl.Int64, "median_alone_ns": pl.Int64, "extra_ns": pl.Int64,
    "comparable": pl.Boolean, "why": pl.String,
}  # fmt: skip
#: per (name, class, blocks, state): the durations (what a part keeps; parts concatenate)
DURATIONS_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String, "class": pl.String, "blocks": pl.Int64, "state": pl.String,
    "durations": pl.List(pl.Int64),
}  # fmt: skip


#: a kernel's state as :func:`states` codes it (small ints; named once the rows are grouped)
STATE_NAMES = (ALONE, OVERLAPPED, PARTIAL)


def states(kernels: pl.DataFrame, window: Window, under: UnderComm | None = None
           ) -> pl.DataFrame:  # fmt: skip
    """Each compute kernel wholly inside the window with its duration ``dur`` and ``state``
    (an index into :data:`STATE_NAMES`) from its time under communication (``under``:
    :func:`~nsysmoe.measure.under_comm.under_comm` of them, where read already); ``name`` and
    ``class`` as dictionary codes."""
    u = under_comm(kernels, window) if under is None else under
    c = u.compute.filter(pl.col("inside"))
    dur = (c["end"] - c["start"]).to_numpy()
    covered = c["under"].to_numpy()
    state = np.where(covered == 0, 0, np.where(2 * covered >= dur, 1, 2)).astype(np.int8)
    return c.select(KEYS).with_columns(pl.Series("dur", dur), pl.Series("state", state))


def durations(kernels: pl.DataFrame, window: Window, under: UnderComm | None = None
              ) -> pl.DataFrame:  # fmt: skip
    """:func:`states` as lists of durations per (name, class, blocks, state)
    (:data:`DURATIONS_SCHEMA`): every shape, since one that ran alone here may have run
    overlapped in another part of the trace."""
    df = states(kernels, window, under)
    out = df.group_by([*KEYS, "state"]).agg(pl.col("dur").alias("durations"))
    out = out.with_columns(pl.col("state").replace_strict(range(len(STATE_NAMES)), STATE_NAMES,
                                                          return_dtype=pl.String))  # fmt: skip
    return out.select(list(DURATIONS_SCHEMA)).cast(DURATIONS_SCHEMA)


def inflation_table(parts: pl.DataFrame) -> pl.DataFrame:
    """Per (name, class, blocks) that ran overlapped: :data:`INFLATION_SCHEMA`, from the
    :func:`durations` of one or more parts (concatenated), largest extra time first."""
    ran = parts.filter(pl.col("state") == OVERLAPPED).select(KEYS).unique()
    if ran.is_empty():
        return pl.DataFrame(schema=INFLATION_SCHEMA)
    # only the shapes that ran overlapped somewhere: most kernels never did
    parts = parts.join(ran, on=KEYS, nulls_equal=True)
    # each key's durations (over the parts) as one sorted list, read at the ranks that give
    # the lower median and quartiles: no hash of every duration
    lists = parts.group_by([*KEYS, "state"]).agg(pl.col("durations").explode().sort())
    d, n = pl.col("durations"), pl.col("durations").list.len()
    stats = lists.select(*KEYS, "state", n.alias("n"), d.list.get((n - 1) // 2).alias("median"),
                         d.list.get((n - 1) // 4).alias("q1"),
                         d.list.get(3 * (n - 1) // 4).alias("q3"))  # fmt: skip
    wide = {state: stats.filter(pl.col("state") == state).drop("state")
            for state in (OVERLAPPED, ALONE, PARTIAL)}  # fmt: skip
    df = wide[OVERLAPPED].select(*KEYS, pl.col("n").alias("n_overlapped"),
                                 pl.col("median").alias("median_overlapped_ns"),
                                 (pl.col("q3") - pl.col("q1")).alias("iqr_overlapped"))  # fmt: skip
    df = df.join(wide[ALONE].select(*KEYS, pl.col("n").alias("n_alone"),
                                    pl.col("median").alias("median_alone_ns"),
                                    (pl.col("q3") - pl.col("q1")).alias("iqr_alone")),
                 on=KEYS, how="left", nulls_equal=True)  # fmt: skip
    df = df.join(wide[PARTIAL].select(*KEYS, pl.col("n").alias("n_partial")), on=KEYS,
                 how="left", nulls_equal=True)  # fmt: skip
    df = df.with_columns(pl.col("n_alone", "n_partial").fill_null(0))
    few = (pl.col("n_overlapped") < MIN_EACH) | (pl.col("n_alone") < MIN_EACH)
    over, alone = pl.col("median_overlapped_ns"), pl.col("median_alone_ns")

    def spread(state: str) -> pl.Expr:
        return pl.col(f"iqr_{state}") / pl.col(f"median_{state}_ns")

    def share(x: pl.Expr) -> pl.Expr:
        return (100 * x).round(0).cast(pl.Int64)

    ratio = over / alone
    why = (
        pl.when(few).then(pl.format("too few launches (overlapped {}, alone {}; {} of each "
                                    "needed)", "n_overlapped", "n_alone", pl.lit(MIN_EACH)))
        .when((alone <= 0) | (over <= 0)).then(pl.lit("a median of 0 ns"))
        .when(spread("alone") > MAX_SPREAD)
        .then(pl.format("its work varies: alone, the middle half spans {}% of the median",
                        share(spread("alone"))))
        .when(spread("overlapped") > MAX_SPREAD)
        .then(pl.format("its work varies: overlapped, the middle half spans {}% of the median",
                        share(spread("overlapped"))))
        .when((ratio < RATIO[0]) | (ratio > RATIO[1]))
        .then(pl.format("not one work: overlapped it took {}% of its time alone", share(ratio)))
    )  # fmt: skip
    extra = (pl.col("median_overlapped_ns") - pl.col("median_alone_ns")) * pl.col("n_overlapped")
    df = df.with_columns(why.alias("why")).with_columns(
        pl.col("why").is_null().alias("comparable"),
        pl.when(pl.col("why").is_null()).then(extra).alias("extra_ns"),
        pl.col("name").alias("kernel"),
    )
    return (df.select(list(INFLATION_SCHEMA)).cast(INFLATION_SCHEMA)
            .sort(["extra_ns", "n_overlapped", "kernel", "blocks", "class"],
                  descending=[True, True, False, False, False], nulls_last=True))  # fmt: skip
