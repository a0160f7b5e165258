"""The window choice (issue 32, points 2-3): one record of which part of a trace is measured and
why, made once in ``measure/window.py`` from hand-made iterations; reports format its fields and
never read its sentence back; warm-up is judged by one rule, in one module."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.steps import STEP_SCHEMA
from nsysmoe.measure.window import choose, choose_common, still_warm
from nsysmoe.model import Iterations, Whole, Window
from nsysmoe.renderers.cells import warmup_hint, window_phrase
from nsysmoe.results import Steps
from tests.measure.test_warmup import MS, steps_of

PACKAGE = Path(__file__).resolve().parents[2] / "nsysmoe"
PERIODS = [180, 125, 100, 101, 99, 100, 102]  # iterations 0 and 1 are warm-up


def test_the_steady_iterations_by_default() -> None:
    c = choose(steps_of(PERIODS), Iterations())
    assert (c.kind, c.why, c.kept, c.found, c.skipped) == (
        "iterations", "warm-up detected", (2, 3, 4, 5, 6), 7, 2)  # fmt: skip
    assert (c.tolerance, c.median_ns, c.asked, c.common, c.slow_first) == (
        0.10, 100.5 * MS, None, False, None)  # fmt: skip
    assert c.description == (
        "iterations 2–6 (5 of 7 complete iterations; 2 skipped as warm-up: until the step period "
        "is within 10 % of the steady median, 100.500 ms), on the GPU timeline")
    assert c.window == Window(305 * MS, sum(PERIODS) * MS)  # iteration 2 starts at 180+125
    doc = c.to_dict()
    assert (doc["kind"], doc["kept"], doc["skipped"], doc["why"], doc["truncated"]) == (
        "iterations", [2, 3, 4, 5, 6], 2, "warm-up detected", [])  # fmt: skip
    assert doc["description"] == c.description and doc["start_ns"] == 305 * MS


def test_a_given_skip_and_asked_iterations() -> None:
    steps = steps_of(PERIODS)
    given = choose(steps, Iterations(skip=1))
    assert (given.why, given.kept, given.skipped, given.tolerance) == (
        "warm-up given", (1, 2, 3, 4, 5, 6), 1, None)  # fmt: skip
    assert "(6 of 7 complete iterations; 1 skipped as warm-up)" in given.description
    # iteration 1 (125 ms) is still warm against the kept median (100.5 ms): one rule says so
    assert given.slow_first == (1, pytest.approx(100 * (125 / 100.5 - 1)))
    asked = choose(steps, Iterations(3, 5, skip=0, required=True))
    assert (asked.why, asked.asked, asked.kept, asked.skipped) == ("asked", (3, 5), (3, 4, 5), 0)
    assert "(3 of 7 complete iterations; iterations 3–5 asked)" in asked.description
    with pytest.raises(NsysmoeError, match="no iterations left in the window"):
        choose(steps, Iterations(9, 12, skip=0, required=True))


def test_open_bounds_are_said_in_words() -> None:
    """Iterations asked with one end open: the sentence and the error say what was asked
    ("iterations 3 on", "iterations up to 4"), never a bound of None."""
    steps = steps_of(PERIODS)
    on = choose(steps, Iterations(3, None, skip=0, required=True))
    assert (on.asked, on.kept) == ((3, None), (3, 4, 5, 6))
    assert "(4 of 7 complete iterations; iterations 3 on asked)" in on.description
    upto = choose(steps, Iterations(None, 4, skip=0, required=True))
    assert (upto.asked, upto.kept) == ((None, 4), (0, 1, 2, 3, 4))
    assert "(5 of 7 complete iterations; iterations up to 4 asked)" in upto.description
    assert "None" not in on.description + upto.description
    with pytest.raises(NsysmoeError, match=r"2 skipped; iterations up to 1 asked\)"):
        choose(steps, Iterations(None, 1, skip=2, required=True))
    with pytest.raises(NsysmoeError, match=r"0 skipped; iterations 9 on asked\)"):
        choose(steps, Iterations(9, None, skip=0, required=True))
    one = choose(steps, Iterations(3, 3, skip=0, required=True))
    assert one.description.startswith("iteration 3 (1 of 7 complete iterations; iterations 3–3 ")
    from nsysmoe.api import analyze, example_paths

    a = analyze(example_paths()[0], window=Iterations(first=3))
    assert "(5 of 8 complete iterations; iterations 3 on asked)" in a.window_choice.description
    assert window_phrase(a) == "iterations 3–7"


def test_no_iterations_whole_trace_and_time_windows() -> None:
    none = Steps(pl.DataFrame(schema=STEP_SCHEMA), "iteration", "none")
    fallback = choose(none, Iterations())
    assert (fallback.kind, fallback.why, fallback.kept) == ("whole", "no iterations", ())
    assert fallback.description.startswith("whole trace (no iteration ranges found")
    with pytest.raises(NsysmoeError, match="no complete iteration ranges found"):
        choose(none, Iterations(required=True))
    steps = steps_of(PERIODS)
    whole = choose(steps, Whole())
    assert (whole.kind, whole.why, whole.kept, whole.description) == (
        "whole", "asked", tuple(range(7)), "whole trace")  # fmt: skip
    assert choose(steps, Window()) == whole  # an unbounded time window is the whole trace
    rel = choose(steps, Window(0, 400 * MS, relative=True), origin=5_000)
    # [5 µs, 400.005 ms): iteration 1 (180-305 ms) lies inside, 0 and 2 do not
    assert (rel.kind, rel.why, rel.origin_ns, rel.kept) == ("time", "asked", 5_000, (1,))
    assert rel.window == Window(5_000, 400 * MS + 5_000)
    assert rel.description == "time window from the first GPU activity at 5,000 ns"
    assert choose(steps, Window(0, 400 * MS)).origin_ns is None


def test_an_ab_keeps_the_iterations_both_sides_have() -> None:
    off = steps_of(PERIODS)
    on = steps_of([180, 100, 100, 101, 99, 100, 102, 101, 100], complete_last=False)
    a, b = choose_common(off, on, Iterations())
    assert a.kept == b.kept == (2, 3, 4, 5, 6) and a.common and b.common
    assert (a.skipped, b.skipped) == (2, 1)  # each side's own warm-up, judged once
    assert b.truncated == (8,) and "iteration 8 left out: cut short" in b.description
    assert "only iterations both traces have" in a.description
    # nothing in common: each side keeps its own window (the contract reports the mismatch)
    later = Steps(off.table.with_columns(pl.col("step") + 100), "iteration", "gpu")
    a, b = choose_common(off, later, Iterations())
    assert a.kept == (2, 3, 4, 5, 6) and b.kept == (102, 103, 104, 105, 106) and not a.common


def test_reports_format_the_record_and_never_read_its_sentence() -> None:
    """The few words of a headline come from the record's fields: a sentence that says
    something else changes nothing."""
    from nsysmoe.api import analyze, example_paths
    from nsysmoe.model import STEADY

    a = analyze(example_paths()[0], scope=STEADY)
    c = a.window_choice
    assert window_phrase(a) == "iterations 2–7 (2 skipped as warm-up)"
    lying = replace(a, window_choice=replace(c, description="iterations 9–9 (99 skipped as "
                                                            "warm-up), time window"))
    assert window_phrase(lying) == "iterations 2–7 (2 skipped as warm-up)"
    assert warmup_hint(lying) == []
    slow = replace(a, window_choice=replace(c, slow_first=(2, 12.4)))
    assert warmup_hint(slow) == ["hint: iteration 2 is 12 % slower than the median iteration: "
                                 "warm-up may still be in the window (--skip N)"]  # fmt: skip


def _sources(under: str) -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8")
            for p in sorted((PACKAGE / under).rglob("*.py"))}  # fmt: skip


def test_no_renderer_parses_a_window_description() -> None:
    """Renderers show the sentence as it is: no method, regex or comparison reads it."""
    reads = re.compile(r"(description|window_text)\s*(\.\s*(split|startswith|endswith|find|index|"
                       r"partition|rpartition|replace|strip)\b|\[)"
                       r"|\.(search|match|fullmatch|findall|finditer|sub)\([^)]*(description|window_text)"
                       r"|skipped as warm-up\"\)|first GPU activity at \(")
    for name, text in _sources("renderers").items():
        assert not reads.search(text), name


def test_one_warm_up_rule() -> None:
    """The tolerance, the rule and every call of it live in measure/window.py: nothing else in
    the package judges warm-up (no second factor, no second skip count)."""
    rule = re.compile(r"\bWARMUP_\w+|\b1\.1\b|\bstill_warm\(|\bwarmup\(|\bauto_skip\b")
    for name, text in _sources("").items():
        if name != "measure/window.py":
            assert not rule.search(text), (name, rule.search(text))
    assert still_warm(110.1, 100) and not still_warm(110, 100)
