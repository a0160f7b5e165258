"""Which NVTX ranges enclose which CUDA API calls on the same thread: the one containment query
that NVTX projection (:mod:`nsysmoe.measure.projection`), phase membership, the idle gaps' ranges
and classification by launching range (a rule's ``nvtx`` key, :mod:`nsysmoe.classify`) rest on.

A call lies in a range when ``range.tid == call.tid and range.start <= call.start and
range.end >= call.end`` (both ends inclusive); nested ranges all enclose it.

Why a sweep: push/pop ranges on one thread nest, so the ranges of a thread split into a few
*layers* (the nesting depth) inside each of which no two ranges meet, not even at an end point.
Inside such a layer at most one range can enclose a call — the last one starting at or before
it — so each layer is one binary search of the calls; pairs come out in O((ranges + calls) ×
depth × log) without a range join. Ranges that do not fit a layer (overlapping start/end ranges,
ranges touching end to start, pathologically deep stacks) are few; they take the general
inequality join, so the result is exact for any ranges.
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: deeper layers than this go to the general join (a stack this deep is no push/pop nesting)
MAX_LAYERS = 64
EMPTY_SCHEMA = {"range_id": pl.Int64, "call_id": pl.UInt32}


def enclosing_pairs(ranges: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """(range_id, call_id) for every range enclosing a call on the same thread; ``ranges`` has
    columns range_id, tid, start, end and ``calls`` call_id, tid, start, end. Rows with a null
    tid, start or end enclose (are enclosed by) nothing. Pairs come in no particular order."""
    valid = pl.all_horizontal(pl.col("tid", "start", "end").is_not_null())
    r, c = ranges.filter(valid), calls.filter(valid)
    tids = np.intersect1d(r["tid"].to_numpy(), c["tid"].to_numpy())
    if tids.size == 0:
        return pl.DataFrame(schema=EMPTY_SCHEMA)
    r = r.filter(pl.col("tid").is_in(tids))
    c = c.filter(pl.col("tid").is_in(tids))
    rs, re_, cs, ce = _keys(tids, r, c)
    r_at, c_at = _sweep(rs, re_, cs, ce)
    return pl.DataFrame({"range_id": r["range_id"].gather(r_at),
                         "call_id": c["call_id"].gather(c_at)})  # fmt: skip


def _keys(
    tids: np.ndarray, r: pl.DataFrame, c: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Order-preserving int64 keys of the ranges' and calls' starts and ends with the thread's
    index in the high bits: ``key(a) <= key(b)`` exactly when a's thread comes before b's, or
    it is the same thread and a's time is not later. Times are offsets from the earliest one
    when they fit beside the thread index, else their ranks among all times."""
    thread = [np.searchsorted(tids, df["tid"].to_numpy()).astype(np.int64) for df in (r, c)]
    times = [df[col].to_numpy().astype(np.int64) for df in (r, c) for col in ("start", "end")]
    lo = min(int(t.min()) for t in times)
    hi = max(int(t.max()) for t in times)
    shift = max(hi - lo, 1).bit_length()
    if shift + int(tids.size).bit_length() > 62:
        rank = np.unique(np.concatenate(times), return_inverse=True)[1].astype(np.int64)
        parts = np.split(rank.reshape(-1), np.cumsum([t.size for t in times])[:-1])
        times, lo, shift = parts, 0, 32
    (rt, ct), (rs, re_, cs, ce) = thread, times
    return ((rt << shift) | (rs - lo), (rt << shift) | (re_ - lo),
            (ct << shift) | (cs - lo), (ct << shift) | (ce - lo))  # fmt: skip


