"""Overlap per communication channel against the generator's truth (built by construction from
the slot layout, cross-checked there against per-ns brute force), and consistency on every
shared real trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from nsysmoe.api import analyze, compare, example_paths, render
from nsysmoe.measure.channels import CHANNEL_ORDER
from nsysmoe.model import WHOLE, Iterations, Scope
from tests.conftest import TRACES
from tests.fixtures.generate import (
    EXAMPLES_TRUTH_DIR,
    edge_case_scenario,
    graph_scenario,
    moe_step_scenario,
    write_export,
)

FIELDS = ("count", "comm_ns", "hidden_ns", "exposed_ns", "comm_gemm_attn_ns", "exposed_only_ns")


def assert_channels_equal_truth(result, truth: dict[str, Any]) -> None:
    got: dict[tuple[int, int], dict[str, dict]] = {}
    for r in result.channels.iter_rows(named=True):
        got.setdefault((r["pid"], r["device"]), {})[r["channel"]] = r
    summed: dict[str, dict[str, int]] = {}
    for g in truth["gpus"]:
        mine = got.get((g["pid"], g["device"]), {})
        assert set(mine) == set(g["channels"]), (g["pid"], g["device"])
        for ch, t in g["channels"].items():
            assert {f: mine[ch][f] for f in FIELDS} == {f: t[f] for f in FIELDS}, ch
            assert mine[ch]["hidden_pct"] == pytest.approx(t["hidden_pct"])
            acc = summed.setdefault(ch, dict.fromkeys(FIELDS, 0))
            for f in FIELDS:
                acc[f] += t[f]
    totals = {r["channel"]: r for r in result.channel_totals.iter_rows(named=True)}
    assert set(totals) == set(summed)
    for ch, want in summed.items():
        assert {f: totals[ch][f] for f in FIELDS} == want, ch


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
def test_shipped_examples_channels(path: Path) -> None:
    """Dispatch, combine and the DP all-reduce apart, per GPU, per iteration and summed."""
    truth = json.loads((EXAMPLES_TRUTH_DIR / f"{path.stem}.truth.json").read_text())
    result = analyze(path, scope=WHOLE)
    assert_channels_equal_truth(result, truth)
    assert set(result.channel_totals["channel"]) == {"ep.dispatch", "ep.combine",
                                                     "nccl.allreduce"}  # fmt: skip
    (g,) = truth["gpus"]
    per_step = {(r["step"], r["channel"]): r for r in result.iteration_channels.iter_rows(
        named=True)}  # fmt: skip
    for st in g["steps"]:
        step = int(st["name"].split()[-1])
        for ch, t in st["channels"].items():
            assert {f: per_step[(step, ch)][f] for f in FIELDS} == {f: t[f] for f in FIELDS}
    doc = json.loads(render(result, "json"))["traces"][0]
    assert doc["gpus"][0]["channels"]["ep.combine"]["comm_ns"] == g["channels"]["ep.combine"][
        "comm_ns"]  # fmt: skip
    assert set(doc["iterations"][0]["channels"]) <= set(g["channels"])


def test_shipped_pair_ab_has_rows_per_channel() -> None:
    c = compare(*example_paths())
    rows = {r.key: r for r in c.rows}
    for ch in ("ep.dispatch", "ep.combine", "nccl.allreduce"):
        for metric in ("hidden_pct", "exposed_ns", "exposed_only_ns", "comm_ns"):
            assert f"{ch}.{metric}" in rows
    assert rows["ep.combine.hidden_pct"].on > rows["ep.combine.hidden_pct"].off
    from nsysmoe.gate import Gate

    gate = Gate.of(("ep.combine.hidden_pct<50", "ep.sync.hidden_pct<50"), c)
    failures = gate.failures()
    assert any("ep.combine" in f for f in failures) and any("no value" in f for f in failures)


@pytest.mark.parametrize("dispatcher", ["hybridep", "deepep", "alltoall"])
def test_moe_scenarios_channels(tmp_path: Path, dispatcher: str) -> None:
    spec, truth = moe_step_scenario(dispatcher=dispatcher, overlap=True, steps=3, n_processes=2)
    path = write_export(tmp_path / "moe.sqlite", spec, "3.28.1", shuffle=True)
    result = analyze(path, scope=WHOLE)
    assert_channels_equal_truth(result, truth)
    channels = set(result.channel_totals["channel"])
    assert {"ep.dispatch", "ep.combine"} <= channels
    if dispatcher == "alltoall":  # NCCL send/recv inside the dispatch/combine phases is EP
        assert "nccl.sendrecv" not in channels


@pytest.mark.parametrize("ddl", ["2.9.1", "3.0.0", "3.13.2", "3.28.1"])
def test_edge_cases_channels(tmp_path: Path, ddl: str) -> None:
    """Concurrent channels (exposed-only ≠ exposed) and a SendRecv outside any EP phase."""
    spec, truth = edge_case_scenario()
    path = write_export(tmp_path / "edge.sqlite", spec, ddl, shuffle=True, seed=3)
    result = analyze(path, scope=WHOLE)
    assert_channels_equal_truth(result, truth)
    t = result.channel_totals
    assert (t["exposed_only_ns"] < t["exposed_ns"]).any()


@pytest.mark.parametrize("mode", ["graph", "node"])
def test_graph_scenario_channels(tmp_path: Path, mode: str) -> None:
    spec, truth = graph_scenario(mode, steps=3)
    result = analyze(write_export(tmp_path / "g.sqlite", spec, "3.28.1"), scope=WHOLE)
    assert_channels_equal_truth(result, truth)


def _real_traces() -> list[Path]:
    nsys = sorted((TRACES / "nsys").glob("**/*.sqlite"))
    kineto = sorted((TRACES / "kineto").glob("*/*.json.gz"))
    return nsys + kineto


@pytest.mark.parametrize("path", _real_traces(), ids=lambda p: p.name)
def test_real_traces_channels_are_consistent(traces: Path, path: Path) -> None:
    result = analyze(path, scope=WHOLE)
    comm_kernels = result.classes.filter(pl.col("class") == "comm")
    for g in result.gpus.iter_rows(named=True):
        of_gpu = (pl.col("pid") == g["pid"]) & (pl.col("device") == g["device"])
        mine = result.channels.filter(of_gpu)
        n = int(comm_kernels.filter(of_gpu)["count"].sum())
        assert int(mine["count"].sum()) == n
        if n == 0:
            continue
        assert int(mine["exposed_only_ns"].sum()) <= g["exposed_ns"]
        assert int(mine["comm_ns"].sum()) >= g["comm_ns"] >= int(mine["comm_ns"].max())
        assert int(mine["hidden_ns"].max()) <= g["hidden_ns"]
        # exposed-only time of different channels is disjoint and inside the GPU's exposed
        # time; every channel is one of the vocabulary (the default rules name no other)
        assert set(mine["channel"]) <= set(CHANNEL_ORDER)


def test_deepseek_trace_shows_dispatch_combine_and_notify_apart(traces: Path) -> None:
    result = analyze(traces / "kineto/deepseek-v3-ep64-train/rank0.json.gz", scope=WHOLE)
    assert {"ep.dispatch", "ep.combine", "ep.sync"} <= set(result.channel_totals["channel"])


def test_ab_step_change_is_made_of_exposed_comm_and_compute() -> None:
    """The A/B's step-time explanation from the fixture truth of the steady window (1–7)."""
    from tests.test_pipeline import window_truth

    off, on = (json.loads((EXAMPLES_TRUTH_DIR / f"{p.stem}.truth.json").read_text())
               for p in example_paths())  # fmt: skip
    a, b = window_truth(off, range(1, 8)), window_truth(on, range(1, 8))
    sc = compare(*example_paths(), scope=Scope(window=Iterations(skip=1))).step_change
    assert sc.step_delta_ns == b["step_time_ns"] - a["step_time_ns"]
    assert sc.exposed_delta_ns == pytest.approx((b["exposed_ns"] - a["exposed_ns"]) / 7)
    compute = {k: (w["gemm_sum_ns"] + w["attention_sum_ns"]) / 7 for k, w in (("a", a), ("b", b))}
    assert sc.compute_delta_ns == pytest.approx(compute["b"] - compute["a"])
    assert sc.explained_pct == pytest.approx(100 * sc.exposed_delta_ns / sc.step_delta_ns)
    said = " ".join(render(compare(*example_paths()), "terminal").split())  # wrapped to 100
    assert "of the step-time change" in said


