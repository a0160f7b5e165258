"""CUDA graphs against the generator's ground truth (tests/fixtures/graphs.py, built by
construction and checked there against per-ns brute force): whole-graph rows
(``--cuda-graph-trace=graph``) count as GPU work of class ``graph``; graph-node kernels
(``=node``, Kineto) are ordinary kernels sharing their launch's correlation id."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from nsysmoe.api import analyze, compare, example_paths, load, render
from nsysmoe.classify import load_rules, parse_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure import walls
from nsysmoe.measure.projection import project_nvtx
from nsysmoe.model import WHOLE
from nsysmoe.pipeline import prepare
from tests.fixtures.generate import graph_scenario, write_export
from tests.fixtures.kineto_writer import kineto_text
from tests.test_pipeline import assert_gpus_equal_truth, assert_nvtx_equal_truth

GRAPH_DDLS = ("3.13.2", "3.28.1")  # nsys 2024.5 (kernel.graphNodeId only) and 2026.4 (+graphId)
ADVICE = "--cuda-graph-trace=node"


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[Any, dict[str, Any]]]:
    return {mode: graph_scenario(mode, steps=4, seed=0) for mode in ("graph", "node")}


@pytest.fixture(scope="module", params=[(m, d) for m in ("graph", "node") for d in GRAPH_DDLS],
                ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def export(request, tmp_path_factory, runs) -> tuple[Path, str, dict[str, Any]]:
    mode, ddl = request.param
    spec, truth = runs[mode]
    path = tmp_path_factory.mktemp("g") / f"{mode}-{ddl}.sqlite"
    write_export(path, spec, ddl, shuffle=ddl == "3.28.1", seed=2)  # 2025.6+: unsorted rows
    return path, mode, truth


def test_every_metric_equals_the_truth_of_its_mode(export) -> None:
    """Graph mode: graph rows are active, compute and may hide comm; node mode: per kernel."""
    path, mode, truth = export
    result = analyze(path, scope=WHOLE)
    assert_gpus_equal_truth(result, truth)
    assert_nvtx_equal_truth(result, truth)
    (g,) = truth["gpus"]
    graphs = result.graphs
    assert graphs.traced == mode
    assert graphs.recorded["MODE"] == ("Graph" if mode == "graph" else "Node")
    assert graphs.replays == g["graphs"]["launches"]
    assert (graphs.whole_rows, graphs.whole_ns) == (g["graphs"]["graph_rows"],
                                                    g["graphs"]["graph_ns"])  # fmt: skip
    assert graphs.unknown_ns == g["graphs"]["graph_ns"]  # no rule names a graph by default
    assert graphs.node_kernels == g["graphs"]["node_kernels"]
    if mode == "node":
        assert graphs.node_ns == g["graphs"]["node_union_ns"]
        assert graphs.node_comm_ns == g["graphs"]["comm_in_graphs_ns"] > 0
    assert {n for n, _ in graphs.capture_nvtx} == set(truth["graphs"]["capture_nvtx"])


def test_iterations_with_many_kernels_per_correlation_id(export) -> None:
    path, _, truth = export
    result = analyze(path, scope=WHOLE)
    (g,) = truth["gpus"]
    it = result.iterations.sort("step")
    assert it["step"].to_list() == [int(s["name"].split()[-1]) for s in g["steps"]]
    starts = [s["first_start_ns"] for s in g["steps"]]
    for row, st, nxt in zip(it.iter_rows(named=True), g["steps"], [*starts[1:], None],
                            strict=True):  # fmt: skip
        for f in ("comm_ns", "hidden_ns", "exposed_ns"):
            assert row[f] == st[f], (st["name"], f)
        if nxt is not None:
            assert row["step_ns"] == nxt - st["first_start_ns"]


def test_projection_with_many_kernels_per_correlation_id(export) -> None:
    """A graph launch is one API call; in node mode it launched every node of the replay."""
    path, mode, truth = export
    source = prepare(load(path))
    t = source.trace
    proj = project_nvtx(t.nvtx, source.kernels, t.memops, t.runtime)
    (g,) = truth["gpus"]
    for name, want in g["nvtx_projection"].items():
        rows = proj.filter(pl.col("name") == name)
        assert len(rows) == want["count"], name
        assert int(rows["gpu_ops"].sum()) == want["ops"], name
        assert int(rows["kernels"].sum()) == want["kernels"], name
        assert int(rows["api_calls"].sum()) == want["count"], name  # one cudaGraphLaunch each
        for f in ("busy_ns", "comm_ns", "compute_ns", "hidden_ns"):
            assert int(rows[f].sum()) == want[f], (name, f)
    if mode == "node":
        assert g["nvtx_projection"]["moe_dispatch forward"]["comm_ns"] > 0


def test_graph_mode_report_says_what_it_cannot_see(export, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "1000")  # sentences on one line: the terminal wraps at its width
    path, mode, truth = export
    result = analyze(path, scope=WHOLE)  # the whole trace
    (g,) = truth["gpus"]
    text = render(result, "terminal")
    md = render(result, "markdown")
    doc = json.loads(render(result, "json"))["traces"][0]["graphs"]
    assert doc["traced"] == mode and doc["per_gpu"][0]["replays"] == g["graphs"]["launches"]
    if mode == "graph":
        graph_ms = f"{g['graphs']['graph_ns'] / 1e6:,.3f} ms"
        for out in (text, md):
            assert graph_ms in out and ADVICE in out
            assert "communication inside these graphs cannot be seen" in out
    else:
        assert ADVICE not in text and "kernels ran inside" in text
    assert "pushed during CUDA-graph capture" in text


def test_the_wall_is_not_host_overhead_for_want_of_graph_time(runs, tmp_path: Path) -> None:
    """Without the graph rows, ~45 % of the span would look idle: a host-overhead verdict. The
    test shows that verdict is what ignoring them gives, and that nsysmoe does not give it."""
    spec, truth = runs["graph"]
    (g,) = truth["gpus"]
    path = write_export(tmp_path / "g.sqlite", spec, "3.28.1")
    result = analyze(path, scope=WHOLE)
    blind = walls.verdict(g["span_ns"], g["idle_ns_without_graphs"], g["exposed_ns"], {})
    assert blind.wall == "host overhead"
    assert result.wall.wall != "host overhead"
    assert result.gpus["idle_ns"][0] == g["idle_ns"] < g["idle_ns_without_graphs"]


def test_prefixed_capture_options_are_read(tmp_path: Path) -> None:
    spec, _ = graph_scenario("graph", steps=2, prefixed_options=True,
                             trace_device_graph_launch=True)  # fmt: skip
    trace = load(write_export(tmp_path / "p.sqlite", spec, "3.13.2"))
    assert trace.graph_trace == {"MODE": "Graph", "TRACE_DEVICE_GRAPH_LAUNCH": "true"}


def test_kineto_graph_launches_link_many_kernels(runs, tmp_path: Path) -> None:
    """Kineto records each replayed kernel with the cudaGraphLaunch's correlation: node mode."""
    spec, truth = runs["node"]
    path = tmp_path / "node.pt.trace.json"
    path.write_text(kineto_text(spec))
    result = analyze(path, scope=WHOLE)
    (g,) = truth["gpus"]
    row = result.gpus.row(0, named=True)
    for f in ("kernels", "span_ns", "active_ns", "comm_ns", "compute_ns", "hidden_ns"):
        assert row[f] == g[f], f
    assert result.graphs.traced == "node"
    assert result.graphs.node_kernels == g["graphs"]["node_kernels"]
    assert result.graphs.node_comm_ns == g["graphs"]["comm_in_graphs_ns"]
    assert {n for n, _ in result.graphs.capture_nvtx} == set(truth["graphs"]["capture_nvtx"])


