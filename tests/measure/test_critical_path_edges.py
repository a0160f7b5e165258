"""Regression tests for the critical path's review round 1 (issue 34, commit 51ae5f9): each
builds a small trace in memory where the bug showed as a wrong number and checks the number.
(The pure graph-build cases, a thread's first call and a collective member that ended early,
are in tests/depgraph/test_build.py.)"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

import nsysmoe.measure.critical_path as cpm
from nsysmoe.api import analyze
from nsysmoe.depgraph.build import DepGraph
from nsysmoe.model import (
    MEMOP_SCHEMA,
    MEMORY_EVENT_SCHEMA,
    NVTX_SCHEMA,
    RUNTIME_SCHEMA,
    WHOLE,
    Iterations,
    Scope,
    Trace,
    empty,
)
from nsysmoe.results import CriticalPath
from tests.fixtures.frames import gpu_frame, kernel_frame
from tests.measure.test_critical_path import (
    COMPUTE,
    GEMM,
    HOST_STEP,
    PIDS,
    STEPS,
    US,
    check_replay_and_length,
    two_ranks,
)

#: a kernel after the trace's last iteration, this long after the last op (#1)
LATE_NS = 5_000 * US


def window_step(cp: CriticalPath) -> float:
    """The mean step over the path's iterations, what ``measured_step_ns`` should be near."""
    return float(np.mean([i.step_ns for i in cp.iterations]))


# --- #1: a path ran past its window to an op long after the last iteration ------------------


def with_late_kernel() -> Trace:
    """:func:`two_ranks` with one more GEMM per rank, launched after the last NVTX iteration
    and run :data:`LATE_NS` after the last op: no iteration holds it."""
    trace, _ = two_ranks(2.0)
    end = trace.kernels["end"].max()
    call = 10 * US + STEPS * HOST_STEP + LATE_NS
    runtime = [(pid, pid * 10, call, call + 5 * US, 999, None) for pid in PIDS]
    kernels = [(pid, r, 7, end + LATE_NS, end + LATE_NS + 100 * US, 999, GEMM.name,
                GEMM.short_name, None, None) for r, pid in enumerate(PIDS)]  # fmt: skip
    return replace(
        trace,
        kernels=pl.concat([trace.kernels, kernel_frame(kernels)]),
        runtime=pl.concat([trace.runtime, pl.DataFrame(runtime, RUNTIME_SCHEMA, orient="row")]))


@pytest.mark.parametrize("scope", [WHOLE, Scope()], ids=["whole", "steady"])
def test_last_iterations_path_ends_in_its_window(scope: Scope) -> None:
    # the bug: the last iteration's path ended at the next op of its process, the late kernel
    # 5 ms on: a 374 us step had a 5.374 ms path (all "host"), and every what-if's measured
    # step was ~1.0 ms instead of ~376 us. Now the path ends at the last op that ended in the
    # window and the rest of the window is an idle tail
    cp = analyze(with_late_kernel(), scope=scope).critical_path
    assert cp is not None
    check_replay_and_length(cp)
    last = cp.iterations[-1]
    assert last.length_ns == last.step_ns < 400 * US
    assert last.segments["gemm"] == 2 * sum(COMPUTE)  # rank B's two GEMMs at twice A's time
    mean = window_step(cp)
    for w in cp.what_if:
        assert abs(w.measured_step_ns - mean) <= 0.001 * mean, w


# --- #2: no path on iterations mapped from CPU ranges alone ---------------------------------


def test_no_path_on_iterations_from_cpu_ranges_alone() -> None:
    # no CUDA calls: the NVTX iterations cannot be mapped to the GPU timeline and are taken
    # from the CPU ranges as they are. The bug: a path was walked between GPU ops over windows
    # on another timeline, its identity replay 17.5 % off the step (lengths 346-458 us for
    # 320 us steps). Now there is no path at all
    trace, _ = two_ranks(2.0)
    nvtx = trace.nvtx.with_columns(pl.col("start") * 4 + 990 * US, pl.col("end") * 4 + 990 * US)
    a = analyze(replace(trace, runtime=empty(RUNTIME_SCHEMA), nvtx=nvtx), scope=WHOLE)
    assert a.window_choice.timeline == "cpu"
    assert a.critical_path is None
    # the same trace with its CUDA calls: iterations on the GPU timeline, a path that adds up
    gpu = analyze(trace, scope=WHOLE)
    assert gpu.window_choice.timeline == "gpu"
    assert gpu.critical_path is not None and gpu.critical_path.replay_error_pct < 0.5


