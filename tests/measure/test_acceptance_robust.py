"""The acceptance measure on awkward logs (issue 33 review): no usable metric is a one-line error,
zero and negative values are left out and counted, a resumed run is graded by the iterations it
covers, logs without common iterations say so, a change is accepted only where its CI clears the
run-to-run floor, and TFLOP/s has a mean, its CI and a change CI — each against a direct
computation (``statistics``, plain numpy draws of the same seeded stream)."""

from __future__ import annotations

import json
import math
import statistics
import warnings
from dataclasses import replace
from importlib import resources

import jsonschema
import numpy as np
import polars as pl
import pytest

from nsysmoe.acceptance import MIN_CHANGE_PCT, Change
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import TrainingLog
from nsysmoe.measure import acceptance as measure
from nsysmoe.measure.acceptance import accept
from tests.measure.test_acceptance_stats import log_of, steady

APART = "the logs share no steady iterations: each is measured on its own window"


def shifted(log: TrainingLog, by: int) -> TrainingLog:
    """The log as if its run had resumed ``by`` iterations later."""
    return replace(log, table=log.table.with_columns(pl.col("iteration") + by))


@pytest.mark.parametrize(("log", "said"), [
    (log_of([math.inf] * 10, path="inf.log"), "its 10 logged step times are all"),
    (log_of([0.0] * 10, path="zero.log"), "its 10 logged step times are all"),
    (log_of(None, path="tt.log", tokens_per_s=[0.0] * 8), "its 8 logged tokens/s are all"),
])  # fmt: skip
def test_no_finite_positive_metric_is_a_one_line_error(log: TrainingLog, said: str) -> None:
    """Every step `inf` or 0, torchtitan's `tps: 0`: one line naming the log and what it lacks
    (was a TypeError inside the window's bounds)."""
    good = log_of(steady(20, 0.1, 1), path="good.log")
    for logs in ([log], [good, log], [log, good]):
        with pytest.raises(NsysmoeError) as caught:
            accept(logs, [str(i) for i in range(len(logs))])
        text = str(caught.value)
        assert text.startswith(f"{log.path}: no finite positive step time or tokens/s in any of "
                               f"its {log.table.height} samples ({said} ")  # fmt: skip
        assert "\n" not in text


def test_zero_and_negative_values_are_left_out_and_counted() -> None:
    values = [1.0] + [0.1, 0.0, 0.11, -0.1, 0.12, math.inf, 0.1, 0.105, 0.1]
    side = accept([log_of(values)], ["x"]).sides[0]
    kept = [v for v in values[1:] if math.isfinite(v) and v > 0]
    assert side.window.samples == len(kept) and side.window.warmup_samples == 1
    assert side.median_step_s == statistics.median(kept)
    assert side.mean_step_s == pytest.approx(statistics.mean(kept), rel=1e-12)
    assert "2 samples with a zero or negative step time left out" in side.notes
    assert "1 sample with a non-finite step time left out" in side.notes
    tps = [1000.0] + [8000.0 + i for i in range(20)]
    tps[5], tps[9] = 0.0, -3.0
    side = accept([log_of(None, tokens_per_s=tps)], ["x"]).sides[0]
    kept = [1 / t for t in tps[1:] if t > 0]
    assert side.window.samples == len(kept)
    assert side.median_tokens_per_s == statistics.median(t for t in tps[1:] if t > 0)
    assert "2 samples with zero or negative tokens/s left out" in side.notes


def test_a_zero_median_never_divides() -> None:
    """Unreachable after the filter (every kept value is positive), guarded all the same."""
    logs = [log_of(steady(20, 0.1, 2)), log_of(steady(20, 0.1, 3))]
    streams = np.random.SeedSequence(0).spawn(2)
    measured = [measure._side(log, "x", "step time", None, 100, s, False)
                for log, s in zip(logs, streams, strict=True)]  # fmt: skip
    measured[0] = replace(measured[0], values=np.zeros(19), medians=np.zeros(100))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        change = measure._change(measured, 0, 1, False, 0.01)
    assert (change.median_step_pct, change.ci95_median_step_pct) == (None, None)
    assert change.verdict == "too few steps"


