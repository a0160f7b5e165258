"""The critical path and what-if replays (nsysmoe.measure.critical_path) on real traces and on
a two-rank trace built in memory whose wait, transfer and straggler are known by construction:
the identity replay reproduces each measured step, the path adds up to the step, no replay that
takes time away predicts a longer step, and fixing the straggler predicts the run without it."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from nsysmoe.api import analyze, example_paths
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.critical_path import STRAGGLER, parse_scenario
from nsysmoe.model import (
    MEMOP_SCHEMA,
    MEMORY_EVENT_SCHEMA,
    NVTX_SCHEMA,
    RUNTIME_SCHEMA,
    WHOLE,
    Scope,
    Trace,
    empty,
)
from nsysmoe.results import CriticalPath
from tests.conftest import TRACES, require_shared
from tests.fixtures.frames import gpu_frame, kernel_frame
from tests.fixtures.generate import write_export
from tests.fixtures.kernels import K
from tests.fixtures.ranks import straggler_scenario
from tests.test_hostile_cli import one_error, run_cli

#: a replay that only takes time away may move iteration boundaries, never lengthen the window
#: by more than this (%)
LONGER_PCT = 0.5


def shared_traces() -> list[str]:
    """Every shared trace nsysmoe reads (nsys SQLite exports, Kineto JSON), relative to
    traces/; nsys-2023 holds no SQLite export (Parquet/Arrow folders and reports only)."""
    if not (TRACES / "nsys").is_dir():
        return []
    found = [*TRACES.glob("nsys/*.sqlite"), *TRACES.glob("nsys/*/*.sqlite"),
             *TRACES.glob("nsys-2023/**/*.sqlite"), *TRACES.glob("kineto/*/*.json.gz")]
    return sorted(str(p.relative_to(TRACES)) for p in found)


EXAMPLES = [*example_paths(), *example_paths("kineto")]


@cache
def path_of(path: Path) -> CriticalPath | None:
    return analyze(path).critical_path


def check_replay_and_length(cp: CriticalPath) -> None:
    """Identity replay within 0.5 % of the measured step (median over iterations), and every
    iteration's path exactly as long as its step."""
    assert cp.iterations
    assert cp.replay_error_pct < 0.5
    assert [i.length_ns for i in cp.iterations] == [i.step_ns for i in cp.iterations]
    assert [sum(i.segments.values()) for i in cp.iterations] == [i.step_ns for i in cp.iterations]
    assert [i.replay_step_ns for i in cp.iterations] == [i.step_ns for i in cp.iterations]
    assert all(v > 0 for i in cp.iterations for v in i.segments.values())
    assert not cp.dropped or sum(cp.dropped.values()) < sum(cp.edges.values())


def check_no_longer(cp: CriticalPath) -> None:
    """Every default scenario that takes time away (``<channel>*0``, ``comm*0``, ``host*0``)
    predicts no step longer than measured by more than :data:`LONGER_PCT`."""
    zero = [w for w in cp.what_if if w.scenario.endswith("*0")]
    assert any(w.scenario == "host*0" for w in zero)
    for w in zero:
        assert w.predicted_step_ns <= w.measured_step_ns * (1 + LONGER_PCT / 100), w


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_examples_replay_and_path_length(path: Path) -> None:
    cp = path_of(path)
    assert cp is not None  # the examples have iterations
    check_replay_and_length(cp)
    check_no_longer(cp)
    assert {"duration", "stream", "launch", "host", "sync"} <= {k for k, n in cp.edges.items()
                                                                if n}  # fmt: skip
    # every channel of the trace has its default scenario, and comm*0 for them all
    channels = {c.removesuffix(".transfer") for c in cp.composition} & {"ep.dispatch",
                                                                       "ep.combine"}
    assert {f"{c}*0" for c in channels} <= {w.scenario for w in cp.what_if}


@pytest.mark.parametrize("rel", shared_traces() or ["(absent)"])
def test_shared_traces_replay_and_path_length(rel: str) -> None:
    traces = require_shared()
    cp = path_of(traces / rel)
    if cp is None:  # no iterations to walk: nothing claimed
        return
    check_replay_and_length(cp)
    check_no_longer(cp)


def test_shared_traces_listed() -> None:
    require_shared()
    rels = shared_traces()
    assert len([r for r in rels if r.startswith("nsys/")]) >= 14
    assert len([r for r in rels if r.startswith("kineto/")]) >= 12


@pytest.fixture(scope="module")
def straggler_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture writer's 4-rank straggler run as one export (a process per rank)."""
    specs, _ = straggler_scenario(n_ranks=4, steps=5, layout="multi")
    path = tmp_path_factory.mktemp("straggler") / "multi.sqlite"
    write_export(path, specs[0], ddl="3.13.2")
    return path


