"""CUDA-graph fixtures (tests/fixtures/graphs.py): the truth holds against per-ns brute force over
the SQLite rows in both trace modes and both graph-capable schemas, and the files look like
nsys ``--cuda-graph-trace=graph`` / ``=node`` exports (and, node mode, a Kineto trace)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import oracle
from tests.fixtures.generate import graph_scenario, write_export
from tests.fixtures.graphs import GRAPH_LAUNCH, PROJECTED
from tests.fixtures.kineto_writer import kineto_text

GRAPH_DDLS = ("3.13.2", "3.28.1")
SMALL = {"time_scale": 0.02}  # ~3 M ns per GPU: per-ns masks stay small
GPU_KEYS = ("kernels", "span_ns", "active_ns", "comm_ns", "compute_ns", "hidden_ns",
            "comm_gemm_attn_ns", "classes", "channels")  # fmt: skip


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[Any, dict[str, Any]]]:
    return {mode: graph_scenario(mode, steps=4, seed=3, **SMALL) for mode in ("graph", "node")}


@pytest.fixture(scope="module", params=[(m, d) for m in ("graph", "node") for d in GRAPH_DDLS])
def db(request, tmp_path_factory, runs) -> tuple[Path, str, str, dict[str, Any]]:
    mode, ddl = request.param
    spec, truth = runs[mode]
    path = tmp_path_factory.mktemp("graphs") / f"{mode}-{ddl}.sqlite"
    write_export(path, spec, ddl, shuffle=ddl == "3.28.1", seed=1)
    return path, mode, ddl, truth


def _q(path: Path, sql: str, *args: Any) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _tables(path: Path) -> set[str]:
    return {r[0] for r in _q(path, "SELECT name FROM sqlite_master WHERE type='table'")}


# --- truth == brute force -----------------------------------------------------------------------


def test_truth_matches_brute_force(db, runs) -> None:
    path, mode, _, truth = db
    measured = oracle.brute_force(path)
    assert set(measured) == {(g["pid"], g["device"]) for g in truth["gpus"]}
    graphs = oracle.graph_brute_force(path, PROJECTED)
    node_file_truth = runs["node"][1]
    for g in truth["gpus"]:
        key = (g["pid"], g["device"])
        for k in GPU_KEYS:
            assert g[k] == measured[key][k], (mode, k)
        assert ("graph" in g["classes"]) == (mode == "graph")
        got = graphs[key]
        assert g["active_ns_without_graphs"] == got["active_ns_without_graphs"]
        assert g["idle_ns_without_graphs"] == got["idle_ns_without_graphs"]
        for k, v in got["graphs"].items():
            assert g["graphs"][k] == v, (mode, k)
        assert g["nvtx_projection"] == got["nvtx_projection"]
        # graph mode hides the nodes: their numbers are those of the node-mode file of the run
        node_g = next(n for n in node_file_truth["gpus"] if n["pid"] == g["pid"])
        for k in ("node_union_ns", "comm_in_graphs_ns", "graph_nodes", "launches"):
            assert g["graphs"][k] == node_g["graphs"][k]
    assert oracle.nvtx_sum(path) == truth["nvtx"]


def test_two_ranks_brute_force(tmp_path: Path) -> None:
    for mode in ("graph", "node"):
        spec, truth = graph_scenario(mode, steps=2, n_processes=2, seed=9, layers=1, **SMALL)
        path = write_export(tmp_path / f"{mode}.sqlite", spec, "3.28.1")
        measured = oracle.brute_force(path)
        graphs = oracle.graph_brute_force(path, PROJECTED)
        assert len(truth["gpus"]) == 2
        for g in truth["gpus"]:
            key = (g["pid"], g["device"])
            assert all(g[k] == measured[key][k] for k in GPU_KEYS)
            assert g["nvtx_projection"] == graphs[key]["nvtx_projection"]
            assert g["graphs"]["graph_ns"] == graphs[key]["graphs"]["graph_ns"]


def test_truth_is_consistent(runs) -> None:
    for mode, (_, truth) in runs.items():
        for g in truth["gpus"]:
            for m in [g, *g["steps"]]:
                assert m["exposed_ns"] == m["comm_ns"] - m["hidden_ns"]
                assert m["idle_ns"] == m["span_ns"] - m["active_ns"] >= 0
                assert 0 <= m["hidden_ns"] <= min(m["comm_ns"], m["compute_ns"])
                cls = m["classes"]
                assert sum(c["count"] for k, c in cls.items() if k != "graph") == m["kernels"]
                assert cls["comm"]["union_ns"] == m["comm_ns"]
                gb = m["graphs"]
                if mode == "graph":
                    assert cls["graph"]["count"] == gb["graph_rows"] == gb["launches"]
                    assert cls["graph"]["union_ns"] == gb["graph_ns"] >= gb["node_union_ns"]
                    assert m["active_ns_without_graphs"] < m["active_ns"]
                else:
                    assert gb["graph_rows"] == gb["graph_ns"] == 0
                    assert gb["node_kernels"] == gb["graph_nodes"]
                    assert m["idle_ns_without_graphs"] == m["idle_ns"]
            additive = ("kernels", "active_ns", "comm_ns", "compute_ns", "hidden_ns")
            for k in additive:  # all GPU work runs inside some iteration
                assert sum(st[k] for st in g["steps"]) == g[k]
            for k in ("launches", "graph_ns", "node_union_ns", "comm_in_graphs_ns"):
                assert sum(st["graphs"][k] for st in g["steps"]) == g["graphs"][k]


# --- what the scenario promises -----------------------------------------------------------------


def test_graphs_are_a_big_share_and_matter(runs) -> None:
    g_graph, g_node = runs["graph"][1]["gpus"][0], runs["node"][1]["gpus"][0]
    for st in g_graph["steps"]:
        assert st["graphs"]["graph_ns"] >= 0.4 * st["active_ns"]
        assert st["idle_ns_without_graphs"] > st["idle_ns"] + 0.3 * st["active_ns"]
    # the dispatch graph's comm node is invisible in graph mode, exact in node mode
    assert g_node["graphs"]["comm_in_graphs_ns"] > 0
    assert g_node["comm_ns"] > g_graph["comm_ns"]
    assert g_node["hidden_ns"] > g_graph["hidden_ns"] > 0
    assert g_node["span_ns"] == g_graph["span_ns"]
    disp_g = g_graph["nvtx_projection"]["moe_dispatch forward"]
    disp_n = g_node["nvtx_projection"]["moe_dispatch forward"]
    assert disp_g["comm_ns"] == 0 and disp_g["ops"] == disp_g["count"]
    assert disp_n["comm_ns"] == g_node["graphs"]["comm_in_graphs_ns"]
    assert disp_n["ops"] == 5 * disp_n["count"] and disp_g["busy_ns"] > disp_n["busy_ns"]
    assert runs["graph"][1]["graphs"]["capture_nvtx"] == list(PROJECTED)


def test_channels_in_both_modes(runs) -> None:
    """Graph rows are compute, never a channel: graph mode loses the dispatch graph's comm node
    (ep.dispatch), node mode counts it; eager combine, backward dispatch and the all-reduce
    keep their channels in both."""
    g_graph, g_node = runs["graph"][1]["gpus"][0], runs["node"][1]["gpus"][0]
    ch_g, ch_n = g_graph["channels"], g_node["channels"]
    assert set(ch_g) == set(ch_n) == {"ep.dispatch", "ep.combine", "nccl.allreduce"}
    replays = g_node["nvtx_projection"]["moe_dispatch forward"]["count"]
    assert ch_n["ep.dispatch"]["count"] == ch_g["ep.dispatch"]["count"] + replays
    assert ch_n["ep.dispatch"]["comm_ns"] > ch_g["ep.dispatch"]["comm_ns"] > 0
    assert ch_n["ep.combine"]["comm_ns"] == ch_g["ep.combine"]["comm_ns"]
    assert ch_n["nccl.allreduce"] == ch_g["nccl.allreduce"]
    for g in (g_graph, g_node):
        for m in [g, *g["steps"]]:
            comm = m["classes"]["comm"]["count"]
            assert sum(c["count"] for c in m["channels"].values()) == comm
            assert sum(c["comm_ns"] for c in m["channels"].values()) >= m["comm_ns"]
    # the comm node is hidden under the shared-expert GEMM (eager) in node mode
    assert ch_n["ep.dispatch"]["hidden_ns"] > ch_g["ep.dispatch"]["hidden_ns"]


def test_same_timeline_in_both_modes(runs) -> None:
    (gspec, _), (nspec, _) = runs["graph"], runs["node"]
    nodes = defaultdict(list)
    for k in nspec.kernels:
        if k.graph_node_id is not None:
            nodes[(k.pid, k.corr_id)].append(k)
    rows = {(g.pid, g.corr_id): (g.start, g.end) for g in gspec.graph_traces}
    assert rows == {
        key: (min(k.start for k in ks), max(k.end for k in ks)) for key, ks in nodes.items()
    }
    eager = [(k.start, k.end, k.name) for k in nspec.kernels if k.graph_node_id is None]
    assert eager == [(k.start, k.end, k.name) for k in gspec.kernels]
    assert graph_scenario("graph", steps=4, seed=3, **SMALL)[1] == runs["graph"][1]


# --- file structure -----------------------------------------------------------------------------


def test_graph_rows_and_columns(db) -> None:
    path, mode, ddl, truth = db
    assert ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in _tables(path)) == (mode == "graph")
    kcols = {r[1] for r in _q(path, "PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    assert ("graphId" in kcols) == (ddl == "3.28.1")
    with_node = _q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                         "WHERE graphNodeId IS NOT NULL")[0][0]  # fmt: skip
    assert with_node == (truth["gpus"][0]["graphs"]["graph_nodes"] if mode == "node" else 0)
    if ddl == "3.28.1" and mode == "node":
        assert _q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE "
                        "(graphId IS NULL) != (graphNodeId IS NULL)")[0][0] == 0  # fmt: skip


def test_graph_rows_correlate_with_graph_launch(db) -> None:
    path, mode, _, truth = db
    launch = f"""SELECT count(*) FROM {{t}} g JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON r.correlationId = g.correlationId
        AND g.globalPid = r.globalTid - (r.globalTid & 16777215)
        JOIN StringIds s ON s.id = r.nameId AND s.value = '{GRAPH_LAUNCH}' {{where}}"""
    if mode == "graph":
        n = _q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")[0][0]
        assert n == truth["gpus"][0]["graphs"]["graph_rows"] > 0
        assert _q(path, launch.format(t="CUPTI_ACTIVITY_KIND_GRAPH_TRACE", where=""))[0][0] == n
        ids = _q(path, "SELECT DISTINCT graphId, graphExecId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
        assert len(ids) == len(truth["graphs"]["definitions"])
    else:
        nodes = _q(path, "SELECT correlationId, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL "
                         "WHERE graphNodeId IS NOT NULL")  # fmt: skip
        per_corr = Counter(c for c, _ in nodes)
        assert min(per_corr.values()) >= 2
        assert len(per_corr) == truth["gpus"][0]["graphs"]["launches"]
        where = "WHERE g.graphNodeId IS NOT NULL"
        joined = _q(path, launch.format(t="CUPTI_ACTIVITY_KIND_KERNEL", where=where))
        assert joined[0][0] == len(nodes)
        by_corr = defaultdict(list)
        for c, node in nodes:
            by_corr[c].append(node)
        assert all(len(set(v)) == len(v) for v in by_corr.values())  # distinct within a replay
        # the same node ids on every replay of a graph
        node_sets = Counter(tuple(sorted(v)) for v in by_corr.values())
        assert len(node_sets) == len(truth["graphs"]["definitions"])


def test_capture_launches_run_nothing(db) -> None:
    path, _, _, truth = db
    calls = _q(path, """SELECT r.start, r."end", r.globalTid, r.correlationId, s.value
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId ORDER BY r.start""")
    begins = [c for c in calls if c[4] == "cudaStreamBeginCapture_v10000"]
    ends = [c for c in calls if c[4] == "cudaStreamEndCapture_v10000"]
    inst = [c for c in calls if c[4].startswith("cudaGraphInstantiate")]
    assert len(begins) == len(ends) == len(inst) == len(truth["graphs"]["definitions"])
    gpu_corr = {r[0] for r in _q(path, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in _tables(path):
        gpu_corr |= {r[0] for r in _q(path, "SELECT correlationId FROM "
                                            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")}  # fmt: skip
    captured = [c for b, e in zip(begins, ends, strict=True) for c in calls
                if b[1] <= c[0] and c[1] <= e[0] and "Launch" in c[4]]  # fmt: skip
    assert captured and all(c[3] not in gpu_corr for c in captured)
    assert {c[4] for c in captured} >= {"cudaLaunchKernel_v7000"}
    first_launch = min(c[0] for c in calls if c[4] == GRAPH_LAUNCH)
    assert ends[-1][1] < first_launch  # captured once, before the first replay
    step0 = next(s for s in truth["steps"] if s["name"] == "iteration 0")
    assert step0["start"] < begins[0][0]
    # NVTX ranges pushed during capture: one instance each per layer, projecting nothing
    counts = {n["name"]: n["count"] for n in truth["nvtx"]}
    proj = truth["gpus"][0]["nvtx_projection"]
    for name in truth["graphs"]["capture_nvtx"]:
        assert counts[name] == proj[name]["count"] + truth["scenario"]["layers"]


@pytest.mark.parametrize("prefixed", [False, True])
def test_capture_metadata(tmp_path: Path, prefixed: bool) -> None:
    for mode, value in (("graph", "Graph"), ("node", "Node")):
        spec, _ = graph_scenario(mode, steps=1, layers=1, microbatches=1, prefixed_options=prefixed,
                                 trace_device_graph_launch=True, **SMALL)  # fmt: skip
        path = write_export(tmp_path / f"{mode}.sqlite", spec, "3.13.2")
        rows = dict(_q(path, "SELECT name, value FROM META_DATA_CAPTURE "
                             "WHERE name LIKE '%CUDA_GRAPH_TRACE_OPTIONS%'"))  # fmt: skip
        pre = "PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:" if prefixed else "CUDA_GRAPH_TRACE_OPTIONS:"
        assert rows == {f"{pre}MODE": value, f"{pre}TRACE_DEVICE_GRAPH_LAUNCH": "true"}


def test_old_schemas(tmp_path: Path) -> None:
    spec, _ = graph_scenario("graph", steps=1, layers=1, microbatches=1, **SMALL)
    for ddl in ("2.9.1", "3.0.0"):
        with pytest.raises(ValueError, match="GRAPH_TRACE"):
            write_export(tmp_path / f"{ddl}.sqlite", spec, ddl)
    spec, truth = graph_scenario("node", steps=1, layers=1, microbatches=1, **SMALL)
    path = write_export(tmp_path / "node-2.9.1.sqlite", spec, "2.9.1")  # graphNodeId exists
    n = _q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL")
    assert n[0][0] == truth["gpus"][0]["graphs"]["node_kernels"] > 0


# --- Kineto -------------------------------------------------------------------------------------


def test_kineto_node_mode(runs) -> None:
    spec, truth = runs["node"]
    events = json.loads(kineto_text(spec))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    launches = [e for e in runtime if e["name"] == "cudaGraphLaunch"]
    assert len(launches) == truth["gpus"][0]["graphs"]["launches"]
    per_corr = Counter(e["args"]["correlation"] for e in kernels)
    assert all(per_corr[e["args"]["correlation"]] >= 2 for e in launches)
    assert len(kernels) == truth["gpus"][0]["kernels"]
    names = Counter(e["name"] for e in runtime)
    n_graphs = len(truth["graphs"]["definitions"])
    assert names["cudaStreamBeginCapture"] == names["cudaStreamEndCapture"] == n_graphs
    assert names["cudaGraphInstantiate"] == n_graphs
    kernel_corr = set(per_corr)
    launch_calls = [e for e in runtime if "LaunchKernel" in e["name"]]
    orphans = [e for e in launch_calls if e["args"]["correlation"] not in kernel_corr]
    assert len(orphans) == sum(len(d["nodes"]) for d in truth["graphs"]["definitions"])
    with pytest.raises(ValueError, match="node-mode"):
        kineto_text(runs["graph"][0])
