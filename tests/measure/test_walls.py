"""The dominant-wall verdict: thresholds, precedence and memory evidence from captured data only."""

from __future__ import annotations

import polars as pl
import pytest

from nsysmoe.measure import walls
from nsysmoe.model import MEMORY_EVENT_SCHEMA

NOT_CAPTURED = {"memory_usage": "not captured"}


@pytest.mark.parametrize(
    ("span", "idle", "exposed", "expected"),
    [
        (1000, 0, 0, "compute"),
        (1000, 149, 99, "compute"),  # both just under their thresholds (15 %, 10 %)
        (1000, 0, 100, "communication"),  # exposed exactly 10 % of span
        (1000, 150, 0, "host overhead"),  # idle exactly 15 %
        (1000, 150, 200, "communication"),  # both over: the larger share wins
        (1000, 300, 200, "host overhead"),
        (0, 0, 0, "compute"),  # no span: nothing to blame
    ],
)
def test_verdict_thresholds(span: int, idle: int, exposed: int, expected: str) -> None:
    v = walls.verdict(span, idle, exposed, NOT_CAPTURED)
    assert v.wall == expected
    assert v.evidence["exposed_comm_ns"] == exposed and v.evidence["idle_ns"] == idle
    assert v.knobs == walls.KNOBS[expected]
    assert v.to_dict()["thresholds"] == walls.thresholds()


def _events(*rows: tuple[int, int]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"pid": 1, "device": 0, "start": s, "bytes": b} for s, b in rows],
        schema=MEMORY_EVENT_SCHEMA,
    )


def test_memory_peak_from_usage_events_unsorted() -> None:
    # alloc 60, free 60, alloc 95 → peak 95 of 100 (the rows come unsorted)
    ev = walls.memory_evidence(_events((30, 95), (10, 60), (20, -60)), 100, None)
    assert ev["peak_allocated_bytes"] == 95 and ev["peak_memory_pct"] == 95.0
    v = walls.verdict(1000, 500, 500, ev)  # memory beats comm and host even when they are large
    assert v.wall == "memory"


def test_memory_not_captured_never_blamed() -> None:
    ev = walls.memory_evidence(_events(), 100, None)
    assert "not captured" in ev["memory_usage"]
    assert walls.verdict(1000, 0, 0, ev).wall == "compute"


def test_oom_marker_in_nvtx() -> None:
    names = pl.Series(["forward", "CUDA Out Of Memory. Tried to allocate", "zoom"])
    ev = walls.memory_evidence(_events(), None, names)
    assert ev["oom_markers"] == 1
    assert walls.verdict(1000, 0, 0, ev).wall == "memory"
