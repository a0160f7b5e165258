"""Every real export in shared/traces/nsys analysed, each number checked against an independent
computation: plain SQL reads and a pure-Python interval sweep that shares no code with nsysmoe."""

from __future__ import annotations

import csv
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from nsysmoe.api import analyze, kernel_summary
from nsysmoe.model import WHOLE, Scope, Whole

NSYS_STATS = Path(__file__).parent / "data" / "nsys_stats"
EXPORTS = [
    "nersc-ddp-4gpu-baseline.sqlite",
    "nersc-ddp-4gpu-bucketcap100mb.sqlite",
    "nsysai-2gpu-before.sqlite",
    "nsysai-2gpu-after.sqlite",
    "nvfuser-h100-schema3.16.sqlite",
    "pipit-saxpy-mpi-schema2.9.sqlite",
    "pipit-cloverleaf-schema3.13.sqlite",
    "jacobi-p2p-memcpy-2gpu.sqlite",
    *(
        f"nccl-allreduce-6ranks/ault4{n}.sqlite"
        for n in (
            "3.cscs.ch_485050",
            "3.cscs.ch_485052",
            "3.cscs.ch_485055",
            "4.cscs.ch_739537",
            "4.cscs.ch_739538",
            "4.cscs.ch_739541",
        )
    ),
]


def ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def total(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merged(intervals))


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    a, b = merged(a), merged(b)
    i = j = acc = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        acc += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return acc


def clip(s: int, e: int, lo: int | None, hi: int | None) -> tuple[int, int] | None:
    """The part of [s, e) inside [lo, hi); None when outside (zero-length: start inside)."""
    lo = s if lo is None else lo
    hi = e + 1 if hi is None else hi
    if e < lo or s >= hi or (e == lo and s < lo):
        return None
    return max(s, lo), min(e, hi)


def independent(path: Path) -> dict[tuple[int, int], dict[str, int]]:
    """Per (pid, device): the issue's metrics with comm = NCCL kernels (the only comm here)."""
    return independent_window(path, None, None)


