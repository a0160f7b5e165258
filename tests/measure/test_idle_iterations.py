"""The idle split per iteration (nsysmoe.measure.idle.idle_per_iteration) against a
per-nanosecond brute force over a generated MoE run, and its parts against the iteration
table's idle time."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.api import analyze, load
from nsysmoe.measure.steps import detect_steps, process_windows
from tests.fixtures.generate import moe_step_scenario, write_export


def brute_split(trace, windows: pl.DataFrame) -> dict[int, dict[str, int]]:
    """Per step: every idle ns of every GPU with work in the window, classified by the gap of
    the GPU's whole timeline it lies in (ended by the earliest-launched op starting at its
    end; api_start >= gap start: host) or other (no gap: before the first op, after the last)."""
    ops = pl.concat([trace.kernels.select("pid", "device", "start", "end", "corr_id"),
                     trace.memops.select("pid", "device", "start", "end", "corr_id")])
    api = trace.runtime.group_by("pid", "corr_id").agg(pl.col("start").min().alias("api"))
    ops = ops.join(api, on=["pid", "corr_id"], how="left")
    out: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("host", "dependency",
                                                                         "other"), 0))
    for (pid, _device), g in ops.partition_by("pid", "device", as_dict=True).items():
        real = [r for r in g.iter_rows(named=True) if r["end"] > r["start"]]
        covered = set()
        for r in real:
            covered.update(range(r["start"], r["end"]))
        starts: dict[int, list] = defaultdict(list)
        for r in real:
            starts[r["start"]].append(r["api"])
        first, last = min(r["start"] for r in real), max(r["end"] for r in real)
        for w in windows.filter(pl.col("pid") == pid).iter_rows(named=True):
            lo, hi = w["start_ns"], w["end_ns"]
            if not any(r["start"] < hi and r["end"] > lo or (r["start"] == r["end"] and
                       lo <= r["start"] < hi) for r in g.iter_rows(named=True)):
                continue
            for t in range(lo, hi):
                if t in covered:
                    continue
                if t < first or t >= last:
                    out[w["step"]]["other"] += 1
                    continue
                g0, g1 = t, t
                while g0 - 1 not in covered and g0 > first:
                    g0 -= 1
                while g1 not in covered:
                    g1 += 1
                launches = [a for a in starts[g1] if a is not None]
                kind = "other" if not launches else ("host" if min(launches) >= g0
                                                     else "dependency")
                out[w["step"]][kind] += 1
    return out


@pytest.mark.parametrize("dispatcher", ["hybridep", "alltoall"])
def test_iteration_idle_split_equals_brute_force(tmp_path: Path, dispatcher: str) -> None:
    spec, _ = moe_step_scenario(dispatcher=dispatcher, overlap=True, steps=3, n_processes=2,
                                time_scale=0.0005)  # fmt: skip
    path = write_export(tmp_path / "moe.sqlite", spec, "3.13.2")
    result = analyze(path)
    it = result.iterations
    assert not it.is_empty()
    parts = it["idle_host_ns"] + it["idle_dependency_ns"] + it["idle_other_ns"]
    assert parts.to_list() == it["idle_ns"].to_list()
    trace = load(path)
    windows = process_windows(detect_steps(trace), it["step"].to_list())
    want = brute_split(trace, windows)
    for r in it.iter_rows(named=True):
        w = want[r["step"]]
        assert (r["idle_host_ns"], r["idle_dependency_ns"], r["idle_other_ns"]) == (
            w["host"], w["dependency"], w["other"]), r["step"]
    g = result.gpus
    assert (g["idle_host_ns"] + g["idle_dependency_ns"] + g["idle_other_ns"]).to_list() == \
        g["idle_ns"].to_list()


def test_a_gpu_idle_through_a_whole_window_is_not_counted_there() -> None:
    """A GPU with no work in an iteration window has no idle time in it (the iteration table
    counts GPUs with work), even where a gap of its timeline covers the window."""
    from nsysmoe.measure.idle import OPS_SCHEMA, idle_per_iteration

    # GPU 0: [0,10) [20,30) [40,50), launched at 0, 15, 35: gaps [10,20) and [30,40) host;
    # GPU 1: [0,5) and [60,70), both launched at 0: gap [5,60) dependency
    ops = pl.DataFrame([(1, 0, 0, 10, 0, 7), (1, 0, 20, 30, 15, 7), (1, 0, 40, 50, 35, 7),
                        (1, 1, 0, 5, 0, 7), (1, 1, 60, 70, 0, 7)],
                       schema=OPS_SCHEMA, orient="row")  # fmt: skip
    windows = pl.DataFrame({"pid": [1, 1], "step": [1, 2], "start_ns": [0, 25],
                            "end_ns": [25, 50]})  # fmt: skip
    # step 1: GPU 0 idle 10 of 25, GPU 1 idle 20 of 25; step 2: GPU 0 only, idle 10
    iterations = pl.DataFrame({"step": [1, 2], "idle_ns": [30, 10]})
    got = idle_per_iteration(ops, windows, iterations)
    assert got.rows() == [(1, 10, 20, 0), (2, 10, 0, 0)]
