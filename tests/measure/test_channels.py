"""Per-channel overlap (nsysmoe.measure.channels) against a per-nanosecond brute force."""

from __future__ import annotations

from collections import defaultdict

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsysmoe.measure.channels import (
    CHANNEL_ORDER,
    channel_iterations,
    channel_table,
    channel_totals,
    coded_kernels,
)
from nsysmoe.measure.overlap import per_gpu
from nsysmoe.model import MEMOP_SCHEMA, Window

CLASSES = ("comm", "gemm", "attention", "elementwise", "graph")
CHANNELS = ("ep.dispatch", "ep.combine", "nccl.allreduce", "mine")


def frame(rows: list[tuple[int, int, int, str, str | None]]) -> pl.DataFrame:
    """(device, start, end, class, channel) → a classified kernel table of pid 1."""
    return pl.DataFrame(
        [(1, d, s, e, c, ch if c == "comm" else None) for d, s, e, c, ch in rows],
        schema={"pid": pl.Int64, "device": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                "class": pl.String, "channel": pl.String},
        orient="row",
    )  # fmt: skip


def brute(rows, lo: int = -(10**9), hi: int = 10**9) -> dict[tuple[int, str], dict[str, int]]:
    """Per (device, channel), painting every nanosecond inside [lo, hi)."""
    cover: dict[int, dict[int, set]] = defaultdict(lambda: defaultdict(set))
    counts: dict[tuple[int, str], int] = defaultdict(int)
    for d, s, e, c, ch in rows:
        tag = ("comm", ch) if c == "comm" else ("K", c in ("gemm", "attention"))
        if c == "comm" and ((s < hi and e > lo) or (s == e and lo <= s < hi)):
            counts[(d, ch)] += 1
        for t in range(max(s, lo), min(e, hi)):
            cover[d][t].add(tag)
    out: dict[tuple[int, str], dict[str, int]] = {}
    for (d, ch), n in counts.items():
        m = dict.fromkeys(("comm_ns", "hidden_ns", "comm_gemm_attn_ns", "exposed_only_ns"), 0)
        for tags in cover[d].values():
            if ("comm", ch) not in tags:
                continue
            compute = {t for t in tags if t[0] == "K"}
            others = {t for t in tags if t[0] == "comm" and t[1] != ch}
            m["comm_ns"] += 1
            m["hidden_ns"] += bool(compute)
            m["comm_gemm_attn_ns"] += ("K", True) in compute
            m["exposed_only_ns"] += not compute and not others
        out[(d, ch)] = {"count": n, **m}
    return out


row = st.tuples(
    st.integers(0, 1),
    st.integers(0, 60),
    st.integers(0, 25),
    st.sampled_from(CLASSES),
    st.sampled_from(CHANNELS),
).map(lambda r: (r[0], r[1], r[1] + r[2], r[3], r[4]))


@settings(max_examples=150, deadline=None)
@given(st.lists(row, max_size=30))
def test_channel_table_equals_brute_force(rows) -> None:
    got = channel_table(frame(rows))
    want = brute(rows)
    assert {(r["device"], r["channel"]) for r in got.iter_rows(named=True)} == set(want)
    for r in got.iter_rows(named=True):
        w = want[(r["device"], r["channel"])]
        assert {k: r[k] for k in w} == w
        assert r["exposed_ns"] == r["comm_ns"] - r["hidden_ns"]
    # the union of the channels is the GPU's communication union, and exposed_only never
    # charges a nanosecond twice
    kernels = frame(rows).with_columns(pl.lit(None, pl.String).alias("graph"))
    gpus, _ = per_gpu(kernels, pl.DataFrame(schema=MEMOP_SCHEMA))
    for g in gpus.iter_rows(named=True):
        mine = got.filter(pl.col("device") == g["device"])
        assert int(mine["exposed_only_ns"].sum()) <= g["exposed_ns"]
        assert int(mine["comm_ns"].sum()) >= g["comm_ns"]