def test_a_rule_names_graphs_by_the_nvtx_range_that_launched_them(runs, tmp_path: Path) -> None:
    spec, truth = runs["graph"]
    path = write_export(tmp_path / "g.sqlite", spec, "3.28.1")
    rules = tmp_path / "graphs.toml"
    rules.write_text(
        '[[rule]]\nclass = "comm"\nsubclass = "hybridep"\npattern = \'^\\[CUDA graph\'\n'
        'nvtx = "^moe_dispatch"\n\n'
        '[[rule]]\nclass = "moe_glue"\nsubclass = "router"\nnvtx = "^moe_router$"\n'
    )
    source = prepare(load(path), load_rules(rules))
    whole = source.kernels.filter(pl.col("graph") == "whole")
    dispatch = {f"[CUDA graph {d['graph_id']}]" for d in truth["graphs"]["definitions"]
                if d["nvtx"] == "moe_dispatch forward"}  # fmt: skip
    router = {f"[CUDA graph {d['graph_id']}]" for d in truth["graphs"]["definitions"]
              if d["nvtx"] == "moe_router"}  # fmt: skip
    by_class = {k: set(v["name"]) for k, v in whole.partition_by("class", as_dict=True,
                                                                  include_key=True).items()}
    assert by_class[("comm",)] == dispatch
    assert by_class[("moe_glue",)] == router
    assert by_class[("graph",)].isdisjoint(dispatch | router)
    # eager kernels launched inside moe_router (none here besides the graphs) keep their class,
    # and the comm rows gained exactly the dispatch replays
    base = prepare(load(path))
    comm_before = int((base.kernels["class"] == "comm").sum())
    assert int((source.kernels["class"] == "comm").sum()) == comm_before + len(
        whole.filter(pl.col("name").is_in(list(dispatch))))
    result = analyze(path, rules=load_rules(rules), scope=WHOLE)
    assert result.graphs.unknown_ns < result.graphs.whole_ns


