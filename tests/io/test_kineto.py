"""PyTorch profiler (Kineto) JSON traces: read into the canonical tables, analysed unchanged.

Every number from the shared traces is checked against a computation that shares no code with
nsysmoe: ``json`` with ``Decimal`` floats, name tests on the raw events, plain-loop interval sums.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.api import analyze, load
from nsysmoe.classify import classify, default_rules
from nsysmoe.io.kineto import to_ns
from nsysmoe.model import WHOLE

DEEPSEEK = "kineto/deepseek-v3-ep64-train/rank0.json.gz"
DLRM = "kineto/dlrm-8ranks"
NS_TRACE = "kineto/nccl-ns-resolution/nccl_data.json.gz"
#: HolisticTraceAnalysis 0.5.0 get_comm_comp_overlap on dlrm-8ranks, ranks 0-7 (PROVENANCE.md)
HTA_DLRM_PCT = [4.50, 2.47, 7.88, 3.31, 0.56, 0.64, 7.56, 9.51]


def raw_events(path: Path) -> list[dict]:
    """The trace's events, floats as exact Decimals (never binary floats)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=Decimal)["traceEvents"]


def ns(us: int | Decimal) -> int:
    value = Decimal(us) * 1000
    assert value == value.to_integral_value(), us  # all shared traces are at most ns-resolution
    return int(value)


def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union(intervals))


def common(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """|⋃a ∩ ⋃b| by brute force over the merged lists (small traces)."""
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in union(a) for s2, e2 in union(b))


# --- DeepSeek-V3 EP64: DeepEP communication ---------------------------------------------------


def is_deepep(name: str) -> bool:
    return "dpsk::ep::" in name and "get_dispatch_layout" not in name


def is_gemm_or_attention(name: str) -> bool:
    """The trace's matrix math: DeepSeek's grouped GEMM library (CUTLASS ``GemmKernel`` plus its
    tensor-map fill kernel), cuBLAS ``sm90_xmma_gemm_*`` and FlashAttention-3 (``flash::``). The
    grouped-GEMM library's ``transpose`` is data movement, not matrix math."""
    lowered = name.lower()
    return ("gemm" in lowered and "transpose" not in lowered) or "flash" in lowered


def test_deepseek_deepep_kernels_are_comm(traces: Path) -> None:
    kernels = classify(load(traces / DEEPSEEK).kernels, default_rules())
    deepep = kernels.filter(pl.col("name").str.contains("dpsk::ep::", literal=True))
    comm = deepep.filter(pl.col("class") == "comm")
    assert set(comm["name"]) == {n for n in deepep["name"] if is_deepep(n)}
    assert {s.split("::")[3].split("<")[0] for s in comm["name"]} == {
        "dispatch", "combine", "notify_dispatch", "cached_notify"
    }  # fmt: skip
    assert len(comm) == 32 and len(kernels.filter(pl.col("class") == "comm")) == 32
    layout = deepep.filter(pl.col("name").str.contains("get_dispatch_layout"))
    assert set(layout["class"]) == {"moe_glue"}


def test_deepseek_overlap_equals_independent(traces: Path) -> None:
    path = traces / DEEPSEEK
    kernels = [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "kernel"]
    iv = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in kernels]
    comm = [(s, e) for s, e, n in iv if is_deepep(n)]
    compute = [(s, e) for s, e, n in iv if not is_deepep(n)]
    matmul = [(s, e) for s, e, n in iv if is_gemm_or_attention(n)]
    hidden = common(comm, compute)

    result = analyze(path, scope=WHOLE)
    assert len(result.gpus) == 1
    row = result.gpus.row(0, named=True)
    assert (row["pid"], row["device"], row["gpu_name"]) == (0, 0, "NVIDIA H800")  # rank 0
    assert row["kernels"] == len(kernels) == 963
    assert row["comm_ns"] == length(comm)
    assert row["hidden_ns"] == hidden
    assert row["exposed_ns"] == length(comm) - hidden
    assert row["hidden_pct"] == 100.0 * hidden / length(comm)
    assert row["comm_gemm_attn_ns"] == common(comm, matmul)
    k = classify(load(path).kernels, default_rules())
    assert set(k.filter(pl.col("class").is_in(["gemm", "attention"]))["name"]) == {
        n for *_, n in iv if is_gemm_or_attention(n)
    }  # the simple name test is exactly the rule table's GEMM/attention on this trace


# --- DLRM, 8 ranks: one file per rank ------------------------------------------------------------


@pytest.mark.parametrize("rank", range(8))
def test_dlrm_rank_file_analyses(traces: Path, rank: int) -> None:
    (path,) = sorted((traces / DLRM).glob(f"worker{rank}_*.json.gz"))
    n_kernels = sum(e.get("cat") == "kernel" for e in raw_events(path))
    trace = load(path)
    assert trace.source_format == "kineto-json"
    assert len(trace.kernels) == n_kernels
    assert trace.gpus.select("pid", "device").rows() == [(rank, rank)]  # pid = rank, dev = GPU
    assert trace.gpus["gpu_name"][0] == "Tesla V100-SXM2-32GB"
    gpus = analyze(trace, scope=WHOLE).gpus
    assert len(gpus) == 1 and gpus["kernels"][0] == n_kernels
    # one ProfilerStep per file, so HTA's dropping of the last step does not apply
    assert round(gpus["hidden_pct"][0], 2) == HTA_DLRM_PCT[rank]


