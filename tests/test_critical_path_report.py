"""The critical path and the what-if replays in every output (issue 34): the bound-by line under
the headline and the ranked replays next to the wall's knobs (terminal, Markdown, HTML), the
largest segments and the graph's facts, the A/B's composition table, the JSON keys and the
``--fail-if`` keys; each checked on the shipped examples against the result's own figures."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner

from nsysmoe import api
from nsysmoe.cli import cli
from nsysmoe.depgraph.build import BASE_CATEGORIES
from nsysmoe.gate import Gate, values
from nsysmoe.renderers import render
from nsysmoe.results import PATH_BASE_CATEGORIES, Comparison, CriticalPath, TraceAnalysis

PATHS = [str(p) for p in api.example_paths()]


@pytest.fixture(scope="module")
def analyses() -> list[TraceAnalysis]:
    out = [api.analyze(p) for p in PATHS]
    assert all(a.critical_path is not None and a.critical_path.what_if for a in out)
    return out


@pytest.fixture(scope="module")
def ab() -> Comparison:
    c = api.compare(*PATHS)
    assert isinstance(c, Comparison)
    return c


def path_of(a: TraceAnalysis) -> CriticalPath:
    assert a.critical_path is not None
    return a.critical_path


def bound_by(cp: CriticalPath) -> str:
    """The line as the report must say it, from the composition itself (not shares())."""
    total = sum(cp.composition.values())
    share = {c: 100 * ns / total for c, ns in cp.composition.items() if ns}
    top = sorted((c for c in share if c != "unexplained"), key=lambda c: -share[c])[:3]
    parts = [f"{c} {share[c]:.0f} %" for c in top]
    parts.append(f"unexplained {share.get('unexplained', 0):.0f} %")
    return "Step bound by: " + ", ".join(parts)


def ms3(ns: float) -> str:
    return f"{round(ns) / 1e6:,.3f}"


def test_terminal_says_what_bounds_the_step_under_the_headline(analyses) -> None:
    """Right under the headline and its window (the headline's 12 lines are full)."""
    for a in analyses:
        lines = render(a, "terminal").splitlines()
        rules = next(i for i, x in enumerate(lines) if x.startswith("rules: "))
        assert lines[rules + 1] == "" and lines[rules + 2].startswith(bound_by(path_of(a)))
        assert "Step bound by" not in "\n".join(lines[:rules])


def test_terminal_ranks_the_replays_next_to_the_knobs(analyses) -> None:
    for a in analyses:
        cp, out = path_of(a), render(a, "terminal")
        lines = out.splitlines()
        knobs = next(i for i, x in enumerate(lines) if x.strip().startswith("knobs: "))
        title = next(i for i, x in enumerate(lines) if x.startswith("What would pay most"))
        assert title == knobs + 2  # the knobs' advice kept, the ranked list right after it
        rows = [x for x in lines[title:] if re.match(r"^\S+\*\d", x)][: len(cp.what_if)]
        assert [r.split()[0] for r in rows] == [w.scenario for w in cp.what_if]  # best first
        for r, w in zip(rows, cp.what_if, strict=True):
            mark = "≤ " if w.bound else ""
            assert ms3(w.predicted_step_ns) in r, r
            assert f"{mark}{w.gain_ns / 1e6:+,.3f}" in r and f"{mark}{w.gain_pct:+.2f} %" in r, r
        said = " ".join(out.split())  # the facts line, unwrapped
        assert "Dependency graph: edges " in said
        assert f"cross-stream waits no event record matched: {cp.unmatched_waits:,}" in said


def test_markdown_shows_every_block(analyses) -> None:
    for a in analyses:
        cp, md = path_of(a), render(a, "markdown")
        assert "> " + bound_by(cp) in md
        assert "| scenario | knob | step ms | gain ms | gain % |" in md
        for w in cp.what_if:
            assert f"| {w.scenario.replace('*', chr(92) + '*')} | {w.knob} | " in md
        assert "<details><summary>Critical path</summary>" in md
        top = cp.top.row(0, named=True)
        assert f"| {top['category']} | {top['name']} | {top['pid']} | {ms3(top['ns'])} |" in md
        kinds = ", ".join(f"{k} {n:,}" for k, n in cp.edges.items() if n)
        assert f"> Dependency graph: edges {kinds}" in md
        assert f"unexplained {cp.unexplained_pct:.2f} % of the path" in md


def test_html_shows_every_block(analyses) -> None:
    for a in analyses:
        cp = path_of(a)
        page = html.unescape(render(a, "html", page=True))
        assert bound_by(cp) in page
        assert "<th>scenario</th><th>knob</th><th>step ms</th>" in page
        for w in cp.what_if:
            assert f"<td>{w.scenario}</td><td>{w.knob}</td>" in page
        assert "<summary>Critical path</summary>" in page
        assert f"identity replay off the measured steps by {cp.replay_error_pct:.2f} %" in page


def test_json_has_the_path_and_the_replays_per_trace(analyses) -> None:
    for a in analyses:
        cp = path_of(a)
        (trace,) = json.loads(render(a, "json"))["traces"]
        got = trace["critical_path"]
        assert "what_if" not in got
        for it, want in zip(got["iterations"], cp.iterations, strict=True):
            assert {"step", "step_ns", "length_ns", "replay_step_ns", "unexplained_ns",
                    "segments"} <= set(it)  # fmt: skip
            assert it["step_ns"] == want.step_ns and it["segments"] == want.segments
        assert got["composition"] == cp.composition and got["edges"] == cp.edges
        assert got["unexplained_pct"] == pytest.approx(cp.unexplained_pct)
        assert [w["scenario"] for w in trace["what_if"]] == [w.scenario for w in cp.what_if]
        for w, want in zip(trace["what_if"], cp.what_if, strict=True):
            assert {"scenario", "knob", "predicted_step_ns", "measured_step_ns", "gain_ns",
                    "bound"} <= set(w)  # fmt: skip
            assert all(isinstance(w[k], int) for k in ("predicted_step_ns", "measured_step_ns",
                                                       "gain_ns"))  # fmt: skip
            assert w["predicted_step_ns"] == round(want.predicted_step_ns)
            assert w["bound"] is want.bound
    none = json.loads(render(replace(analyses[0], critical_path=None), "json"))["traces"][0]
    assert none["critical_path"] is None and none["what_if"] == []


def test_json_of_an_ab_has_both_sides_paths(ab) -> None:
    doc = json.loads(render(ab, "json"))
    for side in ("off", "on"):
        assert doc[side]["critical_path"]["iterations"] and doc[side]["what_if"]


def test_fail_if_keys_of_the_path(analyses) -> None:
    for a in analyses:
        cp = path_of(a)
        channels = set(a.channel_totals["channel"].to_list())
        comm = sum(ns for c, ns in cp.composition.items()
                   if any(c == ch or c.startswith(ch + ".") for ch in channels))  # fmt: skip
        total = sum(cp.composition.values())
        v = values(a)
        assert v["path_comm_pct"] == pytest.approx(100 * comm / total) and comm > 0
        assert v["path_unexplained_pct"] == pytest.approx(
            100 * cp.composition["unexplained"] / total)
        assert v["what_if_best_gain_pct"] == pytest.approx(
            max(100 * w.gain_ns / w.measured_step_ns for w in cp.what_if))
    without = values(replace(analyses[0], critical_path=None))
    assert all(without[k] is None for k in ("path_unexplained_pct", "path_comm_pct",
                                            "what_if_best_gain_pct"))  # fmt: skip
    gate = Gate.of(("path_unexplained_pct>=0",), replace(analyses[0], critical_path=None))
    assert gate.failures()  # no path: the condition fails, CI does not pass on a missing number


def test_fail_if_from_the_cli(analyses, ab) -> None:
    best = path_of(analyses[1]).best_gain_pct
    assert best is not None
    runner = CliRunner()
    held = runner.invoke(cli, ["analyze", PATHS[1], "--fail-if",
                               f"what_if_best_gain_pct>{best - 0.01:.2f}"])  # fmt: skip
    assert held.exit_code == 1, held.output
    passed = runner.invoke(cli, ["analyze", PATHS[1], "--fail-if",
                                 f"what_if_best_gain_pct>{best + 0.01:.2f}"])  # fmt: skip
    assert passed.exit_code == 0, passed.output
    off = values(ab)["path_comm_pct_off"]
    assert off == pytest.approx(path_of(ab.off.analysis).comm_share_pct)
    assert values(ab)["path_comm_pct"] == pytest.approx(path_of(ab.on.analysis).comm_share_pct)


def test_ab_shows_how_the_paths_composition_changed(ab) -> None:
    off, on = dict(path_of(ab.off.analysis).shares()), dict(path_of(ab.on.analysis).shares())
    for fmt in ("terminal", "markdown"):
        out = render(ab, fmt)
        assert "What bounds the step: the critical path's composition" in out
        for c in off.keys() | on.keys():
            a, b = off.get(c, 0.0), on.get(c, 0.0)
            cells = [f"{a:.2f} %", f"{b:.2f} %", f"{b - a:+.2f} pp"]
            cells = [re.escape(x) for x in cells]
            pattern = (rf"\|\s*{re.escape(c)}\s*\|\s*" + r"\s*\|\s*".join(cells)
                       if fmt == "markdown" else rf"^{re.escape(c)}\s+" + r"\s+".join(cells) + "$")
            assert re.search(pattern, out, re.MULTILINE), (fmt, c, cells)
    one_sided = replace(ab, on=replace(ab.on, analysis=replace(ab.on.analysis,
                                                               critical_path=None)))  # fmt: skip
    assert "critical path's composition" not in render(one_sided, "terminal")


def test_the_channel_share_knows_the_graphs_categories() -> None:
    assert PATH_BASE_CATEGORIES == BASE_CATEGORIES