@settings(max_examples=150, deadline=None)
@given(st.lists(row, max_size=30), st.integers(-5, 70), st.integers(0, 40))
@example(rows=[(0, 10, 10, "comm", "mine")], lo=10, width=5)  # zero-length, at the start
def test_channel_table_over_a_window_equals_brute_force(rows, lo, width) -> None:
    """Each GPU's coded rows clipped to the window in numpy (the kernels coded once, as the
    pipeline shares them) give the nanosecond painting of the window."""
    hi = lo + width
    got = channel_table(coded_kernels(frame(rows)), Window(lo, hi))
    want = brute(rows, lo, hi)
    assert {(r["device"], r["channel"]) for r in got.iter_rows(named=True)} == set(want)
    for r in got.iter_rows(named=True):
        assert {k: r[k] for k in want[(r["device"], r["channel"])]} == want[(r["device"],
                                                                              r["channel"])]
    assert got.equals(channel_table(frame(rows), Window(lo, hi)))


@settings(max_examples=100, deadline=None)
@given(st.lists(row, max_size=30), st.lists(st.integers(1, 30), min_size=1, max_size=4),
       st.integers(-5, 20))  # fmt: skip
def test_channel_iterations_equal_brute_force_per_window(rows, widths, first) -> None:
    bounds = [first]
    for w in widths:
        bounds.append(bounds[-1] + w)
    windows = pl.DataFrame({"pid": [1] * len(widths), "step": list(range(10, 10 + len(widths))),
                            "start_ns": bounds[:-1], "end_ns": bounds[1:]})  # fmt: skip
    got = channel_iterations(frame(rows), windows)
    want: dict[tuple[int, str], dict[str, int]] = {}
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        for (_, ch), m in brute(rows, lo, hi).items():
            acc = want.setdefault((10 + i, ch), dict.fromkeys(m, 0))
            for k, v in m.items():
                acc[k] += v
    assert {(r["step"], r["channel"]) for r in got.iter_rows(named=True)} == set(want)
    for r in got.iter_rows(named=True):
        assert {k: r[k] for k in want[(r["step"], r["channel"])]} == want[(r["step"], r["channel"])]


def test_by_hand_with_window_order_and_totals() -> None:
    rows = [
        (0, 0, 10, "comm", "ep.dispatch"),
        (0, 5, 15, "comm", "ep.combine"),  # overlaps dispatch on [5, 10)
        (0, 8, 12, "gemm", None),
        (0, 20, 30, "comm", "mine"),
        (1, 0, 4, "comm", "ep.dispatch"),
    ]
    t = channel_table(frame(rows))
    assert t["channel"].to_list() == ["ep.dispatch", "ep.combine", "mine", "ep.dispatch"]
    d0 = t.row(0, named=True)
    assert (d0["comm_ns"], d0["hidden_ns"], d0["exposed_only_ns"]) == (10, 2, 5)
    assert d0["comm_gemm_attn_ns"] == 2 and d0["hidden_pct"] == pytest.approx(20.0)
    c0 = t.row(1, named=True)
    assert (c0["comm_ns"], c0["hidden_ns"], c0["exposed_only_ns"]) == (10, 4, 3)
    tot = channel_totals(t)
    assert tot["channel"].to_list() == ["ep.dispatch", "ep.combine", "mine"]
    assert tot.row(0, named=True)["comm_ns"] == 14 and tot.row(0, named=True)["count"] == 2
    window = channel_table(frame(rows), Window(9, 25))
    assert window.filter(pl.col("channel") == "ep.dispatch")["comm_ns"].to_list() == [1]
    assert CHANNEL_ORDER[-1] == "other"


def test_no_communication_gives_empty_tables() -> None:
    rows = [(0, 0, 10, "gemm", None)]
    assert channel_table(frame(rows)).is_empty()
    assert channel_totals(channel_table(frame(rows))).is_empty()
    windows = pl.DataFrame({"pid": [1], "step": [0], "start_ns": [0], "end_ns": [10]})
    assert channel_iterations(frame(rows), windows).is_empty()


def test_communication_without_a_channel_is_other() -> None:
    """A communication kernel no rule gave a channel counts as ``other``, beside a kernel a
    rule named ``other`` and one of a named channel."""
    k = pl.DataFrame({"pid": [1, 1, 1, 1], "device": [0, 0, 0, 0], "start": [0, 20, 40, 60],
                      "end": [10, 25, 50, 61], "class": ["comm", "comm", "comm", "gemm"],
                      "channel": [None, "other", "ep.combine", None]})  # fmt: skip
    got = channel_table(k).select("channel", "count", "comm_ns").rows()
    assert got == [("ep.combine", 1, 10), ("other", 2, 15)]
    alone = channel_table(k.head(1)).select("channel", "count", "comm_ns").rows()
    assert alone == [("other", 1, 10)]