def test_dlrm_runtime_and_steps(traces: Path) -> None:
    (path,) = sorted((traces / DLRM).glob("worker3_*.json.gz"))
    trace = load(path)
    pid = 3
    assert set(trace.runtime["pid"]) == {pid} and set(trace.nvtx["pid"]) == {pid}
    assert set((trace.runtime["tid"] // (1 << 24)).to_list()) == {pid}  # nsys globalTid layout
    events = raw_events(path)
    api = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    assert set((trace.runtime["tid"] % (1 << 24)).to_list()) == {e["tid"] for e in api}
    calls = {e["args"]["correlation"] for e in api}
    with_launch = [e for e in events if e.get("cat") == "kernel"]
    with_launch = [e for e in with_launch if e["args"]["correlation"] in calls]
    launched = trace.kernels.join(trace.runtime, on=["pid", "corr_id"], how="semi")
    assert len(launched) == len(with_launch) > 0  # the rest were launched before the capture
    assert analyze(trace, scope=WHOLE).iterations["step"].to_list() == [10]  # ProfilerStep#10


# --- nanosecond resolution ----------------------------------------------------------------------


def test_ns_resolution_survives(traces: Path) -> None:
    path = traces / NS_TRACE
    with gzip.open(path, "rt") as fh:
        raw_text = fh.read()
    assert re.search(r'"ts": \d+\.\d{3}[,}]', raw_text)  # the file really has float-text µs
    events = json.loads(raw_text, parse_float=Decimal)["traceEvents"]
    trace = load(path)
    for cat, table in (
        ("kernel", trace.kernels),
        ("gpu_memcpy", trace.memops.filter(pl.col("kind") == "memcpy")),
        ("cuda_runtime", trace.runtime),
    ):
        expect = sorted(
            (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
            for e in events
            if e.get("ph") == "X" and e.get("cat") == cat
        )
        got = sorted(table.select("start", "end").rows())
        assert got == expect, cat
    starts = trace.kernels["start"]
    assert (starts % 1000 != 0).sum() > len(starts) // 2  # sub-µs digits kept
    floats = [round(float(e["ts"]) * 1000) for e in events if e.get("cat") == "kernel"]
    exact = [ns(e["ts"]) for e in events if e.get("cat") == "kernel"]
    assert floats != exact  # a binary-float parse would have lost some of them


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (1694128201545123, 1694128201545123000),
        ("1694128201545123.456", 1694128201545123456),  # a double cannot hold this
        ("4458676983543.183", 4458676983543183),
        ("10.0", 10_000),
        ("0.5", 500),
        ("-0.25", -250),
        ("1.5e3", 1_500_000),
        ("0.0005", 0),  # beyond ns: round half to even
        ("0.0015", 2),
    ],
)
def test_to_ns_is_exact(text: int | str, expect: int) -> None:
    assert to_ns(text) == expect


# --- format detection and small synthetic traces -------------------------------------------------


def test_load_detects_gzip_and_plain_json(traces: Path, tmp_path: Path) -> None:
    src = traces / DEEPSEEK
    gz = tmp_path / "rank0.json.gz"
    shutil.copy(src, gz)
    plain = tmp_path / "rank0.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    renamed = tmp_path / "rank0.trace"  # content decides, not the suffix
    shutil.copy(src, renamed)
    frames = [load(p) for p in (gz, plain, renamed)]
    for t in frames:
        assert t.source_format == "kineto-json"
        assert t.kernels.equals(frames[0].kernels) and t.nvtx.equals(frames[0].nvtx)


def kineto_text(events: list[str], top: str = '"schemaVersion": 1') -> str:
    return "{" + top + ', "traceEvents": [' + ",\n".join(events) + "]}"


SYNTHETIC = [
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 77, "tid": 5,'
    ' "ts": 1000.5, "dur": 100}',
    '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 77, "tid": 5, "ts": 1001, "dur": 9}',
    '{"ph": "X", "cat": "python_function", "name": "f", "pid": 77, "tid": 5, "ts": 1001, "dur": 9}',
    '{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 77, "tid": 5,'
    ' "ts": 1002, "dur": 1, "args": {"correlation": 11}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 77, "tid": 6,'
    ' "ts": 1003, "dur": 1, "args": {"correlation": 12}}',
    '{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 1, "tid": 9,'
    ' "ts": 1010.001, "dur": 5.5, "args": {"device": 1, "stream": 9, "correlation": 11}}',
    '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 1,'
    ' "tid": 7, "ts": 1012, "dur": 2, "args": {"device": 1, "stream": 7, "correlation": 12,'
    ' "bytes": 4096}}',
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 9,'
    ' "ts": 1010, "dur": 8}',
    '{"ph": "i", "s": "t", "name": "[memory]", "pid": 77, "tid": 5, "ts": 1001, "args":'
    ' {"Device Type": 1, "Device Id": 1, "Bytes": 512, "Total Allocated": 2560}}',
    '{"ph": "i", "s": "t", "name": "[memory]", "pid": 77, "tid": 5, "ts": 1004, "args":'
    ' {"Device Type": 1, "Device Id": 1, "Bytes": -512, "Total Allocated": 2048}}',
    '{"ph": "i", "s": "t", "name": "[memory]", "pid": 77, "tid": 5, "ts": 1004, "args":'
    ' {"Device Type": 0, "Device Id": -1, "Bytes": 64, "Total Allocated": 64}}',
    '{"ph": "s", "id": 11, "pid": 77, "tid": 5, "ts": 1002, "cat": "ac2g", "name": "ac2g"}',
    '{"ph": "M", "name": "process_name", "pid": 77, "args": {"name": "python3"}}',
]


def test_synthetic_trace_rules(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(kineto_text(SYNTHETIC))
    t = load(path)
    pid = 77  # no distributedInfo: the CPU events' OS pid
    k = t.kernels.row(0, named=True)
    assert (k["pid"], k["device"], k["stream"], k["corr_id"]) == (pid, 1, 9, 11)
    assert (k["start"], k["end"]) == (1_010_001, 1_015_501)
    m = t.memops.row(0, named=True)
    assert (m["kind"], m["bytes"], m["name"]) == ("memcpy", 4096, "[CUDA memcpy HtoD]")
    assert t.runtime.sort("corr_id").select("tid", "corr_id").rows() == [
        ((pid << 24) | 5, 11),
        ((pid << 24) | 6, 12),
    ]
    assert t.nvtx.select("name", "start", "style", "domain").rows() == [
        ("ProfilerStep#3", 1_000_500, "pushpop", None),
        ("aten::mm", 1_001_000, "pushpop", None),
    ]  # no python_function, no GPU-side copy of the annotation
    assert t.dropped["gpu_user_annotation rows (GPU copies of CPU annotations)"] == 1
    assert t.memory_events.select("device", "start", "bytes").rows() == [
        (1, 1_001_000, 2560),
        (1, 1_004_000, -512),
    ]  # running sum = the allocator's Total Allocated; CPU allocations left out
    assert t.gpus.rows() == [(pid, 1, *(None,) * 7)] and "gpu_info" in t.not_captured
    assert analyze(t, scope=WHOLE).iterations["step"].to_list() == [3]


def test_rank_names_the_process(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(kineto_text(SYNTHETIC, '"distributedInfo": {"rank": 5, "world_size": 8}'))
    t = load(path)
    assert {*t.kernels["pid"], *t.runtime["pid"], *t.nvtx["pid"], *t.gpus["pid"]} == {5}
    assert set((t.runtime["tid"] // (1 << 24)).to_list()) == {5}


def test_malformed_events_are_counted_not_fatal(tmp_path: Path) -> None:
    bad = [
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 1}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1,'
        ' "args": {"device": [0], "stream": 7}}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 9, "dur": -1,'
        ' "args": {"device": 0, "stream": 7}}',
        "[1, 2]",
        '{"ph": "X", "cat": "cuda_runtime", "name": "r", "pid": 77, "tid": 5,'
        ' "ts": 99999999999999999999, "dur": 1}',  # ns beyond int64
    ]
    path = tmp_path / "t.json"
    path.write_text(kineto_text(SYNTHETIC + bad))
    t = load(path)
    # bad ts, a non-object event, ts beyond int64
    assert t.dropped["events with a malformed ts/dur/args"] == 3
    assert t.dropped["GPU rows with dur < 0"] == 1
    # a kernel on device [0] is on no device: counted and left out, as the nsys reader does
    assert len(t.kernels) == 1 and t.dropped["GPU rows without a device or process"] == 1
    assert any("malformed" in w for w in t.warnings)


# --- bad input through the CLI -------------------------------------------------------------------


def _truncated_gzip(tmp: Path) -> Path:
    out = tmp / "trace.json.gz"
    out.write_bytes(gzip.compress(kineto_text(SYNTHETIC).encode())[:60])
    return out


BAD_INPUT = {
    "invalid-json": ("trace.json", '{"traceEvents": [{"ph": "X", ', "not valid JSON"),
    "no-traceEvents": ("trace.json", '{"schemaVersion": 1, "events": []}', "traceEvents"),
    "json-array": ("trace.json", "[1, 2, 3]", "traceEvents"),
    "no-kernels": ("trace.json", kineto_text(SYNTHETIC[:5]), "no GPU kernels"),
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "nsysmoe", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def assert_cli_error(path: Path, needle: str) -> None:
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proc = run_cli("analyze", str(path))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nsysmoe: error:") and needle in lines[0], lines[0]
    assert str(path) in lines[0]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_one_line_error(tmp_path: Path, case: str) -> None:
    name, text, needle = BAD_INPUT[case]
    path = tmp_path / name
    path.write_text(text)
    assert_cli_error(path, needle)


def test_truncated_gzip_one_line_error(tmp_path: Path) -> None:
    assert_cli_error(_truncated_gzip(tmp_path), "truncated")