def test_many_ranks_sum_their_channels(tmp_path: Path) -> None:
    from nsysmoe.api import analyze_many, compare_many

    spec, truth = moe_step_scenario(dispatcher="hybridep", overlap=True, steps=3)
    paths = [str(write_export(tmp_path / f"r{i}.sqlite", spec, "3.13.2")) for i in range(2)]
    run = analyze_many(paths, scope=WHOLE)
    (g,) = truth["gpus"]
    totals = {r["channel"]: r for r in run.channel_totals.iter_rows(named=True)}
    for ch, t in g["channels"].items():
        assert totals[ch]["comm_ns"] == 2 * t["comm_ns"]
        assert totals[ch]["hidden_pct"] == pytest.approx(t["hidden_pct"])
    assert "Communication by channel, all ranks" in render(run, "terminal")
    doc = json.loads(render(run, "json"))
    assert doc["channels"]["ep.dispatch"]["count"] == 2 * g["channels"]["ep.dispatch"]["count"]
    # an A/B of runs recomputes each channel's hidden % from the summed union and exposed time
    rc = compare_many(paths, paths)  # the steady window of each rank
    rows = {r.key: r for r in rc.rows}
    steps = set(rc.pairs[0].on.analysis.iterations["step"])
    kept = [st["channels"]["ep.combine"] for st in g["steps"]
            if int(st["name"].split()[-1]) in steps]  # fmt: skip
    comm = 2 * sum(c["comm_ns"] for c in kept)
    hidden = 2 * sum(c["hidden_ns"] for c in kept)
    assert rows["ep.combine.comm_ns"].on == comm
    assert rows["ep.combine.hidden_pct"].on == pytest.approx(100 * hidden / comm)
