"""The command line as a user types it: formats, JSON fields, --plot, kernels, examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysmoe.api import example_paths
from nsysmoe.cli import cli

OFF, ON = (str(p) for p in example_paths())
GPU_FIELDS = {"pid", "device", "kernels", "span_ns", "active_ns", "idle_ns", "comm_ns",
              "compute_ns", "hidden_ns", "exposed_ns", "hidden_pct", "comm_gemm_attn_ns",
              "classes"}  # fmt: skip


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_examples_command_lists_the_pair() -> None:
    assert invoke("examples").output.split() == [OFF, ON]


def test_json_fields_documented_in_docs() -> None:
    doc = json.loads(invoke("analyze", OFF, "--format", "json").output)
    assert doc["schema"] == "nsysmoe.analysis" and doc["version"] == 1
    (trace,) = doc["traces"]
    (gpu,) = trace["gpus"]
    assert GPU_FIELDS <= set(gpu)
    assert set(gpu["classes"]["comm"]) == {"count", "sum_ns", "union_ns"}
    assert {"name", "count", "total_ns"} <= set(trace["nvtx"][0])
    assert {"wall", "reason", "evidence", "thresholds", "knobs"} <= set(trace["wall"])
    doc_page = (Path(__file__).parents[1] / "docs" / "json.md").read_text()
    for field in GPU_FIELDS | {"nvtx", "wall", "unclassified", "not_captured", "iterations"}:
        assert f'"{field}"' in doc_page or f"`{field}`" in doc_page, field


@pytest.mark.parametrize("fmt", ["terminal", "markdown"])
def test_text_formats(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # the terminal wraps cells to its width: none here
    out = invoke("analyze", OFF, ON, "--format", fmt).output
    for row in ("communication concurrent with GEMM/attention", "communication hidden by compute",
                "GPU-active interval union", "dispatch_core in hybrid-ep",
                "metadata_preprocess_core in hybrid-ep", "median step time",
                "GEMM kernels, sum of durations", "Measurement contract"):  # fmt: skip
        assert row in out, row


def test_plot_writes_figures_and_markdown_links_them(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    invoke("analyze", OFF, ON, "--plot", str(tmp_path / "figs"), "--format", "markdown",
           "-o", str(report))  # fmt: skip
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == sorted(
        f"{stem}.{ext}"
        for ext in ("png", "svg")
        for stem in (
            "breakdown",
            "channels",  # no "ranks": each side has one rank (issue 15: never "2 ranks")
            "timeline-moe-hybridep-overlap-off",
            "timeline-moe-hybridep-overlap-on",
        )
    )
    text = report.read_text()
    assert "![breakdown](figs/breakdown.png)" in text and "ranks.png" not in text
    assert "![channels](figs/channels.png)" in text


def test_kernels_audit_table() -> None:
    out = invoke("kernels", OFF, "--class", "comm", "--format", "json").output
    rows = json.loads(out)["kernels"]
    assert rows and all(r["class"] == "comm" for r in rows)
    assert any("hybrid_ep::dispatch_kernel" in r["name"] for r in rows)


def test_iteration_window_and_skip() -> None:
    doc = json.loads(invoke("analyze", OFF, "--window", "2-5", "--format", "json").output)
    (trace,) = doc["traces"]
    assert [i["step"] for i in trace["iterations"]] == [2, 3, 4, 5]
    assert trace["window"]["description"].startswith("iterations 2–5")
    doc = json.loads(invoke("analyze", OFF, "--skip", "3", "--format", "json").output)
    assert [i["step"] for i in doc["traces"][0]["iterations"]] == [3, 4, 5, 6, 7]


def test_time_window_units() -> None:
    doc = json.loads(invoke("analyze", OFF, "--window", "100ms:0.3s", "--format", "json").output)
    window = doc["traces"][0]["window"]
    assert (window["start_ns"], window["end_ns"]) == (100_000_000, 300_000_000)


def test_single_trace_fail_if() -> None:
    result = CliRunner().invoke(cli, ["analyze", ON, "--fail-if", "hidden_pct<50"])
    assert result.exit_code == 1
    assert invoke("analyze", ON, "--fail-if", "hidden_pct<10").exit_code == 0


def test_relative_time_window_counts_from_first_gpu_activity(traces) -> None:
    """Epoch-stamped export (NCCL 6-rank files): +1s:+2s is anchored at the first GPU op."""
    path = str(traces / "nsys" / "nccl-allreduce-6ranks" / "ault43.cscs.ch_485050.sqlite")
    doc = json.loads(invoke("analyze", path, "--window", "+1s:+2s", "--format", "json").output)
    (trace,) = doc["traces"]
    first = 1726746948077024189  # the first memcpy of this export (sqlite3: min(start))
    assert (trace["window"]["start_ns"], trace["window"]["end_ns"]) == (
        first + 1_000_000_000,
        first + 2_000_000_000,
    )
    assert trace["gpus"][0]["kernels"] == 1
