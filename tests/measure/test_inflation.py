"""What hiding costs (nsysmoe.measure.inflation) against brute force: each compute kernel's time
under communication counted nanosecond by nanosecond, its state, and the lower medians by
sorting; parts measured apart add up to the whole; and on a real trace, one kernel's row
recomputed from the SQLite file with sqlite3 alone."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.classify import classify_trace, default_rules
from nsysmoe.io import load_trace
from nsysmoe.measure.inflation import (
    MAX_SPREAD,
    MIN_EACH,
    RATIO,
    durations,
    inflation_table,
)
from nsysmoe.model import WHOLE_TRACE, Window
from nsysmoe.results import SmBudget
from tests.conftest import require_shared

KERNEL = {"pid": pl.Int64, "device": pl.Int64, "start": pl.Int64, "end": pl.Int64,
          "name": pl.String, "class": pl.String, "blocks": pl.Int64}  # fmt: skip

# (device, start, duration, kind): kind 0 = communication, 1-3 = compute kernel shapes
rows = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 80), st.integers(1, 30),
                          st.integers(0, 3)), max_size=40)  # fmt: skip
SHAPES = {1: ("gemm_a", "gemm", 112), 2: ("gemm_a", "gemm", 132), 3: ("attn", "attention", None)}


def frame(events: list[tuple[int, int, int, int]]) -> pl.DataFrame:
    out = [(1, d, s, s + n, *(("nccl", "comm", 24) if k == 0 else SHAPES[k]))
           for d, s, n, k in events]  # fmt: skip
    df = pl.DataFrame(out, schema=KERNEL, orient="row")
    return df.with_columns(  # what the SM budget reads beside them (one read serves both)
        pl.when(pl.col("class") == "comm").then(pl.lit("nccl.allreduce")).alias("channel"),
        *(pl.lit(None, pl.Int32).alias(c) for c in ("threads", "registers", "shared_bytes")))


def lower_median(values: list[int]) -> int:
    return sorted(values)[(len(values) - 1) // 2]


def spread(values: list[int]) -> float:
    """IQR over the median, each the lower quantile (the element at ⌊q·(n−1)⌋)."""
    q = sorted(values)
    at = lambda f: q[int(f * (len(q) - 1))]  # noqa: E731
    return (at(0.75) - at(0.25)) / at(0.5)


def brute(events: list[tuple[int, int, int, int]], lo: int = -(2**62), hi: int = 2**62
          ) -> dict[tuple, dict[str, list[int]]]:  # fmt: skip
    """Per (name, class, blocks): the durations of each state, by counting nanoseconds."""
    comm = {d: set() for d in (0, 1)}
    for d, s, n, k in events:
        if k == 0:
            comm[d].update(range(s, s + n))
    out: dict[tuple, dict[str, list[int]]] = {}
    for d, s, n, k in events:
        if k == 0 or s < lo or s + n > hi:
            continue
        covered = sum(1 for t in range(s, s + n) if t in comm[d])
        state = "alone" if covered == 0 else "overlapped" if 2 * covered >= n else "partial"
        out.setdefault(SHAPES[k], {}).setdefault(state, []).append(n)
    return {key: v for key, v in out.items() if "overlapped" in v}


def expected(by_shape: dict[tuple, dict[str, list[int]]]) -> dict[tuple, tuple]:
    out = {}
    for (name, klass, blocks), states in by_shape.items():
        over, alone = states.get("overlapped", []), states.get("alone", [])
        m_over = lower_median(over)
        m_alone = lower_median(alone) if alone else None
        ok = len(over) >= MIN_EACH and len(alone) >= MIN_EACH
        if ok:
            ok = spread(alone) <= MAX_SPREAD and spread(over) <= MAX_SPREAD
            ok = ok and RATIO[0] <= m_over / m_alone <= RATIO[1]
        extra = (m_over - m_alone) * len(over) if ok else None
        out[(name, blocks)] = (klass, len(over), len(alone), len(states.get("partial", [])),
                               m_over, m_alone, extra, ok)  # fmt: skip
    return out


def got(table: pl.DataFrame) -> dict[tuple, tuple]:
    return {(r["kernel"], r["blocks"]): (r["class"], r["n_overlapped"], r["n_alone"],
                                         r["n_partial"], r["median_overlapped_ns"],
                                         r["median_alone_ns"], r["extra_ns"], r["comparable"])
            for r in table.iter_rows(named=True)}  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(rows)
def test_table_equals_counting_each_nanosecond(events: list) -> None:
    assert got(inflation_table(durations(frame(events), WHOLE_TRACE))) == expected(brute(events))


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(0, 60), st.integers(0, 60))
def test_only_kernels_wholly_inside_the_window_count(events: list, a: int, width: int) -> None:
    table = inflation_table(durations(frame(events), Window(a, a + width)))
    assert got(table) == expected(brute(events, a, a + width))


@settings(max_examples=150, deadline=None)
@given(rows)
def test_parts_of_one_gpu_each_add_up_to_the_whole(events: list) -> None:
    """A trace measured one GPU at a time (as one process at a time) gives the same table."""
    df = frame(events)
    parts = [durations(df.filter(pl.col("device") == d), WHOLE_TRACE) for d in (0, 1)]
    whole = inflation_table(durations(df, WHOLE_TRACE))
    assert got(inflation_table(pl.concat(parts))) == got(whole)


def test_a_kernel_whose_work_varies_is_flagged_not_counted() -> None:
    alone = [(0, 100 * i, d, 1) for i, d in enumerate([10, 20, 30, 40])]
    overlapped = [(0, 1000 + 100 * i, 10, 1) for i in range(3)]
    comm = [(0, 1000 + 100 * i, 10, 0) for i in range(3)]
    table = inflation_table(durations(frame(alone + overlapped + comm), WHOLE_TRACE))
    row = table.row(0, named=True)
    assert not row["comparable"] and row["extra_ns"] is None
    assert "varies" in row["why"]
    totals = budget(table)
    assert (totals.gemm_attn_extra_ns, totals.extra_ns) == (None, None)  # unknown, not 0
    assert totals.comparable_rows() == (0, 1)


def test_no_compute_beside_communication_costs_0_not_unknown() -> None:
    events = [(0, 0, 10, 1), (0, 20, 10, 0)]
    table = inflation_table(durations(frame(events), WHOLE_TRACE))
    assert table.is_empty() and budget(table).gemm_attn_extra_ns == 0
    assert SmBudget.none().gemm_attn_extra_ns is None  # nothing measured


def budget(table: pl.DataFrame) -> SmBudget:
    return SmBudget(pl.DataFrame(), pl.DataFrame(), pl.DataFrame(), table)


def test_two_launches_are_too_few() -> None:
    events = [(0, 0, 10, 1), (0, 20, 10, 1), (0, 40, 10, 1), (0, 60, 12, 1), (0, 60, 12, 0)]
    row = inflation_table(durations(frame(events), WHOLE_TRACE)).row(0, named=True)
    assert (row["n_overlapped"], row["n_alone"], row["comparable"]) == (1, 3, False)
    assert "too few" in row["why"]


def test_nersc_ddp_dgrad_convolution_against_sqlite() -> None:
    """The NERSC DDP baseline: the row of cuDNN's dgrad convolution (8192 blocks) recomputed
    from the SQLite file alone — its launches, and the NCCL kernels' time over each."""
    path = require_shared() / "nsys/nersc-ddp-4gpu-baseline.sqlite"
    name = ("void convolveNd_dgrad_float_engine<float, (int)3, (int)512, (int)6, (int)5, (int)3, "
            "(int)3, (int)3, (bool)0>(int, int, int, const T1 *, int, const T1 *, int, T1 *, "
            "kernel_gradNd_params, unsigned long long, int, unsigned long long, int, float, int)")
    query = ("SELECT k.start, k.end, s.value, k.gridX * k.gridY * k.gridZ FROM "
             "CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName")  # fmt: skip
    with closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as db:
        kernels = db.execute(query).fetchall()
    comm = sorted((s, e) for s, e, n, _ in kernels if n.startswith("ncclKernel"))
    mine = [(s, e) for s, e, n, b in kernels if n == name and b == 8192]
    assert mine, "the kernel is in the trace"
    states: dict[str, list[int]] = {}
    for s, e in mine:
        covered = sum(max(0, min(e, ce) - max(s, cs)) for cs, ce in comm)  # NCCL is serial
        state = "alone" if covered == 0 else "overlapped" if 2 * covered >= e - s else "partial"
        states.setdefault(state, []).append(e - s)
    trace = load_trace(path)
    table = inflation_table(durations(classify_trace(trace, default_rules()).kernels,
                                      WHOLE_TRACE))  # fmt: skip
    row = table.filter((pl.col("kernel") == name) & (pl.col("blocks") == 8192)).row(0, named=True)
    assert row["n_overlapped"] == len(states["overlapped"])
    assert row["n_alone"] == len(states["alone"])
    assert row["n_partial"] == len(states.get("partial", []))
    assert row["median_overlapped_ns"] == lower_median(states["overlapped"])
    assert row["median_alone_ns"] == lower_median(states["alone"])


