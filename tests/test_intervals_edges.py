"""IntervalSet edge cases with exact expected values: equality when one array differs, the int64
limits, the constructor's normal-form check beyond two intervals, and array ownership."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from nsysmoe.intervals import IntervalSet, grouped_union_length, union_length
from tests.fixtures.sets import covered, runs

MIN, MAX = -(2**63), 2**63 - 1


def iset(*pairs: tuple[int, int]) -> IntervalSet:
    return IntervalSet.from_arrays([s for s, _ in pairs], [e for _, e in pairs])


def test_equality_when_only_the_starts_or_only_the_ends_differ() -> None:
    a = iset((0, 5), (10, 20))
    assert a == iset((10, 20), (0, 5)) and hash(a) == hash(iset((10, 20), (0, 5)))
    assert a != iset((1, 5), (10, 20))  # same ends, one start differs
    assert a != iset((0, 5), (10, 21))  # same starts, one end differs
    assert a != iset((0, 6), (10, 20))
    assert a != iset((0, 5), (11, 20))
    assert a != iset((0, 5)) and a != IntervalSet.empty()
    assert a.__eq__((0, 5)) is NotImplemented and a != [(0, 5), (10, 20)]


def test_lengths_next_to_the_int64_maximum() -> None:
    top = iset((MAX - 3, MAX), (MAX - 10, MAX - 5))
    assert top.starts.tolist() == [MAX - 10, MAX - 3] and top.ends.tolist() == [MAX - 5, MAX]
    assert top.length == 8 and top.last_end == MAX
    other = iset((MAX - 7, MAX - 1))
    assert top.intersect_length(other) == 2 + 2 == (top & other).length
    assert (top | other).starts.tolist() == [MAX - 10] and (top | other).length == 10
    assert (top - other).length == 3 + 1  # [MAX-10, MAX-7) and [MAX-1, MAX)
    assert top.clip(MAX - 4, MAX).length == 3
    bottom = iset((MIN, MIN + 2), (MIN + 5, MIN + 6))
    assert bottom.length == 3 and bottom.first_start == MIN
    assert (bottom | top).length == 11 and bottom.intersect_length(top) == 0


def test_spans_wider_than_int64_are_exact() -> None:
    # each width fits uint64 but not int64; the total of disjoint intervals still fits uint64
    wide = iset((MIN, 0), (1, MAX))
    assert wide.length == 2**63 + (2**63 - 2)
    assert wide.intersect_length(iset((MIN, MAX))) == 2**64 - 2
    assert iset((-1, MAX)).intersect_length(iset((MIN, 1))) == 2
    assert union_length([MIN, MIN], [MAX, 0]) == 2**64 - 1


def test_unsigned_input_up_to_the_int64_maximum() -> None:
    s = IntervalSet.from_arrays(np.array([MAX - 1], dtype=np.uint64), np.array([MAX], np.uint64))
    assert s.length == 1 and s.last_end == MAX
    with pytest.raises(OverflowError):
        IntervalSet.from_arrays(np.array([0], np.uint64), np.array([MAX + 1], np.uint64))
    empty = np.array([], dtype=np.float64)  # no values: nothing to round, so accepted
    assert IntervalSet.from_arrays(empty, empty) == IntervalSet.empty()


@pytest.mark.parametrize(
    ("starts", "ends"),
    [
        ([0, 6, 8], [5, 10, 12]),  # the 2nd and 3rd overlap
        ([0, 6, 10], [5, 10, 12]),  # the 2nd and 3rd touch
        ([0, 6, 11, 11], [5, 10, 12, 13]),
        ([0, 6, 9], [5, 8, 9]),  # the 3rd is empty
    ],
)
def test_constructor_checks_every_neighbour(starts: list[int], ends: list[int]) -> None:
    with pytest.raises(ValueError, match="from_arrays"):
        IntervalSet(np.array(starts), np.array(ends))
    with pytest.raises(ValueError, match="differ in shape"):
        IntervalSet(np.array(starts), np.array(ends[:-1]))


def test_constructor_accepts_normal_form_and_keeps_it() -> None:
    s = IntervalSet(np.array([0, 6, 11]), np.array([5, 10, 12]))
    assert s == iset((0, 5), (6, 10), (11, 12)) and s.length == 10 and len(s) == 3


def test_a_read_only_view_of_a_callers_array_is_copied() -> None:
    base_s, base_e = np.array([0, 10, 99]), np.array([5, 20, 99])
    vs, ve = base_s[:2], base_e[:2]  # views: read-only to the set, but the caller owns the base
    vs.setflags(write=False)
    ve.setflags(write=False)
    s = IntervalSet(vs, ve)
    base_s[0], base_e[1] = 3, 30
    assert s.starts.tolist() == [0, 10] and s.ends.tolist() == [5, 20] and s.length == 15
    assert not s.starts.flags.writeable and not s.ends.flags.writeable


@pytest.mark.parametrize(
    "pairs",
    [[], [(3, 3)], [(5, 1)], [(0, 4), (4, 9)], [(0, 3), (5, 9), (2, 6), (20, 21), (8, 8)]],
)
def test_set_operations_by_hand_against_the_oracle(pairs: list[tuple[int, int]]) -> None:
    s = iset(*pairs)
    assert list(zip(s.starts.tolist(), s.ends.tolist(), strict=True)) == runs(covered(pairs))
    starts, ends = [a for a, _ in pairs], [b for _, b in pairs]
    assert s.length == len(covered(pairs)) == union_length(starts, ends)
    probe = iset((1, 7))
    assert s.intersect_length(probe) == len(covered(pairs) & set(range(1, 7)))


def test_grouped_union_length_exact() -> None:
    df = pl.DataFrame(
        {"g": [1, 1, 1, 2, 2, 3], "start": [0, 5, 20, 10, 10, 5], "end": [10, 15, 25, 10, 8, 6]}
    )
    got = grouped_union_length(df, ["g"]).sort("g")
    assert got.rows() == [(1, 20), (2, 0), (3, 1)]  # [0,15) + [20,25); empty + inverted; [5,6)
    assert got.schema["union_ns"] == pl.Int64
    empty = grouped_union_length(df.clear(), ["g"])
    assert empty.columns == ["g", "union_ns"] and empty.is_empty()


def test_grouped_union_length_keeps_the_groups_in_sorted_order() -> None:
    g = np.arange(2000)[::-1].repeat(2)  # descending input, two rows per group
    df = pl.DataFrame({"a": g // 50, "b": g % 50, "start": g * 10, "end": g * 10 + 7})
    got = grouped_union_length(df, ["a", "b"])  # two keys, as per (window, GPU) tables
    assert got.select("a", "b").rows() == [(i // 50, i % 50) for i in range(2000)]
    assert got["union_ns"].to_list() == [7] * 2000
