"""Iteration numbers from NVTX range names (issue 31, point 7): only ASCII digits 0-9 within int64
make a number; a range whose group 1 holds other digits (``\\d`` matches every script's) or a
larger number is skipped and counted in one warning; group 1 capturing anything but digits, or a
pattern without group 1, is a usage error. Checked against a direct reading of the rule."""

from __future__ import annotations

import re

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.errors import UsageError
from nsysmoe.measure.steps import detect_steps
from nsysmoe.model import (
    GPU_SCHEMA,
    KERNEL_SCHEMA,
    MEMOP_SCHEMA,
    MEMORY_EVENT_SCHEMA,
    NVTX_SCHEMA,
    RUNTIME_SCHEMA,
    Trace,
    empty,
)

INT64_MAX = 2**63 - 1
#: ASCII digits and digits of other scripts: Arabic-Indic three, Devanagari seven, bold five
DIGITS = "0123456789٣७𝟓"


def trace_of(names: list[str], cross_thread: list[bool] | None = None) -> Trace:
    """One process, one thread, ranges one after another; no CUDA rows (CPU timeline)."""
    n = len(names)
    nvtx = pl.DataFrame({
        "pid": [1] * n, "tid": [1] * n, "start": [10 * i for i in range(n)],
        "end": [10 * i + 5 for i in range(n)], "name": names, "domain": [None] * n,
        "style": ["pushpop"] * n, "cross_thread": cross_thread or [False] * n,
    }, schema=NVTX_SCHEMA)  # fmt: skip
    return Trace("t.sqlite", "nsys-sqlite", None, None, empty(KERNEL_SCHEMA), empty(MEMOP_SCHEMA),
                 empty(RUNTIME_SCHEMA), nvtx, empty(GPU_SCHEMA),
                 empty(MEMORY_EVENT_SCHEMA))  # fmt: skip


def test_numbers_by_hand() -> None:
    names = ["iteration 1", "iteration 2", "iteration ٣", "iteration 99999999999999999999",
             "iteration 9223372036854775807", "step 0004", "ProfilerStep#७",
             "iteration 9223372036854775808", "forward", "iteration 6"]  # fmt: skip
    steps = detect_steps(trace_of(names, cross_thread=[False] * 9 + [True]))
    assert sorted(steps.table["step"].to_list()) == [1, 2, 4, INT64_MAX]
    assert steps.warnings == (
        "4 NVTX ranges matching the iteration pattern skipped: their number is not digits 0-9 "
        "within int64 (e.g. '٣'); they count in no iteration",
    )  # the cross-thread range is no iteration either, but not for its number: not counted


def test_nothing_skipped_no_warning() -> None:
    assert detect_steps(trace_of(["iteration 1", "iteration 2"])).warnings == ()
    assert detect_steps(trace_of([])).warnings == ()


def test_one_skipped_all_skipped() -> None:
    steps = detect_steps(trace_of(["iteration ٣"]))
    assert steps.table.is_empty() and steps.timeline == "none"
    assert steps.warnings == (
        "1 NVTX range matching the iteration pattern skipped: its number is not digits 0-9 "
        "within int64 (e.g. '٣'); it counts in no iteration",
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(DIGITS, min_size=1, max_size=22), max_size=12))
def test_the_rule_read_directly(numbers: list[str]) -> None:
    steps = detect_steps(trace_of([f"iteration {s}" for s in numbers]))
    valid = [s for s in numbers if re.fullmatch("[0-9]+", s) and int(s) <= INT64_MAX]
    assert sorted(steps.table["step"].to_list()) == sorted({int(s) for s in valid})
    skipped = len(numbers) - len(valid)
    assert len(steps.warnings) == (1 if skipped else 0)
    if skipped:
        assert steps.warnings[0].startswith(f"{skipped} NVTX range")


@pytest.mark.parametrize(("pattern", "error"), [
    ("(mlp)", "--step-range '(mlp)': group 1 captured 'mlp', which is not a number; group 1 "
              "must capture the iteration number, digits 0-9, e.g. 'iteration ([0-9]+)'"),
    ("(.*)", "--step-range '(.*)': group 1 captured 'mlp', which is not a number, and "
             "non-numbers in 2 more NVTX ranges; group 1 must capture"),
    ("iteration ?(.*)", "group 1 captured 'x', which is not a number; group 1 must"),
    ("()", "group 1 captured '', which is not a number, and non-numbers in 2 more"),
    ("iteration", "--step-range 'iteration' has no capture group; group 1 must capture the "
                  "iteration number, digits 0-9, e.g. 'iteration ([0-9]+)'"),
    ("(?:iteration)", "has no capture group"),
], ids=["mlp", "dot-star", "x", "empty", "no-group", "non-capturing"])  # fmt: skip
def test_group_1_not_a_number_is_a_usage_error(pattern: str, error: str) -> None:
    with pytest.raises(UsageError) as exc:
        detect_steps(trace_of(["mlp", "iteration 1", "iteration x"]), pattern)
    assert error in str(exc.value)


def test_long_capture_shown_short() -> None:
    with pytest.raises(UsageError, match=r"group 1 captured 'a{39}…', which is not a number"):
        detect_steps(trace_of(["a" * 5000 + " 1"]), r"(\w+) \d")


def test_group_1_taking_no_part_is_no_match() -> None:
    """A group that took no part in the match captured nothing, not '': the range is no
    iteration, and no error."""
    steps = detect_steps(trace_of(["mlp", "iteration 1"]), r"(?:iteration (\d+)|mlp)")
    assert steps.table["step"].to_list() == [1] and steps.warnings == ()


def test_no_group_is_refused_without_nvtx_rows() -> None:
    with pytest.raises(UsageError, match="has no capture group"):
        detect_steps(trace_of([]), "iteration")