def test_a_resumed_run_is_graded_by_the_iterations_it_covers() -> None:
    """10 lines from iteration 1001 are a 10-iteration run, not a 1010-iteration one."""
    short = accept([shifted(log_of([2.0] + steady(9, 0.1, 4)), 1000)], ["x"]).sides[0].window
    assert (short.first, short.last, short.run_iterations) == (1002, 1010, 10)
    assert short.grade == "screening"
    assert short.description.endswith("screening: 9 steps (the run covers 10 iterations, resumed "
                                      "at iteration 1001; acceptance needs 50)")  # fmt: skip
    long = accept([shifted(log_of([2.0] + steady(59, 0.1, 5)), 1000)], ["x"]).sides[0].window
    assert (long.run_iterations, long.grade) == (60, "acceptance")
    assert long.description.endswith(
        "acceptance: 59 steps of a 60-iteration run resumed at iteration 1001")
    # a k = 5 log interval: the first sample (iteration 1005) covers 1001–1005, as a mean ...
    mean = accept([shifted(log_of([2.0] + steady(11, 0.1, 6), interval=5), 1000)], ["x"])
    assert mean.sides[0].window.run_iterations == 60
    # ... and stands for them as a point sample (one logged every 5 iterations)
    point = log_of([2.0] + steady(11, 0.1, 6), interval=5, sampling="point")
    assert accept([point], ["x"]).sides[0].window.run_iterations == 60
    resumed = accept([shifted(point, 1000)], ["x"]).sides[0].window
    assert resumed.run_iterations == 60 and "resumed at iteration 1001" in resumed.description
    fresh = accept([log_of(steady(60, 0.1, 7))], ["x"]).sides[0].window
    assert fresh.run_iterations == 60 and "resumed" not in fresh.description


def test_logs_without_common_iterations_say_so() -> None:
    a, b = log_of([2.0] + steady(20, 0.1, 8)), log_of([2.0] + steady(20, 0.1, 9))
    apart = accept([a, shifted(b, 500)], ["a", "b"])
    assert all(APART in s.notes for s in apart.sides)
    assert (apart.sides[1].window.first, apart.sides[1].window.last) == (502, 521)
    assert not any(APART in s.notes for s in accept([a, b], ["a", "b"]).sides)
    declared = accept([a, shifted(b, 500)], ["a", "b"], window=(1, 600))
    assert not any(APART in s.notes for s in declared.sides)
    assert not any(APART in s.notes for s in accept([a], ["a"]).sides)


@pytest.mark.parametrize(("pct", "ci", "want"), [
    (-1.5, (-2.0, -0.8), "no measurable change"),  # the CI reaches into the floor
    (-1.5, (-2.0, -1.01), "accepted improvement"),
    (1.5, (0.9, 2.0), "no measurable change"),
    (1.5, (1.01, 2.0), "accepted regression"),
    (-0.7, (-1.1, -0.3), "no measurable change"),
    (0.2, (-0.5, 0.9), "no measurable change"),
])  # fmt: skip
def test_a_change_is_accepted_only_where_its_ci_clears_the_floor(
        pct: float, ci: tuple[float, float], want: str) -> None:  # fmt: skip
    assert measure._verdict(pct, ci, ("acceptance", "acceptance")) == want
    screened = want.replace("accepted", "screened")
    assert measure._verdict(pct, ci, ("acceptance", "screening")) == screened


def test_a_change_whose_ci_straddles_the_floor_end_to_end() -> None:
    """A 1.1 % faster median whose CI excludes 0 but reaches within the 1 % floor (at this seed
    -1.11 %, CI -1.95 … -0.14 %: was accepted on the point estimate alone)."""
    base = log_of([2.0] + steady(60, 0.1, 10))
    to = log_of([2.0] + [v * 0.985 for v in steady(60, 0.1, 11)])
    change = accept([base, to], ["a", "b"]).changes[0]
    low, high = change.ci95_median_step_pct  # type: ignore[misc]
    assert low < -MIN_CHANGE_PCT < high < 0 and change.median_step_pct < -MIN_CHANGE_PCT  # type: ignore[operator]
    assert change.verdict == "no measurable change"
    assert change.sentence == (f"no measurable change ({change.median_step_pct:+.1f} %; its 95 % "
                               "CI does not clear the 1 % run-to-run floor)")  # fmt: skip


