"""Δ % from a tiny base (issue 32 point 7): below 1 % of the off side's GPU-active time a total's
change is given in absolute terms only, in every format, and ``--fail-if`` on its ``_delta_pct``
measures the change against that floor, so noise on a sliver cannot fire a gate.

The floor is worked out here from the documented rule (1 % of the off value of the
``active_ns`` row), never from the module's constant, and the percentages a tiny base would
give are computed here from the rows' off and on values.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from nsysmoe.ab.metrics import flat_values
from nsysmoe.ab.verdict import judge
from nsysmoe.api import compare, example_paths, render
from nsysmoe.cli import cli
from nsysmoe.results import MetricRow

MEDIANS = {"step_time_ns", "gemm_median_ns", "attention_median_ns"}


@pytest.fixture(scope="module")
def shipped() -> object:
    return compare(*example_paths())


def tiny(rows: list[dict]) -> tuple[float, list[dict]]:
    """The documented floor and the total rows (ns, not a median) whose base lies below it."""
    floor = next(r["off"] for r in rows if r["key"] == "active_ns") / 100
    return floor, [r for r in rows if r["unit"] == "ns" and r["key"] not in MEDIANS
                   and r["off"] and r["on"] is not None and r["off"] < floor]  # fmt: skip


def test_the_shipped_ab_prints_no_percentage_of_a_base_below_the_floor(shipped) -> None:
    data = json.loads(render(shipped, "json"))
    floor, small = tiny(data["metrics"])
    assert {r["key"] for r in small} >= {"comm_gemm_attn_ns"}  # 0.120 -> 56.929 ms
    shown = [r for r in data["metrics"] if r not in small and r["unit"] != "pct" and r["off"]
             and r["on"] is not None]  # fmt: skip
    assert all(r["delta_pct"] is None for r in small)  # JSON: null, never a number
    assert all(r["delta_pct"] is not None for r in shown)
    assert all(r["delta_pct_floor"] == pytest.approx(floor, abs=1) for r in small)
    legit = {f"{r['delta_pct']:+.1f} %" for r in shown}
    raw = {f"{100 * (r['on'] - r['off']) / r['off']:+.1f} %" for r in small} - legit
    assert "+47274.4 %" in raw
    for fmt in ("terminal", "markdown", "html"):
        text = render(shipped, fmt)
        for pct in raw:
            assert pct not in text and pct.replace(" ", "\u00a0") not in text, (fmt, pct)
    term = render(shipped, "terminal")
    line = next(x for x in term.splitlines() if x.startswith("communication concurrent"))
    assert re.search(r"\+56\.809\s+–", line), line
    assert f"({floor / 1e6:,.3f} ms)" in term  # the floor is said once, with its rule
    assert "at least 1 % of overlap off's GPU-active time" in term


def row(off: float, on: float, floor: float | None = 10_000_000) -> MetricRow:
    return MetricRow("exposed_ns", "exposed communication", "ns", off, on, "lower",
                     pct_floor=floor)  # fmt: skip


def test_gate_and_verdict_measure_a_change_from_a_tiny_base_against_the_floor() -> None:
    noise = row(50_000, 80_000)  # 0.05 -> 0.08 ms: +60 % of the base, 0.3 % of the 10 ms floor
    real = row(50_000, 50_050_000)  # 0.05 -> 50.05 ms: a real regression
    assert noise.delta_pct is None and real.delta_pct is None
    assert flat_values([noise], True)["exposed_ns_delta_pct"] == pytest.approx(0.3)
    assert flat_values([real], True)["exposed_ns_delta_pct"] == pytest.approx(500.0)
    quiet = judge(noise, (2.0, "x"))
    assert (quiet.outcome, quiet.change, quiet.base_ns) == ("no change", pytest.approx(0.3),
                                                            10_000_000)  # fmt: skip
    assert judge(real, (2.0, "x")).outcome == "regression"
    above = row(20_000_000, 30_000_000)  # at or above the floor: the plain percentage
    assert above.delta_pct == flat_values([above], True)["exposed_ns_delta_pct"] == 50.0
    assert judge(above, (2.0, "x")).base_ns is None
    assert row(0, 5_000_000).delta_pct is None
    assert flat_values([row(0, 5_000_000)], True)["exposed_ns_delta_pct"] == 50.0
    assert flat_values([row(0, 5, None)], True)["exposed_ns_delta_pct"] is None


def test_fail_if_on_a_tiny_base_tests_the_change_against_the_floor() -> None:
    """comm_gemm_attn_ns went +47,274 % of its 0.120 ms base, +951 % of the 5.972 ms floor."""
    ex = [str(p) for p in example_paths()]
    runner = CliRunner()
    quiet = runner.invoke(cli, ["analyze", *ex, "--format", "json",
                                "--fail-if", "comm_gemm_attn_ns_delta_pct>1000"])  # fmt: skip
    assert quiet.exit_code == 0, quiet.output
    fired = runner.invoke(cli, ["analyze", *ex, "--format", "json",
                                "--fail-if", "comm_gemm_attn_ns_delta_pct>900"])  # fmt: skip
    assert fired.exit_code == 1
