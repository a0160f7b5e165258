"""The A/B verdict and ``--fail-if`` gate pinned to exact values worked out by hand.

Noise floors are recomputed here from the formula (2 × 1.4826 × MAD, relative to the median
unless in points, at least 1, default 2 below 3 iterations) with literal numbers, never from the
module's constants, so a changed constant or operator changes an expected value.
"""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from nsysmoe.ab.verdict import (
    DEFAULT_NOISE,
    JUDGED,
    MAD_TO_SD,
    MIN_ITERATIONS,
    MIN_NOISE,
    Condition,
    failing,
    judge,
    noise_floor,
    parse_condition,
)
from nsysmoe.errors import NsysmoeError
from nsysmoe.results import MetricRow, Verdict

COMPUTED = "2 × robust SD of per-iteration values"
DEFAULT = "default (fewer than 3 iterations on a side)"


def floor(off: list[float | None], on: list[float | None], relative: bool) -> tuple[float, str]:
    return noise_floor(pl.Series(off, dtype=pl.Float64), pl.Series(on, dtype=pl.Float64),
                       relative=relative)  # fmt: skip


def test_documented_constants() -> None:
    assert (MAD_TO_SD, MIN_NOISE, DEFAULT_NOISE, MIN_ITERATIONS) == (1.4826, 1.0, 2.0, 3)
    # step time and exposed time are judged relatively (%), hidden % absolutely (points)
    assert JUDGED == {
        "step_time_ns": ("step_ns", True),
        "exposed_ns": ("exposed_ns", True),
        "hidden_pct": ("hidden_pct", False),
    }


# off: median 102, |x - 102| = 2 0 2 8 12 → MAD 2 → SD 1.4826·2; on: all equal → SD 0
SPREAD_OFF = [100.0, 102.0, 104.0, 110.0, 90.0]
FLAT_ON = [200.0, 200.0, 200.0]


def test_noise_floor_relative_is_twice_the_robust_sd_over_the_median() -> None:
    got, source = floor(SPREAD_OFF, FLAT_ON, relative=True)
    assert got == pytest.approx(2 * 100 * (1.4826 * 2) / 102, rel=1e-12)  # 5.8141…
    assert source == COMPUTED
    # the wider side sets the floor, whichever side it is
    assert floor(FLAT_ON, SPREAD_OFF, relative=True)[0] == pytest.approx(got, rel=1e-12)


def test_noise_floor_absolute_points() -> None:
    got, source = floor(SPREAD_OFF, FLAT_ON, relative=False)
    assert got == pytest.approx(2 * 1.4826 * 2, rel=1e-12)  # 5.9304, not divided by the median
    assert source == COMPUTED
    # off: median 42, |x - 42| = 2 1 1 4 → MAD 1.5; on: median 50, |x - 50| = 0 0 0 3 → MAD 0
    got, _ = floor([40.0, 43.0, 41.0, 46.0], [50.0, 50.0, 50.0, 53.0], relative=False)
    assert got == pytest.approx(2 * 1.4826 * 1.5, rel=1e-12)


def test_noise_floor_relative_with_zero_median_falls_back_to_points() -> None:
    # median 0, |x| = 2 1 0 1 2 → MAD 1: relative to 0 is undefined, so the SD itself counts
    got, _ = floor([-2.0, -1.0, 0.0, 1.0, 2.0], FLAT_ON, relative=True)
    assert got == pytest.approx(2 * 1.4826, rel=1e-12)


def test_noise_floor_is_at_least_one() -> None:
    assert floor([100.0] * 4, [100.0] * 3, relative=True) == (1.0, COMPUTED)
    assert floor([100.0] * 4, [100.0] * 3, relative=False) == (1.0, COMPUTED)
    # SD 1.4826·0.25 → 2·0.3706… = 0.74 points: still raised to 1
    assert floor([10.0, 10.25, 10.5], [10.0, 10.0, 10.0], relative=False) == (1.0, COMPUTED)


