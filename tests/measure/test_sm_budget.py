"""The SM budget (nsysmoe.measure.sm_budget) against brute force: the SMs communication holds
over time from the elementary segments between every start and end, the most it held beside
each compute kernel, the occupancy bound in plain integers; and on the real traces, the figures
of issue 38 against an independent count from the trace files."""

from __future__ import annotations

import gzip
import json
import math
import sqlite3
from contextlib import closing

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.classify import classify_trace, default_rules
from nsysmoe.io import load_trace
from nsysmoe.measure.sm_budget import channel_budget, gpu_share, sm_budget, with_sms
from nsysmoe.model import WHOLE_TRACE, Window
from tests.conftest import require_shared

KERNEL = {"pid": pl.Int64, "device": pl.Int64, "start": pl.Int64, "end": pl.Int64,
          "name": pl.String, "class": pl.String, "channel": pl.String, "blocks": pl.Int64,
          "threads": pl.Int32, "registers": pl.Int32, "shared_bytes": pl.Int32}  # fmt: skip
H100 = {"pid": 1, "device": 0, "sm_count": 132, "max_threads_per_sm": 2048,
        "max_blocks_per_sm": 32, "registers_per_sm": 65536,
        "shared_bytes_per_sm": 233472}  # fmt: skip

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 25), st.integers(1, 200)),
                 max_size=12)  # fmt: skip


def kernels(comm: list[tuple[int, int, int]], compute: list[tuple[int, int, int]]
            ) -> pl.DataFrame:  # fmt: skip
    rows = [(1, 0, s, s + d, "nccl", "comm", "nccl.allreduce", b, 256, 32, 0)
            for s, d, b in comm]  # fmt: skip
    rows += [(1, 0, s, s + d, f"gemm{b}", "gemm", None, b, 256, 32, 0) for s, d, b in compute]
    return pl.DataFrame(rows, schema=KERNEL, orient="row")


def segments(comm: list[tuple[int, int, int]], sms: int) -> list[tuple[int, int, int]]:
    """(lo, hi, SMs held, clipped) of every elementary segment between two event times."""
    times = sorted({t for s, d, _ in comm for t in (s, s + d)})
    out = []
    for lo, hi in zip(times, times[1:], strict=False):
        level = sum(min(b, sms) for s, d, b in comm if s <= lo and hi <= s + d)
        out.append((lo, hi, min(level, sms)))
    return out


@settings(max_examples=300, deadline=None)
@given(spans, spans, st.integers(1, 140))
def test_share_and_beside_equal_brute_force(comm: list, compute: list, sms: int) -> None:
    df = with_sms(kernels(comm, compute), pl.DataFrame([H100 | {"sm_count": sms}]))
    k = df.filter(pl.col("class") != "comm")
    row, b = gpu_share(df.filter(pl.col("class") == "comm"), k["start"].to_numpy(),
                       k["end"].to_numpy(), sms, 100)  # fmt: skip
    beside = k[b.at].with_columns(pl.Series("beside_ns", b.beside_ns),
                                  pl.Series("comm_sms", b.comm_sms, dtype=pl.Int64))  # fmt: skip
    segs = segments(comm, sms)
    covered = sum(hi - lo for lo, hi, _ in segs if any(
        s <= lo and hi <= s + d for s, d, _ in comm))  # fmt: skip
    area = sum((hi - lo) * level for lo, hi, level in segs)
    assert row["comm_ns"] == covered
    if covered:
        assert row["comm_sms_avg"] == pytest.approx(area / covered, rel=1e-12)
        assert row["comm_sm_pct"] == pytest.approx(100 * area / (sms * 100), rel=1e-12)
    want = []
    for s, d, b in compute:
        meets = [(lo, hi, level) for lo, hi, level in segs if lo < s + d and s < hi and any(
            cs <= lo and hi <= cs + cd for cs, cd, _ in comm)]  # fmt: skip
        if meets:
            under = sum(min(hi, s + d) - max(lo, s) for lo, hi, _ in meets)
            want.append((s, s + d, b, max(level for *_, level in meets), under))
    got = beside.select("start", "end", "blocks", "comm_sms", "beside_ns").rows()
    assert sorted(got) == sorted(want)


