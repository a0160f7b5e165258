"""nsysmoe against the generator's ground truth (built by construction, not by nsysmoe code):
every schema version, every dispatcher, the edge cases, and the shipped example pair."""

from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from nsysmoe.api import analyze, compare, example_paths, load
from nsysmoe.model import WHOLE, Iterations, Scope
from tests.fixtures.generate import (
    DDL_VERSIONS,
    EXAMPLES_TRUTH_DIR,
    KERNEL_CLASSES,
    edge_case_scenario,
    moe_step_scenario,
    write_export,
)

GPU_FIELDS = ("kernels", "span_ns", "active_ns", "idle_ns", "comm_ns", "compute_ns", "hidden_ns",
              "exposed_ns", "comm_gemm_attn_ns")  # fmt: skip


def assert_gpus_equal_truth(result, truth: dict[str, Any]) -> None:
    got = {(r["pid"], r["device"]): r for r in result.gpus.iter_rows(named=True)}
    assert set(got) == {(g["pid"], g["device"]) for g in truth["gpus"]}
    classes = {(r["pid"], r["device"], r["class"]): r for r in result.classes.iter_rows(named=True)}
    for g in truth["gpus"]:
        row = got[(g["pid"], g["device"])]
        for f in GPU_FIELDS:
            assert row[f] == g[f], (g["pid"], f)
        assert row["hidden_pct"] == pytest.approx(g["hidden_pct"])
        for klass, t in g["classes"].items():
            c = classes[(g["pid"], g["device"], klass)]
            assert (c["count"], c["sum_ns"], c["union_ns"]) == (
                t["count"], t["sum_ns"], t["union_ns"]), klass  # fmt: skip


def assert_nvtx_equal_truth(result, truth: dict[str, Any]) -> None:
    ours = {}
    for r in result.nvtx.iter_rows(named=True):
        count, total = ours.get(r["name"], (0, 0))
        ours[r["name"]] = (count + r["count"], total + r["total_ns"])
    assert ours == {n["name"]: (n["count"], n["total_ns"]) for n in truth["nvtx"]}


@pytest.mark.parametrize("ddl", DDL_VERSIONS)
def test_edge_cases_every_schema(tmp_path: Path, ddl: str) -> None:
    """Unsorted rows, end < start, start < 0, zero-length and NULL-correlation kernels, two
    processes sharing deviceId 0, eventClass-67 duplicates, text and textId NVTX names."""
    spec, truth = edge_case_scenario()
    path = write_export(tmp_path / "edge.sqlite", spec, ddl, shuffle=True, seed=7)
    result = analyze(path, scope=WHOLE)
    assert_gpus_equal_truth(result, truth)
    assert_nvtx_equal_truth(result, truth)
    assert result.schema_version == ddl
    trace = load(path)
    gpu_rows = ("kernel", "memory op")  # CUDA API rows before the capture are counted apart
    inverted = sum(n for why, n in trace.dropped.items()
                   if "end < start" in why and why.startswith(gpu_rows))  # fmt: skip
    before = sum(n for why, n in trace.dropped.items()
                 if "start < 0" in why and why.startswith(gpu_rows))  # fmt: skip
    assert (inverted, before) == (truth["dropped_rows"], truth["excluded_rows"])
    assert any("end < start" in w for w in result.warnings)


@pytest.mark.parametrize("dispatcher", ["hybridep", "deepep", "alltoall"])
@pytest.mark.parametrize("overlap", [False, True])
def test_moe_scenarios(tmp_path: Path, dispatcher: str, overlap: bool) -> None:
    spec, truth = moe_step_scenario(dispatcher=dispatcher, overlap=overlap, steps=3,
                                    n_processes=2, share_device0=True)  # fmt: skip
    path = write_export(tmp_path / "moe.sqlite", spec, "3.0.0", shuffle=True)
    result = analyze(path, scope=WHOLE)
    assert_gpus_equal_truth(result, truth)
    assert_nvtx_equal_truth(result, truth)
    assert len(result.gpus) == 2 and set(result.gpus["device"]) == {0}


def truth_of(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES_TRUTH_DIR / f"{name}.truth.json").read_text())


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
def test_shipped_examples_whole_trace(path: Path) -> None:
    truth = truth_of(path.stem)
    result = analyze(path, scope=WHOLE)
    assert_gpus_equal_truth(result, truth)
    assert_nvtx_equal_truth(result, truth)


