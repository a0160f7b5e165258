"""NVTX projection edge cases with every figure worked out by hand: the per-class split when a
kernel has no class, ranges whose cross-thread flag is unknown, and the order of the totals."""

from __future__ import annotations

import polars as pl

from nsysmoe.measure.projection import (
    CLASS_SCHEMA,
    PROJECTION_SCHEMA,
    TOTALS_SCHEMA,
    project_nvtx,
    projected_totals,
)
from nsysmoe.model import MEMOP_SCHEMA, NVTX_SCHEMA, RUNTIME_SCHEMA
from tests.fixtures.frames import kernel_frame

P, T = 7, (7 << 24) | 1


def frames() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """One thread: step [0,100] ⊃ fwd [10,40], bwd [50,90] (cross_thread unknown), and a
    cross-thread range xt [0,100]; four API calls launch four kernels and one memcpy."""
    nvtx = pl.DataFrame(
        [
            (P, T, 0, 100, "step", None, "pushpop", False),
            (P, T, 10, 40, "fwd", None, "pushpop", False),
            (P, T, 50, 90, "bwd", None, "startend", None),  # null flag: same thread
            (P, T, 0, 100, "xt", None, "startend", True),  # ended elsewhere: never projected
        ],
        schema=NVTX_SCHEMA,
        orient="row",
    )
    runtime = pl.DataFrame(
        [(P, T, 12, 14, 1, None), (P, T, 20, 22, 2, None), (P, T, 60, 62, 3, None),
         (P, T, 70, 72, 4, None)],
        schema=RUNTIME_SCHEMA,
        orient="row",
    )
    kernels = kernel_frame(
        [
            (P, 0, 1, 1000, 1100, 1, "nccl", "nccl", None, None, "comm"),
            (P, 0, 2, 1050, 1200, 2, "gemm", "gemm", None, None, "gemm"),
            # no class: compute, not comm
            (P, 0, 2, 1300, 1400, 3, "mystery", "mystery", None, None, None),
            (P, 0, 1, 1350, 1500, 4, "nccl", "nccl", None, None, "comm"),
        ],
        {"class": pl.String},
    )
    memops = pl.DataFrame(
        [(P, 0, 3, 1210, 1220, 2, "memcpy", 64, "[CUDA memcpy DtoD]")],  # launched by call 2
        schema=MEMOP_SCHEMA,
        orient="row",
    )
    return nvtx, kernels, memops, runtime


def test_projection_by_hand_with_a_null_class_and_a_null_cross_thread_flag() -> None:
    out = project_nvtx(*frames())
    assert out.columns == list(PROJECTION_SCHEMA | CLASS_SCHEMA)
    cols = ["range_id", "name", "style", "cpu_start_ns", "cpu_end_ns", "gpu_start_ns",
            "gpu_end_ns", "gpu_ops", "kernels", "api_calls", "busy_ns", "comm_ns", "compute_ns",
            "hidden_ns"]  # fmt: skip
    # step: busy [1000,1200) + [1210,1220) + [1300,1500) = 410; comm [1000,1100) + [1350,1500)
    #   = 250; compute [1050,1200) + [1300,1400) = 250; hidden [1050,1100) + [1350,1400) = 100
    # fwd: calls 1-2: busy 200 + 10; comm 100, compute 150, hidden [1050,1100) = 50
    # bwd: calls 3-4: busy [1300,1500) = 200; comm 150, compute 100 (the null class), hidden 50
    assert out.select(cols).rows() == [
        (0, "step", "pushpop", 0, 100, 1000, 1500, 5, 4, 4, 410, 250, 250, 100),
        (1, "fwd", "pushpop", 10, 40, 1000, 1220, 3, 2, 2, 210, 100, 150, 50),
        (2, "bwd", "startend", 50, 90, 1300, 1500, 2, 2, 2, 200, 150, 100, 50),
    ]
    assert out["pid"].to_list() == [P] * 3 and out["tid"].to_list() == [T] * 3


def test_without_a_class_column_only_the_plain_columns() -> None:
    nvtx, kernels, memops, runtime = frames()
    out = project_nvtx(nvtx, kernels.drop("class"), memops, runtime)
    assert out.columns == list(PROJECTION_SCHEMA)
    assert out["busy_ns"].to_list() == [410, 210, 200]


def projected(rows: list[tuple[str, str, int, int, int, int, int]]) -> pl.DataFrame:
    """(name, style, gpu_start, gpu_end, busy, kernels, comm_ns) rows of a projection."""
    return pl.DataFrame(
        rows,
        schema=["name", "style", "gpu_start_ns", "gpu_end_ns", "busy_ns", "kernels", "comm_ns"],
        orient="row",
    )


def test_totals_sort_by_busy_then_name_then_style() -> None:
    table = projected(
        [
            ("b", "pushpop", 0, 30, 10, 1, 5),
            ("a", "startend", 0, 40, 10, 2, 0),
            ("c", "pushpop", 0, 90, 50, 3, 7),
            ("a", "pushpop", 5, 25, 4, 1, 1),
            ("a", "pushpop", 100, 110, 6, 1, 2),
            ("b", "startend", 0, 10, 9, 1, 0),
        ]
    )
    got = projected_totals(table)
    assert got.columns == [*TOTALS_SCHEMA, "comm_ns"]
    # busy ties at 10 between a/pushpop (4 + 6), a/startend and b/pushpop: name, then style
    assert got.rows() == [
        ("c", "pushpop", 1, 90, 50, 3, 7),
        ("a", "pushpop", 2, 20 + 10, 10, 2, 3),
        ("a", "startend", 1, 40, 10, 2, 0),
        ("b", "pushpop", 1, 30, 10, 1, 5),
        ("b", "startend", 1, 10, 9, 1, 0),
    ]
    assert all(got.schema[c] == pl.Int64 for c in ("count", "gpu_span_total_ns", "comm_ns"))


def test_totals_of_nothing_keep_the_class_columns() -> None:
    empty = projected_totals(projected([]))
    assert empty.is_empty() and empty.columns == [*TOTALS_SCHEMA, "comm_ns"]
    assert projected_totals(project_nvtx(*frames())).rows() == [
        ("step", "pushpop", 1, 500, 410, 4, 250, 250, 100),
        ("fwd", "pushpop", 1, 220, 210, 2, 100, 150, 50),
        ("bwd", "startend", 1, 200, 200, 2, 150, 100, 50),
    ]