def test_graph_rules_are_checked_when_loaded() -> None:
    with pytest.raises(NsysmoeError, match="class 'graph' is given"):
        parse_rules('[[rule]]\nclass = "graph"\nsubclass = "x"\npattern = "x"\n', "r.toml")
    with pytest.raises(NsysmoeError, match="missing key.*pattern \\(or nvtx\\)"):
        parse_rules('[[rule]]\nclass = "comm"\nsubclass = "x"\n', "r.toml")
    with pytest.raises(NsysmoeError, match="nvtx '\\(' is not a valid regex"):
        parse_rules('[[rule]]\nclass = "comm"\nsubclass = "x"\nnvtx = "("\n', "r.toml")


def test_ab_of_graph_and_node_traces_is_not_matched(runs, tmp_path: Path) -> None:
    paths = [write_export(tmp_path / f"{m}.sqlite", runs[m][0], "3.28.1") for m in runs]
    c = compare(*paths)
    check = next(ch for ch in c.contract.checks if ch.name == "CUDA graphs traced")
    assert (check.off, check.on, check.ok) == ("graph", "node", False)
    keys = {r.key for r in c.rows}
    assert {"graph_whole_ns", "graph_unknown_ns", "graph_node_ns"} <= keys
    assert ADVICE in render(c, "terminal")


def test_exports_without_graphs_say_none() -> None:
    for path in example_paths():
        result = analyze(path, scope=WHOLE)
        assert result.graphs.traced == "none" and not result.graphs.present
        doc = json.loads(render(result, "json"))["traces"][0]
        assert doc["graphs"]["per_gpu"] == [] and doc["graphs"]["replays"] == 0
        assert "graph" not in set(result.classes["class"])
        # (the what-if replay names CUDA graphs as the knob that removes launch overhead)
        said = [line for line in render(result, "terminal").splitlines()
                if "CUDA graph" in line and not line.startswith("host*0")]
        assert not said
    c = compare(*example_paths())
    assert not [ch for ch in c.contract.checks if "graph" in ch.name]
    assert not [r for r in c.rows if r.key.startswith("graph_")]


def test_graph_table_without_a_needed_column_is_a_clear_error(runs, tmp_path: Path) -> None:
    spec, _ = runs["graph"]
    path = write_export(tmp_path / "g.sqlite", spec, "3.28.1")
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE DROP COLUMN deviceId")
    with pytest.raises(NsysmoeError, match="GRAPH_TRACE has no column deviceId"):
        load(path)


def test_fail_if_refuses_graph_time_nobody_can_see(runs, tmp_path: Path) -> None:
    from nsysmoe.gate import values

    paths = {m: write_export(tmp_path / f"{m}.sqlite", runs[m][0], "3.28.1") for m in runs}
    graph, node = analyze(paths["graph"], scope=WHOLE), analyze(paths["node"], scope=WHOLE)
    (g,) = runs["graph"][1]["gpus"]
    assert values(graph)["graph_unknown_ns"] == g["graphs"]["graph_ns"]
    assert values(graph)["graph_unknown_pct"] == pytest.approx(
        100 * g["graphs"]["graph_ns"] / g["active_ns"])
    assert values(node)["graph_unknown_ns"] == 0
    assert values(compare(*example_paths()))["graph_unknown_ns"] == 0


def test_many_ranks_add_up_their_graphs(runs, tmp_path: Path) -> None:
    from nsysmoe.api import analyze_many

    spec, truth = runs["graph"]
    paths = [str(write_export(tmp_path / f"r{i}.sqlite", spec, "3.28.1")) for i in range(2)]
    run = analyze_many(paths, scope=WHOLE)
    (g,) = truth["gpus"]
    assert run.graphs.whole_rows == 2 * g["graphs"]["graph_rows"]
    assert run.graphs.whole_ns == 2 * g["graphs"]["graph_ns"]
    assert dict(run.graphs.capture_nvtx) == {
        n: 2 * c for n, c in analyze(paths[0], scope=WHOLE).graphs.capture_nvtx}
    assert "all ranks: CUDA graphs:" in render(run, "terminal")