def window_truth(truth: dict[str, Any], steps: range) -> dict[str, float]:
    """The steady window's numbers from the per-iteration truth: sums over the kept steps."""
    (gpu,) = truth["gpus"]
    kept = [s for s in gpu["steps"] if int(s["name"].split()[-1]) in steps]
    summed = ("comm_ns", "hidden_ns", "exposed_ns", "comm_gemm_attn_ns", "active_ns", "kernels")
    out = {f: sum(s[f] for s in kept) for f in summed}
    span = kept[-1]["last_end_ns"] - kept[0]["first_start_ns"]
    out["idle_ns"] = span - out["active_ns"]
    out["hidden_pct"] = 100 * out["hidden_ns"] / out["comm_ns"]
    starts = [s["first_start_ns"] for s in gpu["steps"]]
    periods = [starts[i + 1] - starts[i] if i + 1 < len(starts) else kept[-1]["span_ns"]
               for i in steps]  # fmt: skip
    out["step_time_ns"] = statistics.median(periods)
    for klass in ("gemm", "attention"):
        out[f"{klass}_sum_ns"] = sum(s["classes"][klass]["sum_ns"] for s in kept)
    out["window"] = (kept[0]["first_start_ns"], kept[-1]["last_end_ns"])
    return out


def kernel_medians(path: Path, lo: int, hi: int) -> dict[str, float]:
    """Median GEMM / attention kernel duration in [lo, hi): plain SQL and the generator's own
    name → class table."""
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        rows = conn.execute(
            "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName WHERE k.start >= ? AND k.end <= ?",
            (lo, hi),
        ).fetchall()
    return {
        klass: statistics.median(d for name, d in rows if KERNEL_CLASSES[name] == klass)
        for klass in ("gemm", "attention")
    }


def nvtx_cpu_total(path: Path, name: str, lo: int, hi: int) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        rows = conn.execute(
            "SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            "WHERE coalesce(s.value, n.text) = ? AND n.eventType = 59", (name,),
        ).fetchall()  # fmt: skip
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in rows)


def test_shipped_pair_reproduces_the_seed_table() -> None:
    """`nsysmoe analyze off on`: every row of the seed's table plus step time and compute
    inflation, each equal to the fixture's ground truth over iterations 1-7."""
    off_path, on_path = example_paths()
    c = compare(off_path, on_path, scope=Scope(window=Iterations(skip=1)))
    for side, path in ((c.off, off_path), (c.on, on_path)):
        exp = window_truth(truth_of(path.stem), range(1, 8))
        label = "off" if side is c.off else "on"
        assert (side.analysis.window.start_ns, side.analysis.window.end_ns) == exp["window"]
        for key in ("comm_gemm_attn_ns", "hidden_pct", "active_ns", "comm_ns", "exposed_ns",
                    "idle_ns", "kernels", "step_time_ns", "gemm_sum_ns", "attention_sum_ns"):
            assert getattr(c.row(key), label) == pytest.approx(exp[key]), (label, key)
        medians = kernel_medians(path, *exp["window"])
        assert getattr(c.row("gemm_median_ns"), label) == medians["gemm"]
        assert getattr(c.row("attention_median_ns"), label) == medians["attention"]
        cpu = side.analysis.cpu_window
        for phase in ("dispatch_core in hybrid-ep", "metadata_preprocess_core in hybrid-ep"):
            want = nvtx_cpu_total(path, phase, cpu.start_ns, cpu.end_ns)
            assert getattr(c.row(f"nvtx:{phase}"), label) == want, (label, phase)
    assert c.row("hidden_pct").on > 30 > c.row("hidden_pct").off
    assert c.contract.matched, c.contract.summary()
    outcomes = {v.key: v.outcome for v in c.verdicts}
    assert outcomes == {"step_time_ns": "improvement", "exposed_ns": "improvement",
                        "hidden_pct": "improvement"}  # fmt: skip


def test_example_pair_json_has_every_row() -> None:
    from nsysmoe.renderers import render

    c = compare(*example_paths())
    doc = json.loads(render(c, "json"))
    keys = {m["key"] for m in doc["metrics"]}
    assert {"comm_gemm_attn_ns", "hidden_pct", "active_ns", "step_time_ns", "gemm_sum_ns",
            "nvtx:dispatch_core in hybrid-ep",
            "nvtx:metadata_preprocess_core in hybrid-ep"} <= keys  # fmt: skip
    assert pl.DataFrame(doc["per_gpu"]).height == 1


def test_side_jobs_started_late_still_see_their_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The side thread may start a job long after it was submitted (a loaded host): a job
    that reads another job's result must hold it from submission, not look it up when it
    runs (the main thread lets go of its own names as soon as it is done with them)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from nsysmoe import pipeline

    class Late(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            def late(*a: Any, **k: Any) -> Any:
                time.sleep(0.05)
                return fn(*a, **k)

            return super().submit(late, *args, **kwargs)

    off = example_paths()[0]
    want = analyze(off, scope=WHOLE).channels
    monkeypatch.setattr(pipeline, "ThreadPoolExecutor", Late)
    assert analyze(off, scope=WHOLE).channels.equals(want)
