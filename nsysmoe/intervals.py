"""Exact integer interval algebra on half-open nanosecond intervals [start, end).

Everything stays in int64 (never float) and is vectorised with numpy sorts, cumsums and
boolean masks, with no per-interval Python loops, so overlap figures are exact to the
nanosecond and traces with tens of millions of kernels take well under a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

Int64Array = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

_INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True, eq=False)
class IntervalSet:
    """Sorted, disjoint, non-touching, non-empty half-open intervals [starts[i], ends[i]).

    This normal form is unique, so two sets are equal exactly when their arrays are.
    Build one with `from_arrays` (which normalises); the constructor only checks the form.
    """

    starts: Int64Array  # int64, read-only
    ends: Int64Array  # int64, read-only

    def __post_init__(self) -> None:
        starts, ends = _as_int64(self.starts, "starts"), _as_int64(self.ends, "ends")
        if starts.shape != ends.shape:
            raise ValueError(f"starts and ends differ in shape: {starts.shape} vs {ends.shape}")
        if not (np.all(ends > starts) and np.all(starts[1:] > ends[:-1])):
            raise ValueError(
                "IntervalSet arrays are not sorted, disjoint, non-touching and "
                "non-empty; build it with IntervalSet.from_arrays"
            )
        # Frozen dataclass: bypass __setattr__ once to store the read-only arrays.
        object.__setattr__(self, "starts", _frozen(starts))
        object.__setattr__(self, "ends", _frozen(ends))

    @classmethod
    def from_arrays(cls, starts: ArrayLike, ends: ArrayLike) -> IntervalSet:
        """Union of arbitrary intervals; zero-length and inverted ones cover nothing.

        Starts and ends are sorted *independently*: the covered set depends only on the two
        multisets, and since the k-th smallest start is below the k-th smallest end, a gap
        opens before sorted start i exactly when it exceeds sorted end i-1. Touching
        intervals ([a,b) + [b,c)) therefore merge. Two plain sorts beat an argsort + gather.
        """
        s, e = _as_int64(starts, "starts"), _as_int64(ends, "ends")
        if s.shape != e.shape:
            raise ValueError(f"starts and ends differ in shape: {s.shape} vs {e.shape}")
        keep = e > s
        s, e = np.sort(s[keep]), np.sort(e[keep])
        if s.size == 0:
            return cls.empty()
        opens = np.empty(s.size, dtype=bool)  # sorted start i begins a new merged interval
        opens[0] = True
        np.greater(s[1:], e[:-1], out=opens[1:])
        closes = np.append(opens[1:], True)  # sorted end i finishes one
        return _trusted(s[opens], e[closes])

    @classmethod
    def empty(cls) -> IntervalSet:
        """The set covering nothing."""
        return _trusted(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))

    def __len__(self) -> int:
        """Number of disjoint intervals (not nanoseconds: see `length`)."""
        return int(self.starts.size)

    @property
    def length(self) -> int:
        """Total covered nanoseconds, as an exact Python int."""
        return _total_span(self.starts, self.ends)

    @property
    def first_start(self) -> int | None:
        """Earliest covered nanosecond, or None when empty."""
        return int(self.starts[0]) if self.starts.size else None

    @property
    def last_end(self) -> int | None:
        """Exclusive end of the last interval, or None when empty."""
        return int(self.ends[-1]) if self.ends.size else None

    def union(self, other: IntervalSet) -> IntervalSet:
        """Nanoseconds covered by either set."""
        return _combine(self, other, np.logical_or)

    def intersect(self, other: IntervalSet) -> IntervalSet:
        """Nanoseconds covered by both sets."""
        return _combine(self, other, np.logical_and)

    def difference(self, other: IntervalSet) -> IntervalSet:
        """Nanoseconds covered by self but not by other."""
        return _combine(self, other, lambda a, b: a & ~b)

    def clip(self, lo: int, hi: int) -> IntervalSet:
        """Intersect with [lo, hi); clipping keeps the order, so no re-sort is needed."""
        starts = np.maximum(self.starts, np.int64(lo))
        ends = np.minimum(self.ends, np.int64(hi))
        keep = ends > starts
        return _trusted(starts[keep], ends[keep])

    def intersect_length(self, other: IntervalSet) -> int:
        """Equal to `self.intersect(other).length`, without building the merged result."""
        points, in_self, in_other = _segments(self, other)
        both = in_self & in_other
        return _total_span(points[:-1][both], points[1:][both])

    def __or__(self, other: object) -> IntervalSet:
        return self.union(other) if isinstance(other, IntervalSet) else NotImplemented

    def __and__(self, other: object) -> IntervalSet:
        return self.intersect(other) if isinstance(other, IntervalSet) else NotImplemented

    def __sub__(self, other: object) -> IntervalSet:
        return self.difference(other) if isinstance(other, IntervalSet) else NotImplemented

    def __eq__(self, other: object) -> bool:
        """Same covered nanoseconds; valid because the normal form is unique."""
        if not isinstance(other, IntervalSet):
            return NotImplemented
        return np.array_equal(self.starts, other.starts) and np.array_equal(self.ends, other.ends)

    def __hash__(self) -> int:
        return hash((self.starts.tobytes(), self.ends.tobytes()))


def union_length(starts: ArrayLike, ends: ArrayLike) -> int:
    """Nanoseconds covered by the union of arbitrary intervals."""
    return IntervalSet.from_arrays(starts, ends).length


def _as_int64(values: ArrayLike, name: str) -> Int64Array:
    """1-D int64 view/copy of integer input; refuses floats so nothing is ever rounded."""
    arr: Any = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers (ns), got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.max() > _INT64_MAX:
        raise OverflowError(f"{name} has values above the int64 maximum")
    return arr.astype(np.int64, copy=False)


def _frozen(arr: Int64Array) -> Int64Array:
    """Read-only array we own: a caller's array is copied so they cannot mutate the set."""
    if arr.flags.writeable or not arr.flags.owndata:
        arr = arr.copy()
    arr.setflags(write=False)
    return arr