# --- #3: what-if changes start at each process's own window start ---------------------------


def staggered(offset: bool) -> Trace:
    """Two processes, one GPU each, one GEMM per launch back to back, two per iteration: A's
    take 100 us, B's 120 us (B bounds the step: 240 us). With ``offset``, B ran one GEMM
    before its first iteration, so its window starts 120 us after A's."""
    kernels, runtime, nvtx = [], [], []
    for pid, dur, pre in ((1, 100 * US, 0), (2, 120 * US, 1 if offset else 0)):
        t = 1_000 * US
        for i in range(2 * STEPS + pre):
            call = 10 * US + i * 5 * US
            runtime.append((pid, pid * 10, call, call + 2 * US, i + 1, None))
            kernels.append((pid, 0, 7, t, t + dur, i + 1, GEMM.name, GEMM.short_name, None,
                            None))  # fmt: skip
            t += dur
        for s in range(STEPS):
            first = pre + 2 * s
            nvtx.append((pid, pid * 10, 9 * US + first * 5 * US, 9 * US + (first + 2) * 5 * US,
                         f"iteration {s}", None, "pushpop", False))  # fmt: skip
    gpus = gpu_frame([(1, 0, "NVIDIA H100 80GB HBM3", 80 * 2**30),
                      (2, 0, "NVIDIA H100 80GB HBM3", 80 * 2**30)])
    return Trace("staggered.sqlite", "nsys-sqlite", None, None,
                 kernel_frame(kernels), empty(MEMOP_SCHEMA),
                 pl.DataFrame(runtime, RUNTIME_SCHEMA, orient="row"),
                 pl.DataFrame(nvtx, NVTX_SCHEMA, orient="row"), gpus,
                 empty(MEMORY_EVENT_SCHEMA))  # fmt: skip


def test_what_if_changes_start_at_each_processes_window() -> None:
    # the bug: one start for all (the earliest window's) halved B's GEMM that ran before its
    # own window too, and the window's replayed length counted that as gain: with B's window
    # 120 us after A's, gemm*0.5 predicted 112.5 us for a 240 us step (6.25 % too much gain;
    # aligned windows gave 120 us). Half of every GEMM in the window is exactly half the step
    # (B's 2 x 120 us -> 2 x 60 us), wherever each process's window starts
    scope = Scope(window=WHOLE.window, what_if=("gemm*0.5", "gemm*0"))
    for offset in (False, True):
        cp = analyze(staggered(offset), scope=scope).critical_path
        assert cp is not None
        check_replay_and_length(cp)
        got = {w.scenario: w for w in cp.what_if}
        half = got["gemm*0.5"]
        assert half.measured_step_ns == 240 * US
        assert abs(half.predicted_step_ns - 120 * US) <= 0.005 * half.measured_step_ns, (
            offset, half)
        assert got["gemm*0"].predicted_step_ns == 0


# --- #4/#5: the graph holds the walked iterations and their neighbours, with their launches --