def test_multi_rank_export_replay_and_path_length(straggler_export: Path) -> None:
    cp = path_of(straggler_export)
    assert cp is not None
    check_replay_and_length(cp)
    check_no_longer(cp)
    # every member of a matched instance: an edge into its barrier and one out of it
    assert cp.edges["collective"] > 0 and cp.edges["collective"] % 2 == 0
    assert cp.per_rank["pid"].n_unique() == 4


# --- scenarios -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, target, factor", [
    ("ep.combine*0.5", "ep.combine", 0.5), ("nccl.**0", "nccl.*", 0.0), ("comm*0", "comm", 0.0),
    ("host*0", "host", 0.0), (" gemm * 0.9 ", "gemm", 0.9),
    ("ep.dispatch*.25", "ep.dispatch", 0.25), ("straggler", STRAGGLER, 1.0)])  # fmt: skip
def test_parse_scenario_accepts(text: str, target: str, factor: float) -> None:
    sc = parse_scenario(text)
    assert (sc.target, sc.factor, sc.text) == (target, factor, text.strip())
    assert sc.bound == (factor == 0)
    assert sc.knob


@pytest.mark.parametrize("text", ["bad", "ep.combine*-1", "*0.5", "", "ep.combine*",
                                  "ep.combine*x", "comm*1e3", "comm*nan"])  # fmt: skip
def test_parse_scenario_refuses(text: str) -> None:
    with pytest.raises(NsysmoeError, match="expected TARGET\\*FACTOR"):
        parse_scenario(text)


def test_cli_refuses_a_bad_scenario_in_one_line() -> None:
    proc = run_cli("analyze", str(example_paths()[0]), "--what-if", "bad")
    assert proc.returncode == 2
    one_error(proc.stderr, "--what-if", "bad")
    assert proc.stdout == ""


def test_asked_scenario_is_replayed() -> None:
    source = example_paths()[1]
    cp = analyze(source, scope=Scope(what_if=("ep.combine*0.5", "gemm*0.5"))).critical_path
    assert cp is not None
    got = {w.scenario: w for w in cp.what_if}
    half, zero = got["ep.combine*0.5"], got["ep.combine*0"]
    # half the combine buys at most what none of it buys (monotone replay), both bounds or not
    assert zero.predicted_step_ns <= half.predicted_step_ns <= half.measured_step_ns * 1.005
    assert zero.bound and not half.bound
    assert got["gemm*0.5"].predicted_step_ns < got["gemm*0.5"].measured_step_ns * 0.95


# --- two ranks built in memory: a straggler by construction ----------------------------------

US = 1000
GEMM, ALLREDUCE = K["gemm_fprop"], K["nccl_allreduce"]
PIDS = (4101, 4202)  # rank A, rank B
COMPUTE = (100 * US, 60 * US)  # rank A's compute kernels of each step (B: times ``slow``)
TRANSFER = 50 * US  # every instance's transfer (all ranks leave together)
GAP = 2 * US  # GPU gap after each kernel on the stream
HOST_STEP = 80 * US  # the host launches a step in this long: it runs ahead of the GPU
STEPS = 8


def two_ranks(slow: float) -> tuple[Trace, list[dict[str, int]]]:
    """Two processes, one GPU each, one stream: per step two GEMMs then an all-reduce. Rank B's
    GEMMs take ``slow`` times rank A's; the all-reduce of both ends at (the last arrival +
    :data:`TRANSFER`). Returns the trace and, per step, each rank's arrival and the end."""
    kernels: list[tuple] = []
    runtime: list[tuple] = []
    nvtx: list[tuple] = []
    cursor = [1_000 * US, 1_000 * US]  # each GPU's stream
    corr = [0, 0]
    truth = []
    for s in range(STEPS):
        arrive = []
        for r, pid in enumerate(PIDS):
            host = 10 * US + s * HOST_STEP
            nvtx.append((pid, pid * 10, host, host + HOST_STEP - US, f"iteration {s}", None,
                         "pushpop", False))  # fmt: skip
            for i, dur in enumerate(COMPUTE):
                corr[r] += 1
                call = host + (i + 1) * 10 * US
                runtime.append((pid, pid * 10, call, call + 5 * US, corr[r], None))
                d = round(dur * (slow if r == 1 else 1.0))
                assert cursor[r] > call + 5 * US
                kernels.append((pid, r, 7, cursor[r], cursor[r] + d, corr[r], GEMM.name,
                                GEMM.short_name, None, None))  # fmt: skip
                cursor[r] += d + GAP
            arrive.append(cursor[r])
        last = max(arrive)
        end = last + TRANSFER
        for r, pid in enumerate(PIDS):
            corr[r] += 1
            call = 10 * US + s * HOST_STEP + 40 * US
            runtime.append((pid, pid * 10, call, call + 5 * US, corr[r], None))
            kernels.append((pid, r, 7, arrive[r], end, corr[r], ALLREDUCE.name,
                            ALLREDUCE.short_name, None, None))  # fmt: skip
            cursor[r] = end + GAP
        truth.append({"a": arrive[0], "b": arrive[1], "end": end})
    gpus = gpu_frame([(pid, r, "NVIDIA H100 80GB HBM3", 80 * 2**30)
                      for r, pid in enumerate(PIDS)])
    trace = Trace("two-ranks.sqlite", "nsys-sqlite", None, None,
                  kernel_frame(kernels), empty(MEMOP_SCHEMA),
                  pl.DataFrame(runtime, schema=RUNTIME_SCHEMA, orient="row"),
                  pl.DataFrame(nvtx, schema=NVTX_SCHEMA, orient="row"), gpus,
                  empty(MEMORY_EVENT_SCHEMA))  # fmt: skip
    return trace, truth