def test_one_kernel_slowed_beside_communication_counts_its_extra_time() -> None:
    alone = [(0, 100 * i, 10, 1) for i in range(3)]
    overlapped = [(0, 1000 + 100 * i, 12, 1) for i in range(3)]
    comm = [(0, 1000 + 100 * i, 12, 0) for i in range(3)]
    table = inflation_table(durations(frame(alone + overlapped + comm), WHOLE_TRACE))
    row = table.row(0, named=True)
    assert (row["comparable"], row["extra_ns"], row["why"]) == (True, 6, None)
    assert budget(table).gemm_attn_extra_ns == 6 == budget(table).extra_ns


def test_two_problem_sizes_under_one_name_and_grid_are_not_an_inflation() -> None:
    """Overlapped, the kernel ran the small problem; alone, the big one: half the time is not
    a speed-up from communication."""
    alone = [(0, 100 * i, 20, 1) for i in range(3)]
    overlapped = [(0, 1000 + 100 * i, 9, 1) for i in range(3)]
    comm = [(0, 1000 + 100 * i, 9, 0) for i in range(3)]
    row = inflation_table(durations(frame(alone + overlapped + comm), WHOLE_TRACE)).row(
        0, named=True)
    assert (row["comparable"], row["extra_ns"]) == (False, None)
    assert row["why"] == "not one work: overlapped it took 45% of its time alone"