def _sweep(
    rs: np.ndarray, re_: np.ndarray, cs: np.ndarray, ce: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(range index, call index) of every pair with ``rs <= cs and re >= ce`` (keys of
    :func:`_keys`).

    Ranges in (start, longest first) order; a range's layer is how many earlier ranges are
    still open at its start (``end >= start``: meeting counts). A range that meets an earlier
    range of its layer — any, by the layer's running maximum end — leaves the layers for the
    general join; the rest of each layer are pairwise apart, so the only range of the layer that
    can enclose a call is the last one starting at or before it. Inverted rows (end < start)
    take the general join too: the one-candidate argument needs start <= end.
    """
    upright = np.flatnonzero(re_ >= rs)
    order = upright[_start_order(rs[upright], re_[upright])]
    s, e = rs[order], re_[order]
    layer = np.arange(s.size) - np.searchsorted(np.sort(e), s, side="left")
    layer = np.minimum(layer, MAX_LAYERS).astype(np.int16)  # the last layer: all leave it
    by_layer = np.argsort(layer, kind="stable")  # within a layer still (start, longest first)
    lay, ls, le = layer[by_layer], s[by_layer], e[by_layer]
    bounds = np.append(np.flatnonzero(np.diff(lay, prepend=-1)), lay.size)
    reach = _running_max_before(le, bounds)
    apart = (ls > reach) & (lay < MAX_LAYERS)
    calls = np.flatnonzero(ce >= cs)
    calls = calls[np.argsort(cs[calls], kind="stable")]  # sorted queries search much faster
    call_s, call_e = cs[calls], ce[calls]
    r_parts, c_parts = [], []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        keep = np.flatnonzero(apart[a:b]) + a
        if keep.size == 0:
            continue
        at = np.searchsorted(ls[keep], call_s, side="right") - 1
        hit = np.flatnonzero(at >= 0)
        hit = hit[le[keep[at[hit]]] >= call_e[hit]]
        r_parts.append(order[by_layer[keep[at[hit]]]])
        c_parts.append(calls[hit])
    general = np.concatenate([order[by_layer[~apart]], np.flatnonzero(re_ < rs)])
    if general.size:  # these ranges with every call
        r, c = _join(general, np.arange(cs.size), rs, re_, cs, ce)
        r_parts.append(r)
        c_parts.append(c)
    inverted = np.flatnonzero(ce < cs)
    if inverted.size:  # these calls with every other range
        r, c = _join(np.setdiff1d(np.arange(rs.size), general), inverted, rs, re_, cs, ce)
        r_parts.append(r)
        c_parts.append(c)
    if not r_parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(r_parts).astype(np.int64), np.concatenate(c_parts).astype(np.int64)


def _start_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Indices by start, the longest first among equal starts. A stable sort (fast on the
    near-sorted starts of a trace), then a two-key sort of the few rows with tied starts only:
    they hold the same positions, so sorting them among themselves fixes the order."""
    order = np.argsort(start, kind="stable")
    s = start[order]
    tied = np.flatnonzero(np.concatenate(([False], s[1:] == s[:-1])))
    if tied.size:
        at = np.union1d(tied - 1, tied)
        rows = order[at]
        order[at] = rows[np.lexsort((-end[rows], start[rows]))]
    return order


def _running_max_before(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per row, the maximum of the earlier rows of its group (group i: rows
    ``bounds[i]:bounds[i + 1]``; the minimum int64 for a group's first row)."""
    out = np.empty_like(values)
    floor = np.iinfo(np.int64).min
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        out[a] = floor
        if b - a > 1:
            out[a + 1 : b] = np.maximum.accumulate(values[a : b - 1])
    return out


def _join(
    r_idx: np.ndarray, c_idx: np.ndarray,
    rs: np.ndarray, re_: np.ndarray, cs: np.ndarray, ce: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The general containment join of the ranges ``r_idx`` with the calls ``c_idx``."""
    left = pl.DataFrame({"r": r_idx.astype(np.int64), "rs": rs[r_idx], "re": re_[r_idx]})
    right = pl.DataFrame({"c": c_idx.astype(np.int64), "cs": cs[c_idx], "ce": ce[c_idx]})
    pairs = left.join_where(right, pl.col("rs") <= pl.col("cs"), pl.col("re") >= pl.col("ce"))
    return pairs["r"].to_numpy(), pairs["c"].to_numpy()
