"""enclosing_pairs against brute force: every (range, call) pair checked one by one."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe import enclosing
from nsysmoe.enclosing import enclosing_pairs


def brute(ranges: list[tuple], calls: list[tuple]) -> set[tuple[int, int]]:
    return {
        (rid, cid)
        for rid, rt, r0, r1 in ranges
        for cid, ct, c0, c1 in calls
        if None not in (rt, r0, r1, ct, c0, c1) and rt == ct and r0 <= c0 and r1 >= c1
    }


def frames(ranges: list[tuple], calls: list[tuple]) -> tuple[pl.DataFrame, pl.DataFrame]:
    cols = ["tid", "start", "end"]
    r = pl.DataFrame(ranges, schema=["range_id", *cols], orient="row").cast(pl.Int64)
    c = pl.DataFrame(calls, schema=["call_id", *cols], orient="row").cast(
        {"call_id": pl.UInt32, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64})
    return r, c


def got(ranges: list[tuple], calls: list[tuple]) -> set[tuple[int, int]]:
    out = enclosing_pairs(*frames(ranges, calls))
    pairs = list(out.iter_rows())
    assert len(pairs) == len(set(pairs)), "a pair came out twice"
    return set(pairs)


@st.composite
def nested(draw: st.DrawFn, tid: int, first_id: int) -> list[tuple]:
    """A push/pop stack on one thread: properly nested ranges, ties and zero lengths allowed."""
    out: list[tuple] = []
    stack: list[int] = []
    t = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 25))):
        t += draw(st.integers(0, 3))
        if stack and draw(st.booleans()):
            out.append((first_id + len(out), tid, stack.pop(), t))
        else:
            stack.append(t)
    while stack:
        t += draw(st.integers(0, 2))
        out.append((first_id + len(out), tid, stack.pop(), t))
    return out


times = st.integers(0, 40)
maybe = st.one_of(st.none(), times) | times | times


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[tuple], list[tuple]]:
    ranges: list[tuple] = []
    for tid in range(draw(st.integers(1, 3))):
        ranges += draw(nested(tid, len(ranges)))
    for _ in range(draw(st.integers(0, 6))):  # start/end ranges: any overlap, even inverted
        ranges.append((len(ranges), draw(st.integers(0, 3)), draw(maybe), draw(maybe)))
    calls = []
    for i in range(draw(st.integers(0, 30))):
        t0 = draw(times)
        t1 = t0 + draw(st.integers(-1, 6)) if draw(st.booleans()) else draw(maybe)
        calls.append((i, draw(st.one_of(st.none(), st.integers(0, 3))), t0, t1))
    return ranges, calls


@settings(max_examples=400, deadline=None)
@given(cases())
def test_matches_brute_force(case: tuple[list[tuple], list[tuple]]) -> None:
    ranges, calls = case
    assert got(ranges, calls) == brute(ranges, calls)


@settings(max_examples=100, deadline=None)
@given(cases(), st.integers(1, 3))
def test_matches_brute_force_few_layers(case: tuple, layers: int) -> None:
    """With the layer cap low, deep ranges take the general join: still exact."""
    ranges, calls = case
    old = enclosing.MAX_LAYERS
    enclosing.MAX_LAYERS = layers
    try:
        assert got(ranges, calls) == brute(ranges, calls)
    finally:
        enclosing.MAX_LAYERS = old


def test_boundaries_are_inclusive() -> None:
    ranges = [(0, 1, 10, 20), (1, 1, 20, 20), (2, 1, 20, 30), (3, 2, 10, 20)]
    calls = [(0, 1, 10, 10), (1, 1, 20, 20), (2, 1, 10, 20), (3, 1, 19, 21), (4, 2, 20, 20)]
    assert got(ranges, calls) == {(0, 0), (0, 1), (1, 1), (2, 1), (0, 2), (3, 4)}


def test_times_far_apart_use_ranks() -> None:
    """Times spread over more than fits beside the thread index still compare exactly."""
    big = 2**62
    ranges = [(0, 7, -big, big), (1, 7, 0, 5), (2, 8, -big, 0)]
    calls = [(0, 7, 0, 5), (1, 7, -big, -big + 1), (2, 8, -5, 0)]
    assert got(ranges, calls) == brute(ranges, calls) == {(0, 0), (1, 0), (0, 1), (2, 2)}


def test_no_common_thread() -> None:
    assert got([(0, 1, 0, 9)], [(0, 2, 1, 2)]) == set()
    assert enclosing_pairs(*frames([], [])).schema == enclosing.EMPTY_SCHEMA
