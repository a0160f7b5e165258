"""Per-rank values of an A/B: every metric row again for each rank's process alone.

Ranks are paired by position (the i-th process by sorted pid of each side, as ``per_gpu`` pairs
GPUs: pids differ between runs). Each process is measured once, over its side's own windows and
iterations (:func:`nsysmoe.pipeline.analyze_process`: its rows of the side's tables),
its phase ranges taken from its side's projection (a range and what it launched lie in one
process), with the same row definitions as the all-GPU rows, so a rank's durations, counts
and NVTX totals are its share of the row's sum.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import polars as pl

from nsysmoe import env
from nsysmoe.ab.metrics import summary_rows
from nsysmoe.ab.side import rank_side
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.steps import detect_steps
from nsysmoe.pipeline import analyze_process
from nsysmoe.results import MetricRow, RankValue, Side, Steps

Values = dict[str, float | int | None]


def pids_of(side: Side) -> list[int]:
    """The side's processes that ran GPU work in its window, by sorted pid."""
    return sorted(side.analysis.gpus["pid"].unique().to_list())


def side_values(side: Side) -> Values:
    """Every metric row's value for one side (a side's rows never depend on the other's)."""
    return {r.key: r.off for r in summary_rows(side, side)}


def process_values(side: Side, pid: int, steps: Steps) -> Values:
    """One process of a side alone (its share of the side's analysis); a process with no GPU
    work in the side's window has no values."""
    try:
        one = analyze_process(side.analysis, pid, steps=steps)
    except NsysmoeError:
        return {}
    mine = side.projected.filter(pl.col("pid") == pid)
    return side_values(rank_side(side, one, mine))


def with_per_rank(
    rows: tuple[MetricRow, ...],
    off: Side,
    on: Side,
    *,
    step_pattern: str | None = None,
    steps: tuple[Steps, Steps] | None = None,
) -> tuple[MetricRow, ...]:
    """The rows with ``per_rank`` filled: one :class:`RankValue` per rank position of either
    side; a side with one process is its own rows' values (nothing measured again). ``steps``:
    the iterations the sides were measured with (else detected again, by ``step_pattern``)."""
    pids = pids_of(off), pids_of(on)
    values: dict[tuple[str, int], Values] = {}
    # polars releases the GIL, but more threads than cores only spin: on 2 cores, 4 threads
    # took 2.3x the time and 2.6x the CPU of 2 (OFF/ON of bench/run.py)
    with ThreadPoolExecutor(max_workers=min(4, env.cores())) as pool:
        futures = {}
        for k, side in enumerate((off, on)):
            if len(pids[k]) == 1:
                values[(side.label, 0)] = {r.key: r.off if k == 0 else r.on for r in rows}
                continue
            st = _steps_of(side, step_pattern) if steps is None else steps[k]
            for i, pid in enumerate(pids[k]):
                futures[(side.label, i)] = pool.submit(process_values, side, pid, st)
        values |= {key: future.result() for key, future in futures.items()}
    n = max(len(pids[0]), len(pids[1]))

    def rank_values(key: str) -> tuple[RankValue, ...]:
        return tuple(
            RankValue(i, _at(pids[0], i), _at(pids[1], i),
                      values.get((off.label, i), {}).get(key),
                      values.get((on.label, i), {}).get(key))
            for i in range(n)
        )  # fmt: skip

    return tuple(replace(r, per_rank=rank_values(r.key)) for r in rows)


def _steps_of(side: Side, pattern: str | None) -> Steps:
    return detect_steps(side.analysis.classified.trace, pattern)


def _at(items: list[int], i: int) -> int | None:
    return items[i] if i < len(items) else None
