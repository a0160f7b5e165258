"""The per-sample bookkeeping every reader shares (vectorised: no per-sample Python loop), against
brute force on any sequence of iterations: the log interval (the most common gap) and the last
run (exact repeats out, then the samples after the last step back, in one note)."""

from __future__ import annotations

from collections import Counter

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from nsysmoe.io.logs.console import last_run
from nsysmoe.io.logs.schema import common_gap

ITERATIONS = st.lists(st.integers(min_value=0, max_value=40), max_size=60)


def _gap(values: list[int]) -> int:
    gaps = Counter(b - a for a, b in zip(values, values[1:], strict=False) if b > a)
    if not gaps:
        return 1
    top = max(gaps.values())
    return min(gap for gap, count in gaps.items() if count == top)


@given(ITERATIONS)
def test_common_gap_is_the_most_common_positive_gap(values: list[int]) -> None:
    assert common_gap(values) == _gap(values) == common_gap(pl.Series(values))


@given(st.lists(st.tuples(st.integers(0, 12), st.sampled_from([0.5, 0.6])), min_size=1,
                max_size=60))  # fmt: skip
def test_last_run_equals_brute_force(samples: list[tuple[int, float]]) -> None:
    frame = pl.DataFrame({"n": range(1, len(samples) + 1),
                          "iteration": [i for i, _ in samples],
                          "step_s": [s for _, s in samples]})  # fmt: skip
    kept, notes = last_run(frame)
    rows = []  # brute force: (line, iteration, value), first of each repeat kept
    for n, sample in enumerate(samples, start=1):
        if all(sample != (i, s) for _, i, s in rows):
            rows.append((n, *sample))
    backs = [k for k in range(1, len(rows)) if rows[k][1] <= rows[k - 1][1]]
    start = backs[-1] if backs else 0
    assert kept.rows() == rows[start:]
    repeats = len(samples) - len(rows)
    assert len(notes) == (repeats > 0) + (len(backs) > 0)
    if repeats:
        assert notes[0].startswith(f"{repeats} duplicated sample line(s)")
    if backs:
        line, before, after = rows[start][0], rows[start - 1][1], rows[start][1]
        where = f"line {line} (iteration {before} → {after})"
        want = (f"restart at {where}: {start} earlier sample(s) left out." if len(backs) == 1
                else f"{len(backs)} restarts; the last at {where}: {start} earlier samples left "
                "out.")  # fmt: skip
        assert notes[-1] == want