def test_exactly_min_iterations_is_measured_one_fewer_is_default() -> None:
    three = [100.0, 104.0, 108.0]  # median 104, |x - 104| = 4 0 4 → MAD 4
    expected = 2 * 100 * (1.4826 * 4) / 104
    assert floor(three, three, relative=True)[0] == pytest.approx(expected, rel=1e-12)
    assert floor(three, three, relative=True)[1] == COMPUTED
    assert floor(three[:2], three, relative=True) == (2.0, DEFAULT)
    assert floor(three, three[:2], relative=False) == (2.0, DEFAULT)
    assert floor([], [], relative=True) == (2.0, DEFAULT)


def test_noise_floor_ignores_nulls_when_counting_and_measuring() -> None:
    with_nulls = [100.0, None, 104.0, None, 108.0]  # three values: measured, nulls dropped
    expected = 2 * 100 * (1.4826 * 4) / 104
    assert floor(with_nulls, with_nulls, relative=True)[0] == pytest.approx(expected, rel=1e-12)
    assert floor([100.0, None, 104.0], SPREAD_OFF, relative=True) == (2.0, DEFAULT)


def row(off: float | None, on: float | None, better: str | None, unit: str = "ns") -> MetricRow:
    return MetricRow("m", "Metric", unit, off, on, better)  # type: ignore[arg-type]


NOISE = (2.0, "test floor")


def verdict(outcome: str, change: float | None, unit: str = "%") -> Verdict:
    return Verdict("m", "Metric", outcome, change, 2.0, "test floor", unit)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("on", "lower", "higher"),
    [
        (103, "regression", "improvement"),  # +3 % > 2 %
        (97, "improvement", "regression"),  # -3 %
        (102, "no change", "no change"),  # +2 %: exactly at the floor is within it
        (98, "no change", "no change"),  # -2 %
        (100, "no change", "no change"),  # 0
        (101, "no change", "no change"),
    ],
)
def test_judge_relative_change_against_the_floor(on: int, lower: str, higher: str) -> None:
    change = float(on - 100)  # off = 100, so the % change is the difference itself
    assert judge(row(100, on, "lower"), NOISE) == verdict(lower, change)
    assert judge(row(100, on, "higher"), NOISE) == verdict(higher, change)


def test_judge_just_above_the_floor() -> None:
    just_below = (1.999, "s")  # the same +2 % / +2 pp that is "no change" against 2.0
    assert judge(row(100, 102, "lower"), just_below).outcome == "regression"
    assert judge(row(100, 98, "lower"), just_below).outcome == "improvement"
    assert judge(row(40.0, 42.0, "higher", "pct"), just_below).outcome == "improvement"
    assert judge(row(40.0, 38.0, "higher", "pct"), just_below).outcome == "regression"
    small = (0.25, "s")
    # +0.5 % against a 0.25 % floor: a rise is bad when lower is better, good when higher is
    assert judge(row(1000, 1005, "lower"), small).outcome == "regression"
    assert judge(row(1000, 1005, "higher"), small).outcome == "improvement"
    assert judge(row(1000, 995, "lower"), small).outcome == "improvement"
    assert judge(row(1000, 995, "higher"), small).outcome == "regression"
    assert judge(row(1000, 1000, "lower"), (0.0, "s")).outcome == "no change"  # 0 vs floor 0
    assert judge(row(1000, 1000, "higher"), (0.0, "s")).outcome == "no change"


def test_judge_percentages_change_in_points() -> None:
    assert judge(row(40.0, 42.5, "higher", "pct"), NOISE) == verdict("improvement", 2.5, "pp")
    assert judge(row(40.0, 42.5, "lower", "pct"), NOISE) == verdict("regression", 2.5, "pp")
    assert judge(row(40.0, 37.5, "higher", "pct"), NOISE) == verdict("regression", -2.5, "pp")
    assert judge(row(40.0, 42.0, "higher", "pct"), NOISE) == verdict("no change", 2.0, "pp")
    # in points, not percent: +2.5 pp of 10 would be +25 %
    assert judge(row(10.0, 12.5, "higher", "pct"), NOISE).change == 2.5


