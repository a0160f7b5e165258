"""The shipped example pair as PyTorch profiler (Kineto) traces gives the nsys pair's numbers.

The ``.pt.trace.json.gz`` twins are written from the same specs by
:mod:`tests.fixtures.kineto_writer`, so every per-GPU metric, every A/B row and the report must be
equal to the nsys pair's and the generator's truth. The only expected differences: the pid (Kineto
traces are keyed by rank, nsys by OS pid) and NVTX domains (Kineto has none, so the
``NCCL:ncclAllReduce`` range is the bare ``ncclAllReduce`` — still a phase row, under that name).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nsysmoe.api import analyze, compare, example_paths, load
from nsysmoe.cli import cli
from nsysmoe.io.kineto import to_ns
from nsysmoe.model import WHOLE, Iterations, Scope
from tests.fixtures.generate import (
    EXAMPLES,
    EXAMPLES_TRUTH_DIR,
    edge_case_scenario,
    example_spec,
    moe_step_scenario,
)
from tests.fixtures.kineto_writer import kineto_text, us, write_kineto

NSYS = {p.stem: p for p in example_paths()}
KINETO = {n: p.with_name(f"{n}.pt.trace.json.gz") for n, p in NSYS.items()}
OFF, ON = EXAMPLES
GPU_FIELDS = ("kernels", "span_ns", "active_ns", "idle_ns", "comm_ns", "compute_ns", "hidden_ns",
              "exposed_ns", "hidden_pct", "comm_gemm_attn_ns")  # fmt: skip
CLASS_FIELDS = ("count", "sum_ns", "union_ns")
PHASES = ("dispatch_core in hybrid-ep", "metadata_preprocess_core in hybrid-ep")
#: A/B rows named differently: the NCCL NVTX domain is lost in Kineto (nsys key → Kineto key)
RENAMED = {
    "nvtx:NCCL:ncclAllReduce": "nvtx:ncclAllReduce",
    "nvtx_gpu:NCCL:ncclAllReduce": "nvtx_gpu:ncclAllReduce",
}


def truth_of(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES_TRUTH_DIR / f"{name}.truth.json").read_text())


def gpu_metrics(result) -> list[dict[str, Any]]:
    """Per GPU (in (pid, device) order, pid left out): the metric fields and class figures."""
    out = []
    for g in result.gpus.sort("pid", "device").iter_rows(named=True):
        row: dict[str, Any] = {f: g[f] for f in ("device", *GPU_FIELDS)}
        classes = result.classes.filter(pid=g["pid"], device=g["device"])
        row["classes"] = {
            c["class"]: {f: c[f] for f in CLASS_FIELDS} for c in classes.iter_rows(named=True)
        }
        out.append(row)
    return out


def truth_metrics(truth_gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    gpus = sorted(truth_gpus, key=lambda g: (g["pid"], g["device"]))
    return [{f: g[f] for f in ("device", *GPU_FIELDS, "classes")} for g in gpus]


def assert_equal_truth(got: list[dict[str, Any]], truth_gpus: list[dict[str, Any]]) -> None:
    """Exact equality except ``hidden_pct`` (a float computed two ways): approx."""
    want = truth_metrics(truth_gpus)
    assert [g["hidden_pct"] for g in got] == pytest.approx([w["hidden_pct"] for w in want])
    strip = [[{k: v for k, v in g.items() if k != "hidden_pct"} for g in gs] for gs in (got, want)]
    assert strip[0] == strip[1]


def kineto_nvtx_name(nsys_name: str) -> str:
    """The name a truth NVTX total has in the Kineto twin (domain dropped, steps renamed)."""
    name = re.sub(r"^(?:NCCL|MyLib):", "", nsys_name)
    return re.sub(r"^(?:iteration|step) (\d+)$", r"ProfilerStep#\1", name)


def test_us_text_round_trips_exactly() -> None:
    for ns in (0, 1, 999, 1000, 1001, 871_284_405, -1, -1500, 1_768_435_200_000_000_123):
        assert to_ns(us(ns)) == ns, ns
    assert us(-1500) == "-1.500" and us(12) == "0.012"


@pytest.mark.parametrize("name", EXAMPLES)
def test_shipped_twins_are_small_and_regenerate(name: str) -> None:
    path = KINETO[name]
    assert path.stat().st_size < 1_000_000
    fresh = kineto_text(example_spec(name)[0])
    assert gzip.decompress(path.read_bytes()).decode() == fresh


@pytest.mark.parametrize("name", EXAMPLES)
def test_analysis_equals_nsys_and_truth(name: str) -> None:
    truth = truth_of(name)
    kineto, nsys = analyze(KINETO[name], scope=WHOLE), analyze(NSYS[name], scope=WHOLE)
    assert kineto.source_format == "kineto-json"
    got = gpu_metrics(kineto)
    assert got == gpu_metrics(nsys)
    assert_equal_truth(got, truth["gpus"])
    assert kineto.gpus["pid"].to_list() == [0]  # distributedInfo.rank
    assert kineto.gpus["gpu_name"].to_list() == nsys.gpus["gpu_name"].to_list()
    ours = {r["name"]: (r["count"], r["total_ns"]) for r in kineto.nvtx.iter_rows(named=True)}
    assert ours == {kineto_nvtx_name(n["name"]): (n["count"], n["total_ns"]) for n in truth["nvtx"]}
    assert kineto.iterations.drop("pid", strict=False).equals(
        nsys.iterations.drop("pid", strict=False)
    )


@pytest.fixture(scope="module")
def ab():
    scope = Scope(window=Iterations(skip=1))
    return (compare(KINETO[OFF], KINETO[ON], scope=scope),
            compare(NSYS[OFF], NSYS[ON], scope=scope))  # fmt: skip


def test_compare_rows_equal_nsys(ab) -> None:
    kineto, nsys = ab
    k_rows = {r.key: (r.off, r.on) for r in kineto.rows}
    n_rows = {r.key: (r.off, r.on) for r in nsys.rows}
    assert k_rows == {RENAMED.get(k, k): v for k, v in n_rows.items()}
    for key in ("step_time_ns", "active_ns", "comm_ns", "comm_gemm_attn_ns", "hidden_pct",
                "exposed_ns", "idle_ns", "kernels", "gemm_sum_ns", "gemm_median_ns",
                "attention_sum_ns", "attention_median_ns"):  # fmt: skip
        assert None not in k_rows[key], key
    for phase in PHASES:
        assert k_rows[f"nvtx:{phase}"] == n_rows[f"nvtx:{phase}"]
    assert kineto.contract.matched, kineto.contract.summary()
    # the same clauses of the traces themselves; only the export records the launch (its one
    # differing setting, the variable under test) and a Kineto trace none
    launch = {v.key for v in nsys.contract.variables}
    assert launch == {"overlap_moe_expert_parallel_comm"} and not kineto.contract.variables
    assert [c.to_dict() for c in kineto.contract.checks] == [
        c.to_dict() for c in nsys.contract.checks if c.name not in launch
    ]
    assert [(v.key, v.outcome) for v in kineto.verdicts] == [
        (v.key, v.outcome) for v in nsys.verdicts
    ]
    assert kineto.row("hidden_pct").on > 30 > kineto.row("hidden_pct").off


def test_cli_markdown_on_kineto_pair() -> None:
    args = ["analyze", str(KINETO[OFF]), str(KINETO[ON]), "--format", "markdown"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for row in ("communication concurrent with GEMM/attention", "communication hidden by compute",
                "GPU-active interval union", "median step time", "GEMM kernels, sum of durations",
                "Measurement contract", *PHASES):  # fmt: skip
        assert row in result.output, row


def test_one_file_per_rank_and_memory(tmp_path: Path) -> None:
    """A two-process spec: one trace per rank, each equal to its process's truth; with
    ``profile_memory`` the allocator totals come back as the spec's signed changes."""
    spec, truth = moe_step_scenario(dispatcher="deepep", overlap=True, steps=2, n_processes=2,
                                    layers=1, microbatches=2)  # fmt: skip
    for rank, proc in enumerate(spec.processes):
        path = write_kineto(tmp_path / f"rank{rank}.json", spec, rank=rank, profile_memory=True)
        result = analyze(path, scope=WHOLE)
        own = [g for g in truth["gpus"] if g["pid"] == proc.pid]
        assert_equal_truth(gpu_metrics(result), own)
        mem = load(path).memory_events
        want = [m.bytes * (-1 if m.operation == 1 else 1) for m in spec.mem_usage
                if m.pid == proc.pid]  # fmt: skip
        assert mem["pid"].unique().to_list() == [rank] and mem["bytes"].to_list() == want


def test_edge_cases_per_rank(tmp_path: Path) -> None:
    """Negative, inverted, zero-length and NULL-correlation rows, unended ranges, two processes
    on device 0: each rank's trace gives its process's truth; NVTX totals summed over the ranks
    give the export's (names without domains)."""
    spec, truth = edge_case_scenario()
    totals: dict[str, tuple[int, int]] = {}
    for rank, proc in enumerate(spec.processes):
        result = analyze(write_kineto(tmp_path / f"edge{rank}.json", spec, rank=rank), scope=WHOLE)
        assert_equal_truth(gpu_metrics(result), [g for g in truth["gpus"] if g["pid"] == proc.pid])
        for r in result.nvtx.iter_rows(named=True):
            count, total = totals.get(r["name"], (0, 0))
            totals[r["name"]] = (count + r["count"], total + r["total_ns"])
    want: dict[str, tuple[int, int]] = {}
    for n in truth["nvtx"]:
        count, total = want.get(kineto_nvtx_name(n["name"]), (0, 0))
        want[kineto_nvtx_name(n["name"])] = (count + n["count"], total + n["total_ns"])
    assert totals == want
