"""The acceptance bootstrap at scale (issue 33 review): above EXACT_MAX samples the bootstrap
medians are drawn from order statistics in O(resamples) after one sort — exactly the law of a
resample's median (checked against the binomial law of an order statistic and against brute-force
resampling) — and the mean's CI is the normal one; a 2,000,000-sample log is measured so (its
median and mean checked against numpy's)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import polars as pl
import pytest

from nsysmoe.io.logs import TrainingLog
from nsysmoe.io.logs.schema import to_schema
from nsysmoe.measure import bootstrap
from nsysmoe.measure.acceptance import accept


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_odd_order_medians_follow_the_binomial_law() -> None:
    """n = 11: a resample's median is at most x_(j) exactly when at least 6 of its 11 draws are
    among the j smallest, P = P(Binomial(11, j/11) >= 6)."""
    n, m, draws = 11, 6, 200_000
    ordered = np.sort(rng(1).lognormal(0, 1, n))
    medians = bootstrap.order_medians(ordered, rng(2), draws)
    for j in range(1, n + 1):
        p = j / n
        law = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(m, n + 1))
        assert np.mean(medians <= ordered[j - 1]) == pytest.approx(law, abs=0.005), j


def test_even_order_medians_match_brute_force_resampling() -> None:
    """n = 10: the mean of the 5th and 6th order statistics, against 200,000 plain resamples."""
    n, draws = 10, 200_000
    x = rng(3).lognormal(0, 1, n)
    fast = bootstrap.order_medians(np.sort(x), rng(4), draws)
    brute = np.median(x[rng(5).integers(0, n, size=(draws, n))], axis=1)
    for v in np.unique(brute):
        assert np.mean(fast <= v) == pytest.approx(np.mean(brute <= v), abs=0.008), v


@pytest.mark.parametrize("n", [30_000, 30_001])
def test_order_bootstrap_ci_matches_the_exact_one(n: int) -> None:
    """30,000 samples: the 95 % CI of the median from order statistics (20,000 draws) agrees with
    the exact resampling bootstrap's (400 resamples) within half a bootstrap SD."""
    values = rng(n).lognormal(-2, 0.05, n)
    exact = bootstrap.resample(values, rng(6), 400)[1]
    fast = bootstrap.order_medians(np.sort(values), rng(7), 20_000)
    sd = float(np.std(exact))
    assert float(np.std(fast)) == pytest.approx(sd, rel=0.15)
    for q in (2.5, 50, 97.5):
        assert abs(np.percentile(fast, q) - np.percentile(exact, q)) < 0.5 * sd, q


def big_log(values: np.ndarray, tflops: np.ndarray | None = None) -> TrainingLog:
    n = len(values)
    frame = pl.DataFrame({"iteration": np.arange(1, n + 1), "iterations": np.ones(n, np.int64),
                          "step_s": values, "tflops": tflops})  # fmt: skip
    return TrainingLog("big.log", "csv", to_schema(frame), None, (), 1, "mean", None, {}, ())


def test_above_exact_max_the_mean_ci_is_normal_and_the_draws_deterministic() -> None:
    n = bootstrap.EXACT_MAX + 2  # EXACT_MAX + 1 kept after the warm-up sample
    values = 0.1 * rng(8).lognormal(0, 0.02, n)
    values[0] = 5.0  # one warm-up sample
    log = big_log(values, 300.0 * rng(9).lognormal(0, 0.01, n))
    side = accept([log], ["x"], window=(2, n)).sides[0]
    kept = values[1:].tolist()
    half = 1.959963984540054 * statistics.stdev(kept) / math.sqrt(len(kept))
    mean = statistics.fmean(kept)
    assert side.ci95_mean_step_s == pytest.approx((mean - half, mean + half), rel=1e-9)
    assert side.window.samples == n - 1
    again = accept([log, log], ["x", "y"], window=(2, n))
    assert again.sides[0].ci95_mean_step_s == side.ci95_mean_step_s
    twice = accept([log, log], ["x", "y"], window=(2, n))
    assert again.changes[0].ci95_median_step_pct == twice.changes[0].ci95_median_step_pct
    low, high = again.changes[0].ci95_median_step_pct  # type: ignore[misc]
    assert low < 0 < high and high - low < 2  # the same log twice: no change


def test_up_to_exact_max_the_bootstrap_resamples() -> None:
    """EXACT_MAX samples are still resampled: the same CI as plain numpy draws of the stream."""
    n = bootstrap.EXACT_MAX
    values = 0.1 * rng(12).lognormal(0, 0.02, n)
    side = accept([big_log(values)], ["x"], window=(1, n), resamples=50).sides[0]
    draws = np.random.Generator(np.random.PCG64(np.random.SeedSequence(0).spawn(1)[0]))
    means = values[draws.integers(0, n, size=(50, n))].mean(axis=1)
    assert side.ci95_mean_step_s == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])),
                                                  rel=1e-12)  # fmt: skip


def test_two_million_samples() -> None:
    """A 2,000,000-sample log (the order-statistic path: the exact bootstrap would cost
    resamples × samples, minutes): the window's median and mean are numpy's of its values."""
    n = 2_000_000
    values = 0.1 * rng(10).lognormal(0, 0.02, n)
    log = big_log(values, 300.0 * rng(11).lognormal(0, 0.01, n))
    side = accept([log], ["x"]).sides[0]
    assert side.window.samples >= n - 2 and side.ci95_mean_tflops is not None
    kept = values[side.window.first - 1 : side.window.last]
    assert side.median_step_s == pytest.approx(float(np.median(kept)), rel=1e-12)
    assert side.mean_step_s == pytest.approx(float(np.mean(kept)), rel=1e-12)
    low, high = side.ci95_mean_step_s  # type: ignore[misc]
    assert low < side.mean_step_s < high  # type: ignore[operator]