def test_judge_not_applicable() -> None:
    assert judge(row(100, 150, None), NOISE) == verdict("n/a", 50.0)  # no direction
    assert judge(row(40.0, 50.0, None, "pct"), NOISE) == verdict("n/a", 10.0, "pp")
    assert judge(row(None, 150, "lower"), NOISE) == verdict("n/a", None)  # no change
    assert judge(row(100, None, "higher"), NOISE) == verdict("n/a", None)
    assert judge(row(0, 150, "lower"), NOISE) == verdict("n/a", None)  # % of 0 is undefined
    assert judge(row(None, None, None, "pct"), NOISE) == verdict("n/a", None, "pp")


KNOWN = {"hidden_pct", "exposed_ns", "step_time_ns"}


@pytest.mark.parametrize(
    ("text", "metric", "op", "value"),
    [
        ("hidden_pct<30", "hidden_pct", "<", 30.0),
        ("hidden_pct<=30", "hidden_pct", "<=", 30.0),
        ("hidden_pct>30", "hidden_pct", ">", 30.0),
        ("  exposed_ns >= 1.5 ", "exposed_ns", ">=", 1.5),
        ("step_time_ns==-2", "step_time_ns", "==", -2.0),
        ("step_time_ns != 0.25", "step_time_ns", "!=", 0.25),
    ],
)
def test_parse_condition(text: str, metric: str, op: str, value: float) -> None:
    assert parse_condition(text, KNOWN) == Condition(text, metric, op, value)


def test_condition_is_frozen_and_hashable() -> None:
    c = parse_condition("hidden_pct<30", KNOWN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.value = 1.0  # type: ignore[misc]
    assert len({c, parse_condition("hidden_pct<30", KNOWN)}) == 1


@pytest.mark.parametrize(
    "text",
    ["", "hidden_pct", "hidden_pct<", "hidden_pct=<3", "hidden_pct<3x", "hidden_pct<<3",
     "Hidden_pct<3", "hidden_pct<3.", "hidden_pct < 3 4", "hidden_pct<.5"],
)  # fmt: skip
def test_parse_condition_malformed(text: str) -> None:
    with pytest.raises(NsysmoeError, match="use METRIC<NUMBER"):
        parse_condition(text, KNOWN)


def test_parse_condition_unknown_metric() -> None:
    with pytest.raises(NsysmoeError) as err:
        parse_condition("nonsense<1", KNOWN)
    assert "unknown metric 'nonsense'" in str(err.value)
    assert "known: exposed_ns, hidden_pct, step_time_ns" in str(err.value)


#: op → does it hold for a value below, equal to, above the threshold 30?
TRUTH = {
    "<": (True, False, False),
    "<=": (True, True, False),
    ">": (False, False, True),
    ">=": (False, True, True),
    "==": (False, True, False),
    "!=": (True, False, True),
}


@pytest.mark.parametrize("op", list(TRUTH))
def test_failing_at_equality_and_either_side(op: str) -> None:
    c = parse_condition(f"hidden_pct{op}30", KNOWN)
    for value, holds in zip((29.5, 30.0, 30.5), TRUTH[op], strict=True):
        got = failing([c], {"hidden_pct": value})
        assert got == ([f"hidden_pct{op}30 (value {value:.4g})"] if holds else []), value
        assert c.holds({"hidden_pct": value}) is holds


def test_failing_reports_each_holding_condition_in_order() -> None:
    texts = ("hidden_pct<30", "exposed_ns>1000", "step_time_ns>=5", "hidden_pct!=12.5")
    conds = [parse_condition(t, KNOWN) for t in texts]
    values = {"hidden_pct": 12.5, "exposed_ns": 1000.0, "step_time_ns": 123456.0}
    assert failing(conds, values) == [
        "hidden_pct<30 (value 12.5)",
        "step_time_ns>=5 (value 1.235e+05)",
    ]


def test_failing_on_a_missing_value() -> None:
    c = parse_condition("hidden_pct>30", KNOWN)
    msg = "hidden_pct>30 (no value: hidden_pct is undefined for this input)"
    assert c.holds({"hidden_pct": None}) is None and c.holds({}) is None
    assert failing([c], {"hidden_pct": None}) == [msg]
    assert failing([c], {}) == [msg]
    assert failing([c], {"hidden_pct": 0.0}) == []  # 0 is a value, not a missing one
    assert failing([], {"hidden_pct": 99.0}) == []
