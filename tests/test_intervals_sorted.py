"""Unions from one start order (grouped_runs and friends) against the brute-force oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.intervals import (
    IntervalSet,
    by_group,
    covered_before,
    grouped_runs,
    grouped_union_lengths,
    intersection_runs,
    overlap_length,
    sorted_runs,
    sorted_union_length,
    start_order,
)
from tests.fixtures.sets import covered, runs

I64 = np.iinfo(np.int64)
coord = st.integers(-3, 40)
row = st.tuples(st.integers(0, 4), coord, coord)  # group, start, end (inverted, zero, dup...)


def _sorted(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, ...]:
    g = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = np.array([r[2] for r in rows], dtype=np.int64)
    o = start_order(s)
    o = o[by_group(g[o])]
    return g[o], s[o], e[o]


def _oracle(rows: list[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
    groups = {g for g, _, _ in rows}
    return {k: runs(covered((s, e) for g, s, e in rows if g == k)) for k in groups}


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=30))
def test_grouped_runs_match_the_oracle(rows: list[tuple[int, int, int]]) -> None:
    g, s, e = _sorted(rows)
    rg, rs, re_ = grouped_runs(g, s, e)
    got: dict[int, list[tuple[int, int]]] = {}
    for k, a, b in zip(rg.tolist(), rs.tolist(), re_.tolist(), strict=True):
        got.setdefault(k, []).append((a, b))
    want = {k: v for k, v in _oracle(rows).items() if v}
    assert got == want
    assert list(rg) == sorted(rg)  # (group, start) order
    lengths = grouped_union_lengths(g, s, e, 5)
    assert lengths.tolist() == [len(covered((a, b) for h, a, b in rows if h == k))
                                for k in range(5)]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(coord, coord), max_size=30))
def test_sorted_union_length_equals_interval_set(pairs: list[tuple[int, int]]) -> None:
    s = np.array([p[0] for p in pairs], dtype=np.int64)
    e = np.array([p[1] for p in pairs], dtype=np.int64)
    o = start_order(s)
    assert sorted_union_length(s[o], e[o]) == len(covered(pairs))
    assert sorted_union_length(s[o], e[o]) == IntervalSet.from_arrays(s, e).length


extreme = st.sampled_from([int(I64.min), int(I64.min) + 1, -1, 0, 1, int(I64.max) - 1,
                           int(I64.max)])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), extreme | st.integers(-5, 5),
                          extreme | st.integers(-5, 5)), max_size=12))  # fmt: skip
def test_int64_extremes_are_exact(rows: list[tuple[int, int, int]]) -> None:
    """Groups spanning the whole int64 range take the one-group-at-a-time path; same runs."""
    g, s, e = _sorted(rows)
    rg, rs, re_ = grouped_runs(g, s, e)
    for k in range(4):
        want = IntervalSet.from_arrays([r[1] for r in rows if r[0] == k],
                                       [r[2] for r in rows if r[0] == k])  # fmt: skip
        mine = rg == k
        assert rs[mine].tolist() == want.starts.tolist()
        assert re_[mine].tolist() == want.ends.tolist()


def test_groups_with_one_or_no_rows_and_empty_input() -> None:
    g = np.array([0, 2, 2], dtype=np.int64)
    s = np.array([5, 1, 3], dtype=np.int64)
    e = np.array([5, 4, 9], dtype=np.int64)  # group 0: one zero-length row
    assert grouped_union_lengths(g, s, e, 4).tolist() == [0, 0, 8, 0]
    none = np.zeros(0, dtype=np.int64)
    assert [a.size for a in grouped_runs(none, none, none)] == [0, 0, 0]
    assert grouped_union_lengths(none, none, none, 2).tolist() == [0, 0]
    assert sorted_union_length(none, none) == 0


def test_a_group_starting_before_the_previous_groups_end_opens_a_run() -> None:
    """The cumulative maximum must not carry group 0's late end into group 1."""
    g = np.array([0, 1, 1], dtype=np.int64)
    s = np.array([0, 2, 50], dtype=np.int64)
    e = np.array([100, 3, 60], dtype=np.int64)
    rg, rs, re_ = grouped_runs(g, s, e)
    assert list(zip(rg.tolist(), rs.tolist(), re_.tolist(), strict=True)) == [
        (0, 0, 100), (1, 2, 3), (1, 50, 60)]  # fmt: skip


def test_by_group_is_stable_for_wide_codes() -> None:
    codes = np.array([70000, 3, 70000, 3], dtype=np.int64)
    assert by_group(codes).tolist() == [1, 3, 0, 2]


Pairs = list[tuple[int, int]]
pairs = st.lists(st.tuples(coord, coord), max_size=20)


@settings(max_examples=300, deadline=None)
@given(pairs, pairs)
def test_sorted_runs_and_overlap_length_match_the_oracle(a: Pairs, b: Pairs) -> None:
    def runs_of(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        s = np.array([p[0] for p in pairs if p[1] > p[0]], dtype=np.int64)
        e = np.array([p[1] for p in pairs if p[1] > p[0]], dtype=np.int64)
        o = start_order(s)
        return sorted_runs(s[o], e[o])

    ra, rb = runs_of(a), runs_of(b)
    assert list(zip(*(x.tolist() for x in ra), strict=True)) == runs(covered(a))
    assert overlap_length(ra, rb) == len(covered(a) & covered(b))
    both = intersection_runs(ra, rb)
    assert list(zip(*(x.tolist() for x in both), strict=True)) == runs(covered(a) & covered(b))
    assert list(zip(*(x.tolist() for x in intersection_runs(rb, ra)), strict=True)) == runs(
        covered(a) & covered(b))  # fmt: skip
    t = np.arange(-5, 45, dtype=np.int64)
    assert covered_before(*ra, t).tolist() == [len({x for x in covered(a) if x < v})
                                               for v in t.tolist()]  # fmt: skip


def test_overlap_length_with_int64_extremes() -> None:
    a = (np.array([I64.min], dtype=np.int64), np.array([I64.max], dtype=np.int64))
    b = (np.array([I64.min, 0], dtype=np.int64), np.array([-5, I64.max], dtype=np.int64))
    assert overlap_length(a, b) == (-5 - int(I64.min)) + int(I64.max)
    assert overlap_length(a, a) == 2**64 - 1
    s, e = intersection_runs(a, b)
    assert (s.tolist(), e.tolist()) == ([I64.min, 0], [-5, I64.max])
