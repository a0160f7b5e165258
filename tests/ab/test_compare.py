"""A/B on the real NERSC DDP pair: steady window from `step N`, contract, and independent checks."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe.api import compare, load
from nsysmoe.measure.steps import detect_steps
from nsysmoe.model import Iterations, Scope
from tests.test_real_traces import NSYS_STATS, independent_window

PAIR = ("nersc-ddp-4gpu-baseline.sqlite", "nersc-ddp-4gpu-bucketcap100mb.sqlite")


def nvidia_step_projection(stem: str) -> dict[int, tuple[int, int]]:
    """`step N` → (projected start, projected end) from NVIDIA's nvtxgpuproj output."""
    out = {}
    with (NSYS_STATS / f"{stem}__nvtxgpuproj.csv").open() as fh:
        for row in csv.DictReader(fh):
            if row["Name"].startswith("step "):
                start = int(row["Projected Start (ns)"])
                out[int(row["Name"].split()[1])] = (
                    start,
                    start + int(row["Projected Duration (ns)"]),
                )
    return out


@pytest.fixture(scope="module")
def nersc(traces_module: Path):
    off, on = (load(traces_module / "nsys" / name) for name in PAIR)
    return off, on, compare(off, on, scope=Scope(window=Iterations(skip=1)))


@pytest.fixture(scope="module")
def traces_module() -> Path:
    from tests.conftest import require_shared

    return require_shared()


def test_steps_start_where_nvidia_projects_them(traces_module: Path) -> None:
    for name in PAIR:
        steps = detect_steps(load(traces_module / "nsys" / name))
        assert steps.timeline == "gpu"
        nvidia = nvidia_step_projection(name.removesuffix(".sqlite"))
        for row in steps.table.iter_rows(named=True):
            assert row["gpu_start_ns"] == nvidia[row["step"]][0], row["step"]


def test_steady_window_and_contract(nersc) -> None:
    _, _, c = nersc
    # both sides keep iterations 1-11: 1 warm-up skipped; the bucketcap capture ends inside
    # iteration 12 (its GPU work spans 34 ms against ~50 ms periods), so it is left out
    assert c.off.analysis.iterations["step"].to_list() == list(range(1, 12))
    assert c.on.analysis.iterations["step"].to_list() == list(range(1, 12))
    assert "iterations 1–11" in c.off.analysis.window_choice.description
    assert "iteration 12 left out: cut short" in c.on.analysis.window_choice.description
    checks = {ch.name: ch for ch in c.contract.checks}
    assert not c.contract.matched
    assert not checks["kernels"].ok and "in count" in checks["kernels"].detail
    assert checks["kernels"].off == "3,256" and checks["kernels"].on == "3,223"
    assert checks["GPU model"].ok and checks["ranks"].ok and checks["window length"].ok


def test_truncated_last_iteration_left_out() -> None:
    """NVIDIA's own projection of the bucketcap run: step 12 spans far less than a period."""
    nvidia = nvidia_step_projection("nersc-ddp-4gpu-bucketcap100mb")
    periods = [nvidia[n + 1][0] - nvidia[n][0] for n in range(11)]
    span_12 = nvidia[12][1] - nvidia[12][0]
    assert span_12 < 0.9 * sorted(periods)[len(periods) // 2]
    assert 13 not in nvidia


def test_hidden_pct_each_side_equals_independent_computation(traces_module: Path, nersc) -> None:
    """Window: from NVIDIA's projected start of step 1 to its projected start of step 12."""
    _, _, c = nersc
    for name, side in zip(PAIR, (c.off, c.on), strict=True):
        nvidia = nvidia_step_projection(name.removesuffix(".sqlite"))
        lo, hi = nvidia[1][0], nvidia[12][0]
        assert (side.analysis.window.start_ns, side.analysis.window.end_ns) == (lo, hi)
        (exp,) = independent_window(traces_module / "nsys" / name, lo, hi).values()
        (got,) = side.analysis.gpus.iter_rows(named=True)
        for metric in ("comm_ns", "compute_ns", "hidden_ns", "active_ns", "kernels"):
            assert got[metric] == exp[metric], (name, metric)
        assert got["hidden_pct"] == pytest.approx(100 * exp["hidden_ns"] / exp["comm_ns"])


def test_metric_rows_and_verdicts(nersc) -> None:
    _, _, c = nersc
    hidden = c.row("hidden_pct")
    assert hidden.delta == pytest.approx(hidden.on - hidden.off)
    kernels = c.row("kernels")
    assert (kernels.off, kernels.on, kernels.delta) == (3256, 3223, -33)
    outcomes = {v.key: v.outcome for v in c.verdicts}
    assert set(outcomes) == {"step_time_ns", "exposed_ns", "hidden_pct"}
    assert all(o in {"improvement", "regression", "no change"} for o in outcomes.values())


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "nsysmoe", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_cli_strict_fails_with_one_line_reason(traces_module: Path) -> None:
    paths = [str(traces_module / "nsys" / n) for n in PAIR]
    proc = run_cli("analyze", *paths, "--strict", "--format", "json")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--strict" in lines[0] and "kernels differs" in lines[0]
    doc = json.loads(proc.stdout)  # the report is still written before the error
    assert doc["schema"] == "nsysmoe.comparison" and doc["contract"]["matched"] is False


def test_cli_fail_if_sets_exit_code(traces_module: Path) -> None:
    paths = [str(traces_module / "nsys" / n) for n in PAIR]
    assert run_cli("analyze", *paths, "--fail-if", "hidden_pct<30").returncode == 0
    proc = run_cli("analyze", *paths, "--fail-if", "hidden_pct>30", "--format", "json")
    assert proc.returncode == 1 and "hidden_pct>30" in proc.stderr
    proc = run_cli("analyze", *paths, "--fail-if", "nonsense<1")
    assert proc.returncode == 2 and "unknown metric" in proc.stderr
