"""The report cache's key (:func:`nsysmoe.options.report_key`): every option of
:class:`~nsysmoe.options.Options` is keyed unless it is named as not keyed, so an option added
later changes the key without anyone remembering to list it."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from nsysmoe.options import NOT_KEYED, REPORT_OPTIONS, Options

#: the hand-kept list the key was made of before it was derived: the key must not change
KEYED_BEFORE = {"window", "skip", "step_range", "whole_trace", "raw_nvtx", "phase", "align",
                "vary", "labels", "rank", "all_nvtx", "wide",
                # training logs: their paths (their content is keyed as inputs), window, rule
                "logs", "log_window", "equivalent", "loss_tolerance",
                # the dependency graph: the user's replays, or none at all
                "what_if", "no_path"}  # fmt: skip


def test_every_option_is_keyed_unless_named() -> None:
    names = {f.name for f in fields(Options)}
    assert NOT_KEYED <= names  # no misspelt name leaves a real option keyed by accident
    assert set(REPORT_OPTIONS) == names - NOT_KEYED == KEYED_BEFORE
    assert len(REPORT_OPTIONS) == len(set(REPORT_OPTIONS))


def test_the_inputs_are_the_traces_and_the_rules() -> None:
    rules = Path("rules.toml")
    assert Options(("a", "b"), logs=("x.log", "y.log")).inputs == ["a", "b", "x.log", "y.log"]
    assert Options(("a", "b")).inputs == ["a", "b"]
    assert Options(("a",), rules_path=rules).inputs == ["a", rules]
    assert Options(("a",), rules_path=rules).and_rules(["x", "y"]) == ["x", "y", rules]
