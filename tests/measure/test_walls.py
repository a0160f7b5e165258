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
    assert set(v.knobs) <= set(walls.KNOBS[expected]) | {
        "overlap the communication with independent compute", "CUDA graphs"}
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


HYBRIDEP_RUN = walls.Context("HybridEP", frozenset({"ep.dispatch", "ep.combine", "nccl.allreduce"}))
DDP_RUN = walls.Context("none detected", frozenset({"nccl.allreduce"}))


def test_knobs_follow_what_the_trace_shows() -> None:
    """Dispatcher knobs only with a dispatcher, its SM knob only for it, data-parallel overlap
    only with all-reduce traffic, CUDA graphs only when idle is host-bound."""
    moe = walls.knobs("communication", HYBRIDEP_RUN)
    assert "--overlap-moe-expert-parallel-comm" in moe and "--overlap-grad-reduce" in moe
    assert not any("flex" in k for k in moe)  # HybridEP already is a flex dispatcher
    alltoall = walls.knobs("communication", walls.Context("alltoall (NCCL SendRecv)",
                                                          frozenset({"ep.dispatch"})))
    assert any("DeepEP or HybridEP" in k for k in alltoall)
    assert "--overlap-grad-reduce" not in alltoall
    ddp = walls.knobs("communication", DDP_RUN)
    assert not any("moe" in k or "DeepEP" in k for k in ddp) and any("bucket" in k for k in ddp)
    assert any("deepep-num-sms" in k for k in walls.knobs("compute", walls.Context("DeepEP")))
    assert not any("num-sms" in k for k in walls.knobs("compute", HYBRIDEP_RUN)
                   if "deepep" in k)  # fmt: skip
    assert not any("num-sms" in k or "grouped" in k for k in walls.knobs("compute", DDP_RUN))
    host = walls.Context("HybridEP", frozenset({"ep.dispatch"}), host_bound_share=0.9)
    waits = walls.Context("HybridEP", frozenset({"ep.dispatch"}), host_bound_share=0.2)
    assert walls.knobs("host overhead", host)[0].startswith("CUDA graphs (moe_router")
    assert not any("CUDA graphs" in k for k in walls.knobs("host overhead", waits))
    assert walls.knobs("host overhead", DDP_RUN)[0] == "CUDA graphs"


def test_memory_flag_names_the_profiler_of_the_input() -> None:
    none = _events()
    assert "cuda-memory-usage" in walls.memory_evidence(none, 1, None)["memory_usage"]
    kineto = walls.memory_evidence(none, 1, None, "kineto-json")["memory_usage"]
    assert "profile_memory=True" in kineto and "nsys" not in kineto


def test_a_trace_without_moe_comm_gets_no_moe_knobs(traces) -> None:
    from nsysmoe.api import analyze

    for name in ("nersc-ddp-4gpu-baseline.sqlite", "nersc-ddp-4gpu-bucketcap100mb.sqlite"):
        a = analyze(traces / "nsys" / name)
        knobs = [k for v in (a.wall, *a.gpu_walls) for k in v.knobs]
        assert not any("moe" in k.lower() or "DeepEP" in k or "dispatcher" in k for k in knobs)


def test_oom_markers_per_pid_equal_counting_each_pids_names() -> None:
    names = ["forward", "CUDA Out Of Memory. Tried", "zoom", "oom", "OutOfMemory x", "b"]
    nvtx = pl.DataFrame({"pid": [1, 1, 2, 2, None, 3], "name": names},
                        schema={"pid": pl.Int64, "name": pl.String})  # fmt: skip
    want = {
        pid: walls.memory_evidence(_events(), None, nvtx.filter(pl.col("pid") == pid)["name"])[
            "oom_markers"]
        for pid in (1, 2, 3)
    }  # fmt: skip
    assert walls.oom_markers(nvtx) == want == {1: 1, 2: 1, 3: 0}
    ev = walls.memory_evidence(_events(), None, None, markers=2)
    assert ev["oom_markers"] == 2
    assert "oom_markers" not in walls.memory_evidence(_events(), None, None)