@pytest.fixture
def graphs(monkeypatch: pytest.MonkeyPatch) -> list[DepGraph]:
    """Every graph the critical path builds, as it builds it."""
    built: list[DepGraph] = []
    build = cpm.build_graph

    def spy(*args, **kwargs) -> DepGraph:
        built.append(build(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(cpm, "build_graph", spy)
    return built


def test_sampled_iterations_keep_the_launches_of_a_host_running_ahead(
        monkeypatch: pytest.MonkeyPatch, graphs: list[DepGraph]) -> None:  # fmt: skip
    # a budget of 10 GPU ops: one middle iteration (of 8) is walked. The host launches each
    # step ~1 ms before the GPU runs it; the bug: the sampled graph took the CUDA calls from
    # the GPU window only, so it held no launch and no host edge (0 of each), and host*0 was
    # not replayed at all. Now every op in the graph has its launch call
    monkeypatch.setattr(cpm, "MAX_PATH_OPS", 10)
    trace, _ = two_ranks(2.0)
    cp = analyze(trace, scope=WHOLE).critical_path
    assert cp is not None
    assert cp.window_iterations == STEPS and len(cp.iterations) == 1
    check_replay_and_length(cp)
    (g,) = graphs
    n_ops = g.n_rows[0] + g.n_rows[1]
    assert cp.edges["launch"] == n_ops  # every kernel of the graph (3 per rank and step)
    assert cp.edges["host"] > 0
    host = {w.scenario: w for w in cp.what_if}["host*0"]
    # the GPU bounds the step: no host time buys anything
    assert abs(host.gain_ns) <= 0.001 * host.measured_step_ns, host


def test_narrow_window_builds_only_its_iterations_graph(graphs: list[DepGraph]) -> None:
    # the bug: a window within the walk budget built the whole trace's graph (8 iterations,
    # 48 kernels and 48 calls, for one iteration asked). Now: at most that iteration and one
    # either side, of both ranks (3 kernels each; 8 today: its 6 and the op that ends each
    # rank's path), and the calls from their earliest launch on
    trace, _ = two_ranks(2.0)
    scope = Scope(window=Iterations(first=3, last=3, skip=0, required=True))
    a = analyze(trace, scope=scope)
    assert a.window_choice.kept == (3,)
    cp = a.critical_path
    assert cp is not None and [i.step for i in cp.iterations] == [3]
    check_replay_and_length(cp)
    (g,) = graphs
    assert g.n_rows[0] <= 3 * len(PIDS) * 3 < trace.kernels.height
    assert g.n_rows[2] < trace.runtime.height
    assert cp.edges["launch"] == g.n_rows[0]


# --- the critical path takes the collectives job's match only where it matched as many ranks --


def _facts(cp: CriticalPath | None) -> tuple:
    assert cp is not None
    return (cp.composition, cp.edges, cp.per_rank.to_dicts(),
            [(w.scenario, w.predicted_step_ns) for w in cp.what_if])  # fmt: skip


def test_critical_path_reuses_the_match_only_over_as_many_ranks() -> None:
    """The collectives job matches over the GPUs of the window's table; the critical path over
    the GPUs that ran kernels. Its match is reused where the two counts agree (then the
    instances passed decide the path's collective edges), and matched again where they do not
    (then a bogus match passed in changes nothing)."""
    from concurrent.futures import Future

    from nsysmoe import pipeline
    from nsysmoe.measure.collectives import arrivals, match, with_rank
    from nsysmoe.measure.steps import process_windows
    from nsysmoe.model import STEADY

    trace, _ = two_ranks(slow=1.5)
    src, steps = pipeline.prepare_with_steps(trace)
    assert steps is not None
    choice = pipeline.choose(steps, STEADY.window, pipeline.origin_of(src))
    kept = list(choice.kept)
    windows = process_windows(steps, kept)
    in_window, _ = pipeline._window_kernels(src.kernels, choice.window)
    arrived = arrivals(in_window, windows)
    n = src.kernels.select("pid", "device").n_unique()
    rows = match(with_rank(arrived, trace.path), n)[0]
    assert n == 2 and len(rows) > 0

    def job(n_ranks: int, instances: pl.DataFrame) -> Future:
        f: Future = Future()
        f.set_result((arrived, None, None, (n_ranks, instances)))
        return f

    want = _facts(pipeline._critical_path(src, windows, kept, job(n, rows), ()))
    assert want[1].get("collective", 0) > 0  # the path crosses ranks at collectives
    bogus = rows.head(0)  # no instance matched: no collective edge at all
    # reused where the counts agree: the bogus match shows
    assert _facts(pipeline._critical_path(src, windows, kept, job(n, bogus), ())) != want
    # matched again where they differ: the bogus match changes nothing
    assert _facts(pipeline._critical_path(src, windows, kept, job(n + 1, bogus), ())) == want