def _trusted(starts: Int64Array, ends: Int64Array) -> IntervalSet:
    """Wrap freshly computed normal-form arrays; marking them read-only avoids a copy."""
    starts.setflags(write=False)
    ends.setflags(write=False)
    return IntervalSet(starts, ends)


def _total_span(starts: Int64Array, ends: Int64Array) -> int:
    """Exact sum of ends - starts for disjoint intervals (ends > starts).

    Done in uint64: each difference is in [1, 2**64) and so is the total of disjoint
    intervals, so the wrap-around arithmetic is exact even for spans beyond int64.
    """
    widths = ends.view(np.uint64) - starts.view(np.uint64)
    return int(widths.sum(dtype=np.uint64))


def _boundaries(s: IntervalSet) -> Int64Array:
    """All boundaries in order, s0 e0 s1 e1 ...; even positions open, odd ones close."""
    out = np.empty(2 * len(s), dtype=np.int64)
    out[0::2], out[1::2] = s.starts, s.ends
    return out


def _segments(a: IntervalSet, b: IntervalSet) -> tuple[Int64Array, BoolArray, BoolArray]:
    """Split the line at every distinct boundary of a and b.

    Returns the boundaries and, for each elementary segment [points[k], points[k+1]),
    whether a and b cover it. Coverage comes from separate cumsums of +1/-1 steps, read
    only after the last event at each position, so [a,b) and [b,c) never overlap whatever
    order tied events are in. A stable argsort of two sorted runs is a linear merge.
    """
    bounds = np.concatenate((_boundaries(a), _boundaries(b)))
    order = np.argsort(bounds, kind="stable")
    points = bounds[order]
    step = np.tile(np.array([1, -1], dtype=np.int8), bounds.size // 2)[order]
    from_a = order < 2 * len(a)
    zero = np.int8(0)
    # A normalised set's coverage is 0 or 1, so int8 running sums cannot overflow.
    cover_a = np.cumsum(np.where(from_a, step, zero), dtype=np.int8)
    cover_b = np.cumsum(np.where(from_a, zero, step), dtype=np.int8)
    last = np.empty(points.size, dtype=bool)  # last event at each distinct position
    last[-1:] = True
    np.not_equal(points[1:], points[:-1], out=last[:-1])
    points, cover_a, cover_b = points[last], cover_a[last], cover_b[last]
    return points, cover_a[:-1] > 0, cover_b[:-1] > 0


def _combine(
    a: IntervalSet, b: IntervalSet, select: Callable[[BoolArray, BoolArray], BoolArray]
) -> IntervalSet:
    """Keep the elementary segments chosen by `select` and merge runs of adjacent ones."""
    points, in_a, in_b = _segments(a, b)
    if points.size == 0:
        return IntervalSet.empty()
    chosen = select(in_a, in_b)
    before = np.concatenate(([False], chosen[:-1]))
    after = np.concatenate((chosen[1:], [False]))
    return _trusted(points[:-1][chosen & ~before], points[1:][chosen & ~after])


def grouped_union_length(df: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """|⋃ intervals| per group of a frame with ``start``/``end`` columns, for thousands of groups
    at once (one sort, no Python loop per group): sorted by start within a group, each interval
    adds only the part that ends after every earlier one, ``end − max(start, running max end)``.
    Returns the ``by`` columns and ``union_ns``; inverted and zero-length rows add nothing."""
    by = list(by)
    if df.is_empty():
        return df.select(by).with_columns(union_ns=pl.lit(0, pl.Int64)).clear()
    before = pl.col("end").cum_max().shift(1).over(by)
    added = (pl.col("end") - pl.max_horizontal("start", before)).clip(lower_bound=0)
    return (
        df.sort([*by, "start"])
        .with_columns(added.alias("union_ns"))
        .group_by(by, maintain_order=True)
        .agg(pl.col("union_ns").sum().cast(pl.Int64))
    )


# --- unions from one start order ------------------------------------------------------------
# An export's kernels come sorted by start, so one stable argsort per GPU is nearly free (a run
# check), and every union the analysis needs (a class, a channel, an iteration, all work) is a
# mask or a small-integer stable sort of that order: no new pair of sorts per subset.


def start_order(starts: Int64Array) -> NDArray[np.intp]:
    """Row order by start, ties in row order; linear time on the already sorted input of an
    export (timsort finds the runs)."""
    return np.argsort(starts, kind="stable")


def by_group(codes: NDArray[np.integer[Any]]) -> NDArray[np.intp]:
    """Stable order by small non-negative group codes: applied to rows in start order, rows
    come out sorted by (group, start). Codes below 2**15 take numpy's linear radix sort."""
    if codes.size and int(codes.max()) < (1 << 15) and int(codes.min()) >= 0:
        codes = codes.astype(np.int16, copy=False)
    return np.argsort(codes, kind="stable")


def grouped_runs(
    group: NDArray[np.integer[Any]], starts: Int64Array, ends: Int64Array
) -> tuple[NDArray[np.integer[Any]], Int64Array, Int64Array]:
    """Per group, the union of its intervals as disjoint, non-touching runs (group, start, end),
    for rows already sorted by (group, start); empty and inverted rows cover nothing.

    One pass: a row opens a run when it starts after every earlier end of its group. That
    running maximum is segmented without a Python loop by lifting each group's times onto
    its own stretch of one uint64 axis (offset by the extents of the groups before it), so a
    plain cumulative maximum never carries an end from one group into the next.
    """
    keep = ends > starts
    group, s, e = group[keep], starts[keep], ends[keep]
    if s.size == 0:
        return group, s, e
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    reach = np.maximum.accumulate(e)
    if np.all(reach[first[1:] - 1] <= s[first[1:]]):
        # groups follow one another in time (iteration windows): a plain running maximum
        # carries no end of one group past the next group's first start
        opens = np.empty(s.size, dtype=bool)
        opens[:1] = True
        np.greater(s[1:], reach[:-1], out=opens[1:])
        opens[first] = True
        at = np.flatnonzero(opens)
        return group[at], s[at], reach[np.append(at[1:], s.size) - 1]
    counts = np.diff(np.append(first, s.size))
    base = np.repeat(s[first], counts).view(np.uint64)  # the group's first (lowest) start
    rel_s = s.view(np.uint64) - base  # exact: s >= base, so the difference is in [0, 2**64)
    rel_e = e.view(np.uint64) - base
    extent = np.maximum.reduceat(rel_e, first)
    if float(extent.astype(np.float64).sum()) < 2.0**62:
        offset = np.repeat(np.cumsum(extent) - extent, counts)
        opens = _opens(rel_s + offset, rel_e + offset)
    else:  # extents near the int64 range: one group at a time (never on real traces)
        opens = np.concatenate([_opens(rel_s[a:a + n], rel_e[a:a + n])
                                for a, n in zip(first.tolist(), counts.tolist(), strict=True)])
    opens[first] = True  # a group's first row opens a run whatever came before
    at = np.flatnonzero(opens)
    return group[at], s[at], np.maximum.reduceat(e, at)


def _opens(s: NDArray[np.uint64], e: NDArray[np.uint64]) -> BoolArray:
    """Rows (sorted by s, ends after starts) that start after every earlier row's end."""
    opens = np.empty(s.size, dtype=bool)
    opens[:1] = True
    np.greater(s[1:], np.maximum.accumulate(e)[:-1], out=opens[1:])
    return opens


def sorted_union_length(starts: Int64Array, ends: Int64Array) -> int:
    """|⋃ intervals| for rows sorted by start (exact Python int): a row opens a run when it
    starts after every earlier end; the run ends at the largest end before the next opens."""
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if s.size == 0:
        return 0
    at = np.flatnonzero(_opens(s, e))
    return _total_span(s[at], np.maximum.reduceat(e, at))


def grouped_union_lengths(
    group: NDArray[np.integer[Any]], starts: Int64Array, ends: Int64Array, n_groups: int
) -> Int64Array:
    """|⋃ intervals| of each group 0..n_groups-1 (0 where none), rows sorted by (group, start).

    Exact while a group's union fits int64 (always, for nanosecond timelines)."""
    g, s, e = grouped_runs(group, starts, ends)
    out = np.zeros(n_groups, dtype=np.int64)
    if g.size:
        first = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
        widths = e.view(np.uint64) - s.view(np.uint64)
        out[g[first]] = np.add.reduceat(widths, first).view(np.int64)
    return out


def sorted_runs(starts: Int64Array, ends: Int64Array) -> tuple[Int64Array, Int64Array]:
    """The union of non-empty rows (ends > starts) sorted by start, as disjoint sorted runs."""
    if starts.size == 0:
        return starts, ends
    reach = np.maximum.accumulate(ends)
    opens = np.empty(starts.size, dtype=bool)
    opens[:1] = True
    np.greater(starts[1:], reach[:-1], out=opens[1:])
    at = np.flatnonzero(opens)
    return starts[at], reach[np.append(at[1:], starts.size) - 1]


def covered_before(starts: Int64Array, ends: Int64Array, t: Int64Array) -> NDArray[np.uint64]:
    """|U ∩ (−∞, t)| for each t, U the disjoint sorted runs (starts, ends): prefix sums, in
    uint64 so that differences of two such values are exact for any int64 coordinates."""
    if starts.size == 0:
        return np.zeros(t.shape, dtype=np.uint64)
    widths = ends.view(np.uint64) - starts.view(np.uint64)
    cum = np.concatenate((np.zeros(1, np.uint64), np.cumsum(widths, dtype=np.uint64)))
    j = np.searchsorted(starts, t, side="right")  # runs starting at or before t
    k = np.maximum(j - 1, 0)
    part = np.minimum(t, ends[k]).view(np.uint64) - starts[k].view(np.uint64)
    return np.where(j > 0, cum[k] + part, np.uint64(0))


def overlap_length(a: tuple[Int64Array, Int64Array], b: tuple[Int64Array, Int64Array]) -> int:
    """|A ∩ B| of two disjoint sorted run sets (as :func:`sorted_runs` gives): A's coverage
    inside each run of B, by prefix sums; no merge of the two."""
    inside = covered_before(*a, b[1]) - covered_before(*a, b[0])
    return int(inside.sum(dtype=np.uint64))


def intersection_runs(
    a: tuple[Int64Array, Int64Array], b: tuple[Int64Array, Int64Array]
) -> tuple[Int64Array, Int64Array]:
    """A ∩ B of two disjoint, non-touching sorted run sets (as :func:`sorted_runs` gives), as
    such runs: each run of B meets the runs of A from the first that ends after it starts to
    the last that starts before it ends (two searchsorted), every such pair overlaps, and the
    pairs come out in time order, apart and non-empty. No sort of the boundaries."""
    (a_s, a_e), (b_s, b_e) = a, b
    first = np.searchsorted(a_e, b_s, side="right")
    count = np.clip(np.searchsorted(a_s, b_e, side="left") - first, 0, None)
    which_b = np.repeat(np.arange(b_s.size), count)
    which_a = np.arange(which_b.size) - np.repeat(np.cumsum(count) - count, count)
    which_a += first[which_b]
    return (np.maximum(a_s[which_a], b_s[which_b]), np.minimum(a_e[which_a], b_e[which_b]))
