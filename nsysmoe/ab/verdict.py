"""Improvement, regression or no change — against a noise floor from the per-iteration spread —
and the ``--fail-if`` conditions CI uses to set the exit code."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.results import MetricRow, Verdict

#: robust standard deviation = 1.4826 · MAD; the floor is twice that, at least MIN_NOISE
MAD_TO_SD = 1.4826
MIN_NOISE = 1.0  # % (points for percentages)
DEFAULT_NOISE = 2.0  # % (points) when a side has fewer than MIN_ITERATIONS
MIN_ITERATIONS = 3
#: the judged metric rows → their per-iteration column, and whether the noise is relative (%)
#: or absolute (percentage points)
JUDGED = {
    "step_time_ns": ("step_ns", True),
    "exposed_ns": ("exposed_ns", True),
    "hidden_pct": ("hidden_pct", False),
}


def noise_floor(off: pl.Series, on: pl.Series, *, relative: bool) -> tuple[float, str]:
    """2 × robust SD of the per-iteration values (relative to the median unless points)."""
    if min(off.drop_nulls().len(), on.drop_nulls().len()) < MIN_ITERATIONS:
        return DEFAULT_NOISE, f"default (fewer than {MIN_ITERATIONS} iterations on a side)"
    spreads = []
    for s in (off.drop_nulls().cast(pl.Float64), on.drop_nulls().cast(pl.Float64)):
        med = float(s.median())
        sd = MAD_TO_SD * float((s - med).abs().median())
        spreads.append(100.0 * sd / med if relative and med else sd)
    return max(MIN_NOISE, 2.0 * max(spreads)), "2 × robust SD of per-iteration values"


def judge(row: MetricRow, noise: tuple[float, str]) -> Verdict:
    """The outcome of one row's change against its noise floor (a change within it is none)."""
    points = row.unit == "pct"  # a percentage changes by points, anything else by percent
    # from a base below the row's floor, the change relative to the floor (MetricRow.gated_pct)
    change = row.delta if points else row.gated_pct
    base = row.pct_floor if not points and row.pct_floored else None
    floor, source = noise
    unit = "pp" if points else "%"
    if change is None or row.better is None:
        return Verdict(row.key, row.label, "n/a", change, floor, source, unit, base)
    if abs(change) <= floor:
        outcome = "no change"
    else:
        good = change < 0 if row.better == "lower" else change > 0
        outcome = "improvement" if good else "regression"
    return Verdict(row.key, row.label, outcome, change, floor, source, unit, base)


_COND = re.compile(
    r"^\s*([a-z_][a-z0-9_.]*)\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)\s*$"
)
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}  # fmt: skip


@dataclass(frozen=True)
class Condition:
    text: str
    metric: str
    op: str
    value: float

    def holds(self, values: dict[str, float | None]) -> bool | None:
        got = values.get(self.metric)
        return None if got is None else _OPS[self.op](got, self.value)


def parse_condition(text: str, known: set[str]) -> Condition:
    m = _COND.match(text)
    if not m:
        raise NsysmoeError(f"--fail-if {text!r}: use METRIC<NUMBER, e.g. hidden_pct<30")
    if m.group(1) not in known:
        raise NsysmoeError(
            f"--fail-if {text!r}: unknown metric {m.group(1)!r}; known: {', '.join(sorted(known))}"
        )
    return Condition(text, m.group(1), m.group(2), float(m.group(3)))


def failing(conditions: list[Condition], values: dict[str, float | None]) -> list[str]:
    """Conditions that hold (the run should fail), with the value that triggered each; a
    condition on a value this run does not have fails too (nothing to compare is no pass)."""
    out = []
    for c in conditions:
        held = c.holds(values)
        if held is None:
            out.append(f"{c.text} (no value: {c.metric} is undefined for this input)")
        elif held:
            out.append(f"{c.text} (value {values[c.metric]:.4g})")
    return out