@cache
def two_rank_path(slow: float) -> CriticalPath:
    trace, _ = two_ranks(slow)
    cp = analyze(trace, scope=WHOLE).critical_path
    assert cp is not None
    return cp


def test_two_ranks_path_and_replay() -> None:
    cp = two_rank_path(2.0)
    check_replay_and_length(cp)
    check_no_longer(cp)
    assert cp.edges["collective"] > 0
    # the job's path runs through B's GEMMs and the transfer: A's wait is not on it
    for it in cp.iterations[:-1]:
        assert "nccl.allreduce.wait" not in it.segments
        assert it.segments["nccl.allreduce.transfer"] == TRANSFER
        assert it.segments["gemm"] == 2 * sum(COMPUTE)


def test_two_ranks_per_rank_wait_names_the_straggler() -> None:
    _, truth = two_ranks(2.0)
    cp = two_rank_path(2.0)
    waits = cp.per_rank.filter(pl.col("category") == "nccl.allreduce.wait")
    assert set(waits["pid"].to_list()) == {PIDS[0]}  # only A waits
    assert set(waits["peer"].to_list()) == {PIDS[1]}  # for B
    by_step = dict(zip(waits["step"].to_list(), waits["ns"].to_list(), strict=True))
    # in every step whose window holds the all-reduce, A waits from its arrival to B's
    for step, ns in by_step.items():
        assert ns == truth[step]["b"] - truth[step]["a"]
    assert len(by_step) >= STEPS - 1


def test_straggler_scenario_predicts_the_run_without_it() -> None:
    slow, even = two_rank_path(2.0), two_rank_path(1.0)
    fixed = {w.scenario: w for w in slow.what_if}[STRAGGLER]
    assert not fixed.bound
    without = float(np.mean([i.step_ns for i in even.iterations]))
    assert fixed.measured_step_ns > 1.3 * without  # the straggler costs something to fix
    assert abs(fixed.predicted_step_ns - without) <= 0.05 * without
    # ranks at one speed: fixing the "straggler" buys nothing
    same = {w.scenario: w for w in even.what_if}.get(STRAGGLER)
    assert same is None or abs(same.gain_ns) <= 0.001 * same.measured_step_ns


def test_host_far_ahead_of_the_gpu_buys_nothing_from_no_host_time() -> None:
    # the GPU is the bound: every launch returned long before its kernel could start. The
    # first kernel waited ~1 ms after its launch, before the window began: taking that away
    # must not shorten the window (only what lies in the window changes)
    cp = two_rank_path(2.0)
    host = {w.scenario: w for w in cp.what_if}["host*0"]
    assert abs(host.gain_ns) <= 0.001 * host.measured_step_ns, host


@pytest.mark.parametrize("kind", ["nsys", "kineto"])
def test_no_time_bound_is_above_the_gain_the_on_trace_shows(kind: str) -> None:
    # the issue's held-out check, on the shipped pair (overlap off, on): the bound "the EP
    # channels take no time", replayed on the off trace, is never below the gain the overlap-on
    # run actually shows, and neither is "all communication takes no time"
    off, on = (analyze(p) for p in example_paths(kind))
    gain = (np.mean([i.step_ns for i in off.critical_path.iterations])
            - np.mean([i.step_ns for i in on.critical_path.iterations]))
    assert gain > 0.05 * np.mean([i.step_ns for i in off.critical_path.iterations])
    replays = {w.scenario: w for w in off.critical_path.what_if}
    for scenario in ("ep.**0", "comm*0"):
        assert replays[scenario].bound and replays[scenario].gain_ns >= gain, (scenario, gain)
