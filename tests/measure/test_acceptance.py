"""The acceptance measure on the shared Megatron CI pairs (issue 33): each side's window, medians,
means, loss finiteness and peak memory equal a plain ``json`` + ``statistics`` computation
(warm-up by a direct reading of the traces' rule), and each pair's verdict is what its data
says."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from nsysmoe.io.logs import read_log
from nsysmoe.measure.acceptance import accept
from tests.conftest import require_shared_logs

PAIRS = ("a2a-overlap-ep4", "dp-last-cp2", "muon-vs-adam-ep8")


def pair(name: str) -> tuple[Path, Path]:
    """A shared pair's two metrics files (skipped where the shared logs are absent)."""
    folder = require_shared_logs() / "megatron-ci" / name
    off, on = (folder / side / "golden_values.json" for side in ("off", "on"))
    return off, on


def plain(path: Path, declared: tuple[int, int] | None = None,
          common: tuple[int, int] | None = None) -> dict[str, object]:  # fmt: skip
    """The side's figures from the raw JSON: every value of iteration-time is one iteration
    (--log-interval 1, even where step_interval is 5); warm-up: the first sample always, then
    while more than max(10 %, 3 robust SDs) over the second half's median, keeping 2; with
    ``common``, only those iterations of the steady ones."""
    raw = json.loads(path.read_text())
    times = sorted((int(k), v) for k, v in raw["iteration-time"]["values"].items())
    if declared is not None:
        kept = [(i, v) for i, v in times if declared[0] <= i <= declared[1]]
    else:
        values = [v for _, v in times]
        n = len(values)
        steady = values[n // 2 :]
        median = statistics.median(steady)
        mad = statistics.median([abs(x - median) for x in steady])
        tolerance = max(0.10, 3 * 1.4826 * mad / median)
        k = 1
        while k < n - 2 and values[k] > (1 + tolerance) * median:
            k += 1
        kept = times[k:]
        if common is not None:
            kept = [(i, v) for i, v in kept if common[0] <= i <= common[1]]
    first, last = kept[0][0], kept[-1][0]
    losses = [v for k, v in raw["lm loss"]["values"].items() if first <= int(k) <= last]
    values = [v for _, v in kept]
    return {"first": first, "last": last, "samples": len(kept), "steps": len(kept),
            "median": statistics.median(values), "mean": statistics.mean(values),
            "loss_finite": all(math.isfinite(x) for x in losses),
            "peak": int(max(raw["mem-max-allocated-bytes"]["values"].values())),
            "run": max(int(k) for metric in raw.values() for k in metric["values"])}  # fmt: skip


def plain_pair(name: str, declared: tuple[int, int] | None = None) -> list[dict[str, object]]:
    """Both sides' plain figures; detected, over the iterations both have after each one's
    warm-up (as an A/B of traces)."""
    paths = pair(name)
    if declared is not None:
        return [plain(p, declared) for p in paths]
    alone = [plain(p) for p in paths]
    common = (max(a["first"] for a in alone), min(a["last"] for a in alone))  # type: ignore[type-var]
    return [plain(p, None, common) for p in paths]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("declared", [None, (41, 50)])
def test_shared_pair_equals_plain_json(name: str, declared: tuple[int, int] | None) -> None:
    paths = pair(name)
    result = accept([read_log(p) for p in paths], ["off", "on"], window=declared)
    for side, want in zip(result.sides, plain_pair(name, declared), strict=True):
        w = side.window
        assert (w.first, w.last, w.samples, w.steps) == (
            want["first"], want["last"], want["samples"], want["steps"])  # fmt: skip
        assert side.median_step_s == pytest.approx(want["median"], rel=1e-12)
        assert side.mean_step_s == pytest.approx(want["mean"], rel=1e-12)
        assert side.loss_finite is want["loss_finite"]
        assert side.peak_memory_bytes == want["peak"]
        assert w.run_iterations == want["run"]
        assert side.samples.height == want["samples"]
        low, high = side.ci95_mean_step_s  # type: ignore[misc]
        assert low <= side.mean_step_s <= high  # type: ignore[operator]
        assert f"iterations {w.first}–{w.last}" in w.description
        assert f"{w.steps} steps in {w.samples} samples" in w.description
        assert w.why == ("declared" if declared else "warm-up detected")
        if declared is None:
            assert f"{w.warmup_samples} sample" in w.description
            assert "skipped as warm-up" in w.description
        # Megatron's CI metrics log neither skipped nor NaN iterations nor TFLOP/s
        assert side.skipped_iterations is None and side.nan_iterations is None
        assert side.median_tflops is None


def test_point_samples_are_said_so() -> None:
    """a2a-overlap-ep4/off: one iteration every 5 (step_interval 5 under --log-interval 1): each
    value is one step, so 9 samples are 9 steps, and the window is said to span more."""
    off, _ = pair("a2a-overlap-ep4")
    side = accept([read_log(off)], ["off"]).sides[0]
    w = side.window
    assert (w.first, w.last, w.steps, w.samples, w.log_interval) == (10, 50, 9, 9, 5)
    assert "9 steps in 9 samples, one iteration every 5 (point samples; the window spans 41 " \
           "iterations)" in w.description  # fmt: skip
    assert w.grade == "acceptance" and "acceptance: 9 steps of a 50-iteration run" in w.description
    declared = accept([read_log(off)], ["off"], window=(41, 50)).sides[0].window
    assert (declared.first, declared.last, declared.steps, declared.grade) == (45, 50, 2, "too few")
    assert declared.description.startswith("iterations 45–50 (declared 41–50): 2 steps")


def verdicts(name: str, window: tuple[int, int] | None = None) -> tuple[str, float, tuple]:
    result = accept([read_log(p) for p in pair(name)], ["off", "on"], window=window)
    change = result.changes[0]
    assert result.vs_base == result.changes  # two sides: the one before is the base
    return change.verdict, change.median_step_pct, change.ci95_median_step_pct  # type: ignore[return-value]


def test_muon_vs_adam_is_an_accepted_regression() -> None:
    verdict, pct, (low, high) = verdicts("muon-vs-adam-ep8")
    assert verdict == "accepted regression" and round(pct, 1) == 24.6 and low > 0
    off, on = plain_pair("muon-vs-adam-ep8")
    plain_pct = 100 * (on["median"] / off["median"] - 1)  # type: ignore[operator]
    assert pct == pytest.approx(plain_pct, rel=1e-12)


def test_a2a_overlap_is_an_accepted_improvement() -> None:
    verdict, pct, (low, high) = verdicts("a2a-overlap-ep4")
    assert verdict == "accepted improvement" and round(pct, 1) == -12.1 and high < 0
    off, on = plain_pair("a2a-overlap-ep4")  # iterations 10-50: off's first point sample on
    assert (off["first"], on["first"], on["last"]) == (10, 10, 50)
    on_window = accept([read_log(p) for p in pair("a2a-overlap-ep4")], ["off", "on"]).sides[1]
    assert "only iterations every log has (10–50)" in on_window.window.description
    assert pct == pytest.approx(100 * (on["median"] / off["median"] - 1), rel=1e-12)  # type: ignore[operator]


def test_dp_last_is_no_measurable_change() -> None:
    """dp-last-cp2 is the shared near-null change. On iterations 41–50 the CI of the change
    includes 0. On the whole steady window (iterations 3/4–50) the on side is faster in nearly
    every iteration and the medians' −0.7 % has a CI that excludes 0 — within one run's noise
    a difference, but its CI does not clear the run-to-run floor (MIN_CHANGE_PCT) no bootstrap
    over one run can see: still no measurable change, and the sentence says why."""
    verdict, pct, (low, high) = verdicts("dp-last-cp2", (41, 50))
    assert verdict == "no measurable change" and low < 0 < high
    verdict, pct, (low, high) = verdicts("dp-last-cp2")
    assert verdict == "no measurable change" and round(pct, 1) == -0.7 and -1.5 < low < high < 0
    acc = accept([read_log(p) for p in pair("dp-last-cp2")], ["off", "on"])
    said = acc.changes[0].sentence
    assert said == ("no measurable change (-0.7 %; its 95 % CI does not clear the 1 % "
                    "run-to-run floor)")  # fmt: skip


def test_equivalent_pairs_compare_losses() -> None:
    """dp-last-cp2 trains the same (identical losses); a2a-overlap-ep4's losses differ by more
    than 1 % at the iterations both windows hold (10, 15, …, 50)."""
    same = accept([read_log(p) for p in pair("dp-last-cp2")], ["off", "on"], equivalent=True)
    assert same.changes[0].max_loss_diff == 0.0 and not same.changes[0].loss_flagged
    paths = pair("a2a-overlap-ep4")
    diff = accept([read_log(p) for p in paths], ["off", "on"], equivalent=True).changes[0]
    off, on = (json.loads(p.read_text())["lm loss"]["values"] for p in paths)
    want = max(abs(on[k] - off[k]) for k in off if int(k) >= 10 and k in on)
    assert diff.max_loss_diff == pytest.approx(want, rel=1e-12) and diff.loss_flagged