def independent_window(
    path: Path, lo: int | None, hi: int | None
) -> dict[tuple[int, int], dict[str, int]]:
    """As :func:`independent`, over the window [lo, hi) (rows clipped to it)."""
    gpu: dict[tuple[int, int], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    with ro(path) as conn:
        rows = conn.execute(
            "SELECT k.start, k.end, k.globalPid / 16777216 % 16777216, k.deviceId, s.value "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
        ).fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if t in tables:
                for s, e, pid, dev in conn.execute(
                    f"SELECT start, end, globalPid / 16777216 % 16777216, deviceId FROM {t}"
                ):
                    if e >= s and s >= 0 and (c := clip(s, e, lo, hi)):
                        gpu[(pid, dev)]["mem"].append(c)
    for s, e, pid, dev, name in rows:
        if e < s or s < 0 or not (c := clip(s, e, lo, hi)):
            continue
        s, e = c
        key = "comm" if name.startswith("nccl") else "compute"
        gpu[(pid, dev)][key].append((s, e))
        # GEMM/attention here: cuBLAS/CUTLASS GEMMs, FlashAttention, and cuDNN's convolutions
        # (nersc: xmma_cudnn implicit GEMM, convolveNd_dgrad / wgrad_alg1 engines), matrix math
        is_gemm = "gemm" in name.lower() or "convolve" in name.lower() or "grad_alg" in name
        if is_gemm or name.startswith(("nvjet", "flash")):
            gpu[(pid, dev)]["gemm_attn"].append((s, e))
    out = {}
    for key, d in gpu.items():
        work = d["comm"] + d["compute"] + d["mem"]
        span = max(e for _, e in work) - min(s for s, _ in work)
        active = total(work)
        hidden = overlap(d["comm"], d["compute"])
        out[key] = {
            "kernels": len(d["comm"]) + len(d["compute"]),
            "span_ns": span,
            "active_ns": active,
            "idle_ns": span - active,
            "comm_ns": total(d["comm"]),
            "compute_ns": total(d["compute"]),
            "hidden_ns": hidden,
            "exposed_ns": total(d["comm"]) - hidden,
            "comm_gemm_attn_ns": overlap(d["comm"], d["gemm_attn"]),
        }
    return out


@pytest.mark.parametrize("name", EXPORTS)
def test_metrics_equal_independent_computation(traces: Path, name: str) -> None:
    path = traces / "nsys" / name
    result = analyze(path, scope=WHOLE)
    expected = independent(path)
    got = {(r["pid"], r["device"]): r for r in result.gpus.iter_rows(named=True)}
    assert set(got) == set(expected)
    for key, exp in expected.items():
        for metric, value in exp.items():
            assert got[key][metric] == value, (key, metric)
        comm, hidden = exp["comm_ns"], exp["hidden_ns"]
        want_pct = 100 * hidden / comm if comm else None
        assert got[key]["hidden_pct"] == pytest.approx(want_pct)


def test_nersc_baseline_matches_peer(traces: Path) -> None:
    """nsys-ai reports 86.5 % of NCCL overlapped, 184 NCCL and 6,658 compute kernels."""
    result = analyze(traces / "nsys" / "nersc-ddp-4gpu-baseline.sqlite", scope=WHOLE)
    (row,) = result.gpus.iter_rows(named=True)
    assert round(row["hidden_pct"], 1) == 86.5
    classes = {r["class"]: r for r in result.classes.iter_rows(named=True)}
    assert classes["comm"]["count"] == 184
    assert row["kernels"] - classes["comm"]["count"] == 6658


def test_nsysai_two_processes_one_row_per_gpu_nothing_hidden(traces: Path) -> None:
    for side in ("before", "after"):
        result = analyze(traces / "nsys" / f"nsysai-2gpu-{side}.sqlite", scope=WHOLE)
        rows = result.gpus.rows(named=True)
        assert len(rows) == 2 and len({r["pid"] for r in rows}) == 2
        for r in rows:
            assert r["comm_ns"] > 0 and r["hidden_ns"] == 0 and r["hidden_pct"] == 0.0


def read_nsys_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


NVTXSUM = sorted(NSYS_STATS.glob("*__nvtxsum*.csv"))


@pytest.mark.parametrize("csv_path", NVTXSUM, ids=lambda p: p.name)
def test_nvtx_totals_equal_nsys_stats_nvtxsum(traces: Path, csv_path: Path) -> None:
    """nsys 2022.4.2 `nsys stats --report nvtxsum` output, recorded in tests/data/nsys_stats."""
    stem = csv_path.name.split("__")[0]
    path = next((traces / "nsys").rglob(f"{stem}.sqlite"))
    # nsys keeps ", op_id = N" names
    raw = analyze(path, scope=Scope(window=Whole(), raw_nvtx=True)).nvtx
    ours = {(r["name"], r["style"]): r for r in raw.iter_rows(named=True)}
    rows = read_nsys_csv(csv_path)
    assert rows
    for row in rows:
        key = (row["Range"], {"PushPop": "pushpop", "StartEnd": "startend"}[row["Style"]])
        assert key in ours, key
        assert ours[key]["count"] == int(row["Instances"]), key
        assert ours[key]["total_ns"] == int(row["Total Time (ns)"]), key
        assert ours[key]["min_ns"] == int(row["Min (ns)"]), key
        assert ours[key]["max_ns"] == int(row["Max (ns)"]), key
    if "trimmed" not in csv_path.name:
        assert len(ours) == len(rows)


GPUKERNSUM = sorted(NSYS_STATS.glob("*__gpukernsum.csv"))


@pytest.mark.parametrize("csv_path", GPUKERNSUM, ids=lambda p: p.name)
def test_kernel_totals_equal_nsys_stats_gpukernsum(traces: Path, csv_path: Path) -> None:
    """gpukernsum groups by name and grid/block; we group by name, so add its rows up."""
    stem = csv_path.name.split("__")[0]
    path = next((traces / "nsys").rglob(f"{stem}.sqlite"))
    expected: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in read_nsys_csv(csv_path):
        expected[row["Name"]][0] += int(row["Total Time (ns)"])
        expected[row["Name"]][1] += int(row["Instances"])
    ours = {
        r["name"]: [r["sum_ns"], r["count"]] for r in kernel_summary(path).iter_rows(named=True)
    }
    assert ours == dict(expected)


def test_nvtx_names_normalised_by_default(traces: Path) -> None:
    """PyTorch emit_nvtx names every call `aten::x, op_id = N`: by default those collapse into
    one row per op, with counts and totals that add up to the raw rows."""
    path = traces / "nsys" / "nsysai-2gpu-before.sqlite"
    raw = analyze(path, scope=Scope(window=Whole(), raw_nvtx=True)).nvtx
    norm = analyze(path, scope=WHOLE).nvtx
    assert len(norm) < len(raw) / 10
    assert not norm["name"].str.contains("op_id = ").any()
    assert (norm["count"].sum(), norm["total_ns"].sum()) == (
        raw["count"].sum(),
        raw["total_ns"].sum(),
    )
