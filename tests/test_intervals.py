"""IntervalSet against a brute force that expands intervals into sets of covered nanoseconds."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsysmoe.intervals import IntervalSet, grouped_union_length, union_length
from tests.fixtures.sets import covered, runs

Pairs = list[tuple[int, int]]

# Small coordinates so the brute force stays cheap and collisions (touching, nested,
# duplicate) are frequent; a few negatives because timestamps are signed int64.
coord = st.integers(-3, 60)


@st.composite
def messy_pairs(draw: st.DrawFn) -> Pairs:
    """Random intervals plus derived ones that hit the tricky cases on purpose."""
    base = draw(st.lists(st.tuples(coord, coord), max_size=10))
    extra: Pairs = []
    for s, e in base:
        kind = draw(st.sampled_from(["none", "dup", "touch", "nested", "zero", "inverted"]))
        gap = draw(st.integers(0, 5))
        if kind == "dup":
            extra.append((s, e))
        elif kind == "touch":  # [s,e) + [e,e+gap) and [s-gap,s)
            extra += [(e, e + gap), (s - gap, s)]
        elif kind == "nested":
            extra.append((s + gap, e - gap))
        elif kind == "zero":
            extra.append((s, s))
        elif kind == "inverted":
            extra.append((e, s))
    return draw(st.permutations(base + extra))


def build(pairs: Pairs) -> IntervalSet:
    return IntervalSet.from_arrays([s for s, _ in pairs], [e for _, e in pairs])


def check(result: IntervalSet, expected: set[int]) -> None:
    """Result is in normal form, read-only int64, and covers exactly `expected`."""
    s, e = result.starts, result.ends
    assert s.dtype == np.int64 and e.dtype == np.int64
    assert s.ndim == 1 and s.shape == e.shape
    assert not s.flags.writeable and not e.flags.writeable
    assert np.all(e > s), "empty or inverted interval in output"
    assert np.all(s[1:] > e[:-1]), "unsorted, overlapping or touching intervals in output"
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == runs(expected)
    assert result.length == len(expected) and type(result.length) is int
    assert len(result) == len(runs(expected))


@settings(max_examples=300)
@given(messy_pairs())
@example([])
@example([(0, 10), (10, 20)])
@example([(10, 20), (0, 10), (20, 21)])
@example([(5, 5), (7, 3)])
@example([(0, 10), (2, 5), (0, 10), (9, 10)])
def test_from_arrays_normalises(pairs: Pairs) -> None:
    check(build(pairs), covered(pairs))
    assert union_length([s for s, _ in pairs], [e for _, e in pairs]) == len(covered(pairs))


@settings(max_examples=300)
@given(messy_pairs(), messy_pairs())
@example([], [])
@example([], [(1, 2)])
@example([(0, 10)], [(10, 20)])
@example([(10, 20)], [(0, 10)])
@example([(0, 10)], [(0, 10)])
@example([(0, 10)], [(3, 4)])
@example([(0, 5), (6, 10)], [(5, 6)])
def test_binary_ops_match_sets(a_pairs: Pairs, b_pairs: Pairs) -> None:
    a, b = build(a_pairs), build(b_pairs)
    ca, cb = covered(a_pairs), covered(b_pairs)
    check(a.union(b), ca | cb)
    check(a.intersect(b), ca & cb)
    check(a.difference(b), ca - cb)
    check(b.difference(a), cb - ca)
    assert a | b == a.union(b) and a & b == a.intersect(b) and a - b == a.difference(b)
    assert a.intersect_length(b) == len(ca & cb) == b.intersect_length(a)
    assert type(a.intersect_length(b)) is int


@settings(max_examples=300)
@given(messy_pairs(), st.integers(-10, 70), st.integers(-10, 70))
@example([(0, 10)], 10, 20)
@example([(0, 10)], 5, 5)
@example([(0, 10)], 8, 2)
@example([], 0, 10)
@example([(0, 10), (20, 30)], 10, 20)
def test_clip_matches_sets(pairs: Pairs, lo: int, hi: int) -> None:
    check(build(pairs).clip(lo, hi), covered(pairs) & set(range(lo, hi)))


@given(messy_pairs())
def test_first_start_last_end(pairs: Pairs) -> None:
    c, s = covered(pairs), build(pairs)
    assert s.first_start == (min(c) if c else None)
    assert s.last_end == (max(c) + 1 if c else None)


@given(messy_pairs(), messy_pairs())
def test_algebraic_identities(a_pairs: Pairs, b_pairs: Pairs) -> None:
    a, b = build(a_pairs), build(b_pairs)
    assert (a & b) | (a - b) == a
    assert len((a - b) & b) == 0
    assert a | b == b | a and a & b == b & a
    assert (a | b).length == a.length + b.length - a.intersect_length(b)
    assert hash(a | b) == hash(b | a)


def test_exact_values() -> None:
    a = IntervalSet.from_arrays([5, 0, 10, 20, 30, 40], [10, 3, 12, 19, 31, 40])
    assert a.starts.tolist() == [0, 5, 30] and a.ends.tolist() == [3, 12, 31]
    assert (len(a), a.length, a.first_start, a.last_end) == (3, 11, 0, 31)
    b = IntervalSet.from_arrays([2, 11], [6, 40])
    assert (a | b).starts.tolist() == [0] and (a | b).ends.tolist() == [40]
    assert (a & b).starts.tolist() == [2, 5, 11, 30] and (a & b).ends.tolist() == [3, 6, 12, 31]
    assert (a - b).starts.tolist() == [0, 6] and (a - b).ends.tolist() == [2, 11]
    assert a.intersect_length(b) == 4
    clipped = a.clip(1, 11)
    assert clipped.starts.tolist() == [1, 5] and clipped.ends.tolist() == [3, 11]


def test_touching_is_not_overlapping() -> None:
    a = IntervalSet.from_arrays([0], [10])
    b = IntervalSet.from_arrays([10], [20])
    assert len(a & b) == 0 and a.intersect_length(b) == 0
    assert a - b == a
    assert (a | b) == IntervalSet.from_arrays([0], [20])
    assert len(IntervalSet.from_arrays([0, 10], [10, 20])) == 1


def test_empty() -> None:
    e = IntervalSet.empty()
    a = IntervalSet.from_arrays([1], [4])
    assert (len(e), e.length, e.first_start, e.last_end) == (0, 0, None, None)
    assert e.starts.dtype == np.int64 and not e.starts.flags.writeable
    assert e | a == a and a | e == a and len(e & a) == 0 and a - e == a and len(e - a) == 0
    assert e.intersect_length(a) == 0 and len(e.clip(0, 10)) == 0
    assert IntervalSet.from_arrays([], []) == e == IntervalSet.from_arrays([3, 9], [3, 2])
    assert union_length([], []) == 0


def test_large_int64_coordinates_are_exact() -> None:
    base = 2**62
    one = IntervalSet.from_arrays([base], [base + 1])
    assert one.length == 1 and one.first_start == base and one.last_end == base + 1
    s = IntervalSet.from_arrays([base + 3, base, base + 5], [base + 5, base + 2, base + 9])
    assert s.starts.tolist() == [base, base + 3] and s.ends.tolist() == [base + 2, base + 9]
    assert s.length == 8
    assert s.intersect_length(IntervalSet.from_arrays([base + 1], [base + 4])) == 2
    assert s.clip(base + 1, base + 4).length == 2
    # Neighbours that float64 would merge (2**62 + 1 rounds to 2**62) must stay apart.
    gap = IntervalSet.from_arrays([base, base + 2], [base + 1, base + 3])
    assert len(gap) == 2 and gap.length == 2


def test_full_int64_range_length_does_not_overflow() -> None:
    lo, hi = -(2**63), 2**63 - 1
    full = IntervalSet.from_arrays([lo], [hi])
    assert full.length == 2**64 - 1
    halves = IntervalSet.from_arrays([lo, 0], [-1, hi])
    assert halves.length == 2**64 - 2 and full.intersect_length(halves) == 2**64 - 2
    assert (full - halves).starts.tolist() == [-1] and (full - halves).length == 1


@pytest.mark.parametrize(
    "box",
    [
        list,
        tuple,
        lambda v: np.array(v, dtype=np.int64),
        lambda v: np.array(v, dtype=np.int32),
        lambda v: np.array(v, dtype=np.uint32),
        lambda v: pl.Series(v, dtype=pl.Int64),
    ],
)
def test_accepts_integer_containers(box) -> None:
    s = IntervalSet.from_arrays(box([4, 0, 2]), box([6, 3, 3]))
    assert s.starts.tolist() == [0, 4] and s.ends.tolist() == [3, 6]


def test_rejects_bad_input() -> None:
    with pytest.raises(TypeError):
        IntervalSet.from_arrays([0.0], [1.5])
    with pytest.raises(ValueError):
        IntervalSet.from_arrays([0, 1], [2])
    with pytest.raises(ValueError):
        IntervalSet.from_arrays([[0]], [[1]])
    with pytest.raises(OverflowError):
        IntervalSet.from_arrays(np.array([2**63], dtype=np.uint64), np.array([2**64 - 1]))
    with pytest.raises(TypeError):
        IntervalSet.empty() | [(0, 1)]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("starts", "ends"),
    [([0, 5], [5, 6]), ([0, 3], [5, 6]), ([5, 0], [6, 1]), ([0], [0]), ([3], [1])],
    ids=["touching", "overlapping", "unsorted", "zero-length", "inverted"],
)
def test_constructor_rejects_non_normal_form(starts: list[int], ends: list[int]) -> None:
    with pytest.raises(ValueError):
        IntervalSet(np.array(starts), np.array(ends))


def test_immutable() -> None:
    starts, ends = np.array([0, 10]), np.array([5, 20])
    direct = IntervalSet(starts, ends)
    built = IntervalSet.from_arrays(starts, ends)
    starts[0], ends[1] = 3, 99  # mutating the caller's arrays must not reach the sets
    for s in (direct, built):
        assert s.starts.tolist() == [0, 10] and s.ends.tolist() == [5, 20]
        with pytest.raises(ValueError):
            s.starts[0] = 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.starts = np.array([1])  # type: ignore[misc]


def test_million_intervals_normalise_fast() -> None:
    """Guards against a per-interval Python loop (which would take far longer)."""
    rng = np.random.default_rng(0)
    n = 1_000_000
    starts = rng.integers(0, 10**12, n, dtype=np.int64)
    ends = starts + rng.integers(-100, 10**6, n, dtype=np.int64)
    t0 = time.perf_counter()
    s = IntervalSet.from_arrays(starts, ends)
    other = IntervalSet.from_arrays(starts[::2] + 500, ends[::2] + 500)
    overlap = s.intersect_length(other)
    elapsed = time.perf_counter() - t0
    assert elapsed < 10
    assert 0 < len(s) < n and overlap == (s & other).length <= other.length
    assert s.length == union_length(starts, ends)


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 40), st.integers(-3, 40)), max_size=40)
)
@settings(max_examples=300, deadline=None)
def test_grouped_union_length_matches_brute_force(rows: list[tuple[int, int, int]]) -> None:
    df = pl.DataFrame(
        rows, schema={"g": pl.Int64, "start": pl.Int64, "end": pl.Int64}, orient="row"
    )
    got = dict(grouped_union_length(df, ["g"]).iter_rows())
    want: dict[int, set[int]] = {}
    for g, s, e in rows:
        want.setdefault(g, set()).update(range(s, e))
    assert got == {g: len(ns) for g, ns in want.items()}