@given(st.integers(1, 1024), st.integers(0, 255), st.integers(0, 230_000), st.integers(1, 2000))
def test_occupancy_bound_in_plain_integers(threads: int, regs: int, smem: int, blocks: int
                                           ) -> None:  # fmt: skip
    df = pl.DataFrame([(1, 0, 0, 1, "k", "comm", "x", blocks, threads, regs, smem)],
                      schema=KERNEL, orient="row")  # fmt: skip
    got = with_sms(df, pl.DataFrame([H100])).row(0, named=True)
    fit = min(32, 2048 // threads, 65536 // (regs * threads) if regs else 32,
              233472 // smem if smem else 32)  # fmt: skip
    fit = max(fit, 1)
    assert got["sms_held"] == min(blocks, 132)
    assert got["sms_min"] == math.ceil(min(blocks, 132 * fit) / fit)
    assert got["sms_min"] <= got["sms_held"]


def test_no_occupancy_limit_known_leaves_the_lower_bound_unknown() -> None:
    df = pl.DataFrame([(1, 0, 0, 1, "k", "comm", "x", 500, 256, 32, 0)], schema=KERNEL,
                      orient="row")  # fmt: skip
    limits = {k: None for k in ("max_threads_per_sm", "max_blocks_per_sm", "registers_per_sm",
                                "shared_bytes_per_sm")}  # fmt: skip
    row = with_sms(df, pl.DataFrame([H100 | limits])).row(0, named=True)
    assert (row["sms_held"], row["sms_min"]) == (132, None)


def test_a_half_open_window_shares_sm_time_over_the_gpus_span_in_it() -> None:
    """``--window 2s:`` leaves the far bound open: the share is of the GPU's own span in the
    window, not of 2^63 ns."""
    df = kernels([(100, 50, 20)], [(120, 80, 112)])
    _, share, _ = sm_budget(df, pl.DataFrame([H100]), Window(110, None))
    row = share.row(0, named=True)
    assert row["comm_ns"] == 40 and row["comm_sm_pct"] == pytest.approx(100 * 20 * 40 / (132 * 90))


def test_a_grid_nobody_knows_is_said_as_such_and_the_report_still_renders() -> None:
    from nsysmoe.renderers.report.sm_budget import held_phrase, sm_lines
    from nsysmoe.results import SmBudget

    df = kernels([(0, 10, 24), (20, 10, 24), (40, 10, 24)], [(5, 10, 112)])
    df = df.with_columns(pl.when(pl.col("start") >= 20).then(None).otherwise("blocks")
                         .alias("blocks"))  # fmt: skip
    df = df.with_columns(pl.col("blocks").cast(pl.Int64))
    budget, share, beside = sm_budget(df, pl.DataFrame([H100]), WHOLE_TRACE)
    row = budget.row(0, named=True)
    assert (row["blocks"], row["sms_held"], row["sm_count"]) == (24, 24, 132)
    assert share["comm_sms_avg"].to_list() == [None]  # a grid unknown: the share is too
    nulls = budget.with_columns(pl.lit(None, pl.Int64).alias("sms_held"))
    assert held_phrase(nulls) == "nccl.allreduce: grid unknown"
    no_grid = beside.with_columns(pl.lit(None, pl.Int64).alias("blocks"))
    assert sm_lines(SmBudget(budget, share, no_grid, pl.DataFrame()))


def test_the_most_common_block_count_names_the_channel_ties_to_the_larger() -> None:
    comm = [(0, 1, 20), (2, 1, 20), (4, 1, 9), (6, 1, 9), (8, 1, 24)]
    df = with_sms(kernels(comm, []), pl.DataFrame([H100]))
    row = channel_budget(df).row(0, named=True)
    assert (row["blocks"], row["blocks_min"], row["blocks_max"], row["launch_shapes"],
            row["sms_held"], row["count"]) == (20, 9, 24, 3, 20, 5)  # fmt: skip


def test_unknown_sm_count_leaves_the_share_unknown_not_zero() -> None:
    gpus = pl.DataFrame([H100 | {"sm_count": None}])
    _, share, beside = sm_budget(kernels([(0, 10, 20)], [(5, 10, 100)]), gpus, WHOLE_TRACE)
    assert share["comm_sms_avg"].to_list() == [None]
    assert share["comm_ns"].to_list() == [10]
    assert beside["comm_sms"].to_list() == [None]


def test_kernels_are_clipped_to_the_window() -> None:
    df = kernels([(0, 100, 20)], [(50, 100, 112)])
    budget, share, beside = sm_budget(df, pl.DataFrame([H100]), Window(40, 80))
    assert share.row(0, named=True)["comm_ns"] == 40
    assert share.row(0, named=True)["comm_sm_pct"] == pytest.approx(100 * 20 / 132)
    assert beside.row(0, named=True)["beside_ns"] == 30
    assert budget["count"].to_list() == [1]


def shared_trace(relative: str) -> str:
    return str(require_shared() / relative)


def analysed(path: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    trace = load_trace(path)
    return sm_budget(classify_trace(trace, default_rules()).kernels, trace.gpus, WHOLE_TRACE)


#: DeepSeek's FP8 grouped GEMMs (CUTLASS device kernels), not its transpose helpers
GROUPED_GEMM = "cutlass::device_kernel<dpsk::grouped_gemm"


def test_deepseek_v3_dispatch_and_combine_hold_20_of_132_sms_beside_112_block_gemms() -> None:
    """Issue 38: every DeepEP internode dispatch and combine launches 20 blocks on a 132-SM
    H800, and the grouped GEMMs beside them 112 = 132 − 20 — counted again from the JSON."""
    path = shared_trace("kineto/deepseek-v3-ep64-train/rank0.json.gz")
    with gzip.open(path) as fh:
        doc = json.load(fh)
    sms = {p["numSms"] for p in doc["deviceProperties"]}
    blocks: dict[str, set[int]] = {"dispatch": set(), "combine": set()}
    gemm: set[int] = set()
    for ev in doc["traceEvents"]:
        if ev.get("cat") != "kernel":
            continue
        grid = ev["args"]["grid"]
        n = grid[0] * grid[1] * grid[2]
        for op in blocks:
            if f"internode::{op}<" in ev["name"]:
                blocks[op].add(n)
        if GROUPED_GEMM in ev["name"]:
            gemm.add(n)
    assert sms == {132} and blocks == {"dispatch": {20}, "combine": {20}} and gemm == {112}
    budget, share, beside = analysed(path)
    held = {r["channel"]: (r["sms_held"], r["sm_count"]) for r in budget.iter_rows(named=True)}
    assert held["ep.dispatch"] == held["ep.combine"] == (20, 132)
    gemms = beside.filter(pl.col("name").str.contains(GROUPED_GEMM, literal=True)
                          & (pl.col("comm_sms") == 20))  # fmt: skip
    assert gemms["class"].unique().to_list() == ["gemm"]
    assert set(gemms["blocks"]) == {112} and set(gemms["sms_left"]) == {112}


def test_nersc_ddp_allreduce_holds_24_of_108_sms() -> None:
    path = shared_trace("nsys/nersc-ddp-4gpu-baseline.sqlite")
    with closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as db:
        grids = db.execute(
            "SELECT DISTINCT gridX * gridY * gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
            "StringIds s ON s.id = k.demangledName WHERE s.value LIKE 'ncclKernel_AllReduce%'"
        ).fetchall()
        sms = db.execute("SELECT DISTINCT smCount FROM TARGET_INFO_GPU").fetchall()
    assert grids == [(24,)] and sms == [(108,)]
    budget, share, _ = analysed(path)
    row = budget.row(0, named=True)
    assert (row["channel"], row["sms_held"], row["sm_count"], row["count"]) == (
        "nccl.allreduce", 24, 108, 184)
    assert share.row(0, named=True)["comm_sms_avg"] == 24.0


def test_an_export_without_gpu_info_knows_the_blocks_not_the_sms() -> None:
    """nsys-ai's fixture (a newer schema without TARGET_INFO_GPU, GpuInfo "{}"): its SendRecv
    kernels launch 32 blocks; the SM count is unknown, and said so."""
    path = shared_trace("nsys/nsysai-2gpu-before.sqlite")
    trace = load_trace(path)
    assert "SM count unknown" in trace.not_captured["gpu_info"]
    budget, share, _ = sm_budget(classify_trace(trace, default_rules()).kernels, trace.gpus,
                                 WHOLE_TRACE)  # fmt: skip
    assert set(budget["blocks"]) == {32}
    assert budget["sms_held"].null_count() == len(budget) == budget["sm_count"].null_count()
    assert share["comm_sms_avg"].null_count() == len(share)


def test_kernels_of_another_gpu_never_count_as_beside() -> None:
    """GPUs are told apart by (pid, device) itself: a device id past 2^20 (hostile input) does
    not alias another process's GPU."""
    df = kernels([(0, 100, 20)], [(10, 50, 112)])
    df = df.with_columns(pl.when(pl.col("class") == "comm").then(0).otherwise(1).alias("pid"),
                         pl.when(pl.col("class") == "comm").then(1 << 20).otherwise(0)
                         .alias("device"))  # fmt: skip
    gpus = pl.DataFrame([H100 | {"pid": 0, "device": 1 << 20}, H100 | {"pid": 1, "device": 0}])
    _, _, beside = sm_budget(df, gpus, WHOLE_TRACE)
    assert beside.is_empty()
    from nsysmoe.measure.inflation import states

    assert states(df, WHOLE_TRACE)["state"].to_list() == [0]  # alone on its own GPU
