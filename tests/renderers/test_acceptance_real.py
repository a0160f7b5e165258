"""The acceptance report on real logs: Megatron-LM's CI pairs (../shared/traces/logs) and the
shipped examples' logs with their traces. Every JSON validates against the schema and carries
the measured numbers; every text report opens with the verdict and fits 100 columns."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from nsysmoe import api
from nsysmoe.acceptance import AcceptedComparison, ProfileLink
from nsysmoe.io.logs import read_log
from nsysmoe.measure.acceptance import accept
from nsysmoe.renderers import render
from nsysmoe.renderers.report.acceptance import SECTIONS
from tests.conftest import require_shared_logs

PAIRS = ("a2a-overlap-ep4", "dp-last-cp2", "muon-vs-adam-ep8")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    path = resources.files("nsysmoe") / "schemas" / "acceptance.schema.json"
    return jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def check_text(result: object, verdict: str) -> None:
    """The terminal opens with ``verdict`` within 100 columns; Markdown with the same line, or
    where the terminal's was shortened to fit, with the whole of it (a heading wraps)."""
    term = render(result, "terminal")
    assert term.split("\n", 1)[0] == verdict
    assert max(map(len, term.splitlines())) <= 100
    md = render(result, "markdown").split("\n", 1)[0].removeprefix("### ")
    assert md == verdict or (len(md) > 99 and md.startswith(verdict.removesuffix(")"))), md


@pytest.mark.parametrize("pair", PAIRS)
def test_shared_ci_pair(pair: str, validator) -> None:  # noqa: ANN001
    folder = require_shared_logs() / "megatron-ci" / pair
    logs = [read_log(folder / side / "golden_values.json") for side in ("off", "on")]
    acc = accept(logs, ["off", "on"])
    doc = json.loads(render(acc, "json"))
    validator.validate(doc)
    for got, side, log in zip(doc["sides"], acc.sides, logs, strict=True):
        assert got["median_step_s"] == side.median_step_s
        assert got["peak_memory_bytes"] == log.peak_memory_bytes
        assert got["window"]["log_interval"] == log.log_interval
    opening = "Accepted" if doc["changes"][0]["verdict"].startswith("accepted") else "Not accepted"
    text = render(acc, "terminal")
    assert text.startswith(opening + " (unprofiled, iterations ")
    check_text(acc, text.split("\n", 1)[0])
    # two logs of one file name are told apart by their folders
    assert "off/golden_values.json (megatron-json)" in text
    assert "on/golden_values.json (megatron-json)" in text


def test_examples_bundle(validator) -> None:  # noqa: ANN001
    traces = api.example_paths("nsys")
    acc = accept([read_log(Path(p).with_suffix(".log")) for p in traces], ["off", "on"])
    link = ProfileLink((5.0, 4.7), None, None, None, "the profile does not explain it")
    ac = AcceptedComparison(api.compare(*traces), acc, link)
    doc = json.loads(render(ac, "json"))
    validator.validate(doc["acceptance"])
    assert doc["acceptance"]["sides"][1]["median_tflops"] == acc.sides[1].median_tflops
    text = render(ac, "terminal")
    check_text(ac, text.split("\n", 1)[0])
    page = render(ac, "html", page=True)
    where = [page.find(f"<h4>{s}</h4>") for s in SECTIONS]
    assert -1 not in where and where == sorted(where)
    assert page.find("<h3>") < where[0] < where[-1] < page.find("<h5>nsysmoe A/B")