def test_sentences() -> None:
    inside = Change(0, 1, -1.2, (-1.6, -0.8), None, "no measurable change")
    assert inside.sentence == ("no measurable change (-1.2 %; its 95 % CI does not clear the 1 % "
                               "run-to-run floor)")  # fmt: skip
    assert Change(0, 1, 0.3, (-0.5, 1.1), None, "no measurable change").sentence == (
        "no measurable change (±1.1 %)")
    assert Change(0, 1, -6.2, (-6.9, -5.5), None, "accepted improvement").sentence == (
        "accepted improvement: -6.2 % step time (95 % CI -6.9 … -5.5 %)")


def reference_ci(values: list[float], skip: int, resamples: int, side: int = 0,
                 sides: int = 1) -> tuple[tuple[float, float], np.ndarray]:  # fmt: skip
    """The exact bootstrap by hand: side ``side``'s stream of seed 0, after ``skip`` draws of
    its step times (a resamples × skip index matrix), the means' 2.5/97.5 percentiles of
    ``values`` resampled, and the medians."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(0).spawn(sides)[side]))
    if skip:
        rng.integers(0, skip, size=(resamples, skip))
    x = np.asarray(values)
    drawn = x[rng.integers(0, len(x), size=(resamples, len(x)))]
    low, high = np.percentile(drawn.mean(axis=1), [2.5, 97.5])
    return (float(low), float(high)), np.median(drawn, axis=1)


def test_tflops_mean_ci_and_change_ci() -> None:
    rng = np.random.default_rng(12)
    n = 40
    tflops = [[100.0] + list(t * (1 + rng.normal(0, 0.02, n))) for t in (244.0, 287.0)]
    logs = [log_of([2.0] + steady(n, 0.1 * 244 / t[1], 13 + i), tflops=t)
            for i, t in enumerate(tflops)]  # fmt: skip
    result = accept(logs, ["a", "b"], resamples=500)
    assert result.to_dict() == accept(logs, ["a", "b"], resamples=500).to_dict()
    medians = []
    for i, (side, t) in enumerate(zip(result.sides, tflops, strict=True)):
        window = t[1:]  # the first sample is warm-up
        assert side.mean_tflops == pytest.approx(statistics.mean(window), rel=1e-12)
        assert side.median_tflops == statistics.median(window)
        assert side.ci95_mean_step_s == pytest.approx(
            reference_ci(side.samples["step_s"].to_list(), 0, 500, i, 2)[0], rel=1e-12)
        ci, draws = reference_ci(window, n, 500, i, 2)
        assert side.ci95_mean_tflops == pytest.approx(ci, rel=1e-12)
        low, high = side.ci95_mean_tflops  # type: ignore[misc]
        assert low < side.mean_tflops < high  # type: ignore[operator]
        medians.append(draws)
    change = result.changes[0]
    want = np.percentile(100 * (medians[1] / medians[0] - 1), [2.5, 97.5])
    assert change.ci95_median_tflops_pct == pytest.approx(tuple(want), rel=1e-12)
    low, high = change.ci95_median_tflops_pct  # type: ignore[misc]
    assert low < change.median_tflops_pct < high  # type: ignore[operator]
    doc = result.to_dict()
    assert doc["sides"][1]["mean_tflops"] == result.sides[1].mean_tflops  # type: ignore[index]
    assert doc["sides"][1]["ci95_mean_tflops"] == list(result.sides[1].ci95_mean_tflops)  # type: ignore[index, arg-type]
    assert doc["changes"][0]["ci95_median_tflops_pct"] == [low, high]  # type: ignore[index]
    assert doc["changes"][0]["vs_base"]["ci95_median_tflops_pct"] == [low, high]  # type: ignore[index]
    frame = result.to_polars()
    assert frame["mean_tflops"].to_list() == [s.mean_tflops for s in result.sides]
    assert frame["ci95_low_tflops"][1] == result.sides[1].ci95_mean_tflops[0]  # type: ignore[index]
    changes = result.changes_polars()
    assert changes["ci95_tflops_low_pct"][0] == low and changes["ci95_tflops_high_pct"][0] == high
    schema = json.loads((resources.files("nsysmoe") / "schemas" / "acceptance.schema.json")
                        .read_text(encoding="utf-8"))  # fmt: skip
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(doc)))
    without = accept([log_of(steady(20, 0.1, 14))], ["x"]).sides[0]
    assert (without.mean_tflops, without.ci95_mean_tflops) == (None, None)


def test_loss_difference_relative_and_benchmark_only() -> None:
    """The largest per-iteration loss difference relative to the base's loss, in % (plain
    Python over the iterations both windows hold, even one whose step time was left out), and
    the forced-balancing side marked benchmark-only whether or not equivalence was declared."""
    n = 30
    loss_b = [10.0 - 0.05 * i for i in range(n)]
    loss_t = [x * (1 + 0.002 * (i % 4)) for i, x in enumerate(loss_b)]
    steps_b, steps_t = steady(n, 0.1, 1), steady(n, 0.1, 2)
    steps_t[17] = math.inf  # its sample is left out; its loss still counts
    b, t = log_of(steps_b, loss=loss_b), log_of(steps_t, loss=loss_t)
    result = accept([b, t], ["b", "t"], equivalent=True)
    window = [i for i in range(n) if result.sides[0].window.first <= i + 1
              <= result.sides[0].window.last]  # iterations are 1-based in log_of
    change = result.changes[0]
    want = max(100 * abs(loss_t[i] - loss_b[i]) / abs(loss_b[i]) for i in window)
    assert change.max_loss_diff_pct == pytest.approx(want, rel=1e-12)
    assert 17 in window and want == pytest.approx(0.6, rel=1e-9)  # 0.2 % × 3, at i % 4 == 3
    assert not any(s.benchmark_only for s in result.sides)
    forced = log_of(steps_t, loss=loss_t, config={"--moe-router-force-load-balancing": "True"})
    plain = accept([b, forced], ["b", "t"])
    assert [s.benchmark_only for s in plain.sides] == [False, True]
    assert plain.to_dict()["sides"][1]["benchmark_only"] is True


def test_counts_sum_exactly_and_changes_stay_finite() -> None:
    """Skipped counts are summed as integers (an int64 sum of 11 × 5e18 wraps negative); a
    change whose ratio is not finite has no figure rather than inf or NaN in the JSON."""
    big = 5 * 10**18
    side = accept([log_of([1.0] + [0.1] * 11, skipped=[0] + [big] * 11)], ["x"]).sides[0]
    assert side.skipped_iterations == big * side.window.samples
    tiny, normal = log_of([1.0] + [1e-320] * 11), log_of([1.0] + steady(11, 0.1, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning reaches the user's stderr
        change = accept([tiny, normal], ["tiny", "normal"]).changes[0]
    assert change.median_step_pct is None and change.ci95_median_step_pct is None
    json.dumps(accept([tiny, normal], ["tiny", "normal"]).to_dict(), allow_nan=False)


def test_a_log_whose_every_value_the_reader_left_out_says_why() -> None:
    """The reader nulls implausible step times with a note; the measure's one line names it."""
    note = "3 samples with a step time outside 1e-09 to 1e+07 s (not a measurement) left out."
    log = replace(log_of([None, None, None], path="odd.csv"), notes=(note,))  # type: ignore[list-item]
    with pytest.raises(NsysmoeError) as caught:
        accept([log], ["odd"])
    assert str(caught.value) == (f"odd.csv: no step time or tokens/s in any of its 3 samples "
                                 f"({note.rstrip('.')}); pass a log that records the iteration "
                                 "time")  # fmt: skip
