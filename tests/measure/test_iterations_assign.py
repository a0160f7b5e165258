"""assign_rows (rows split over iteration windows) and the per-GPU split, against brute force."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.measure.iterations import assign_rows
from nsysmoe.measure.overlap import by_gpu, gpu_keys

coord = st.integers(0, 60)


@st.composite
def windows(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Sorted, disjoint (possibly touching or zero-length) windows."""
    cuts = sorted(draw(st.lists(coord, min_size=2, max_size=8)))
    pairs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, draw(st.sampled_from([1, 2])))]
    return [a for a, _ in pairs], [b for _, b in pairs]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(coord, coord), max_size=15), windows())
def test_assign_rows_matches_brute_force(rows: list[tuple[int, int]],
                                         wins: tuple[list[int], list[int]]) -> None:  # fmt: skip
    lo, hi = (np.array(x, dtype=np.int64) for x in wins)
    s = np.array([r[0] for r in rows], dtype=np.int64)
    e = np.array([r[1] for r in rows], dtype=np.int64)
    got = list(zip(*(a.tolist() for a in assign_rows(s, e, lo, hi)), strict=True))
    want = []
    for i, (a, b) in enumerate(rows):
        for w, (wl, wh) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            meets = (b > wl and a < wh) if b > a else (wl <= a < wh)  # zero-length: its instant
            if meets or (b < a and wl <= a < wh):  # inverted: where it starts (as searchsorted)
                want.append((i, w, max(a, wl), min(b, wh)))
    assert got == want


def test_by_gpu_split_is_the_same_for_few_and_many_gpus() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    df = pl.DataFrame({"pid": rng.integers(0, 12, n), "device": rng.integers(0, 4, n),
                       "start": np.arange(n), "end": np.arange(n) + 5})  # fmt: skip
    keys = gpu_keys(df)
    assert len(keys) > 32  # the partition path
    many = by_gpu(df, keys)
    for key in keys:
        mine = df.filter((pl.col("pid") == key[0]) & (pl.col("device") == key[1]))
        assert many[key]["start"].tolist() == mine["start"].to_list()
    few = by_gpu(df, keys[:3])
    assert {k: v["start"].tolist() for k, v in few.items()} == {
        k: many[k]["start"].tolist() for k in keys[:3]}  # fmt: skip
