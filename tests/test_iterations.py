"""Vectorised per-iteration metrics equal measuring each window on its own (per_gpu)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.measure.iterations import iteration_metrics
from nsysmoe.measure.overlap import Window, per_gpu
from nsysmoe.model import KERNEL_SCHEMA, MEMOP_SCHEMA

CLASSES = ("comm", "gemm", "other")
interval = st.tuples(st.integers(0, 1), st.integers(0, 60), st.integers(0, 25))


def frames(kernels, copies) -> tuple[pl.DataFrame, pl.DataFrame]:  # noqa: ANN001
    k = pl.DataFrame(
        [{"pid": 1, "device": d, "stream": 0, "start": s, "end": s + n, "corr_id": None,
          "name": c, "short_name": c} for (d, s, n), c in kernels],
        schema=KERNEL_SCHEMA,
    ).with_columns(pl.col("name").alias("class"))  # fmt: skip
    m = pl.DataFrame(
        [{"pid": 1, "device": d, "stream": 0, "start": s, "end": s + n, "corr_id": None,
          "kind": "memcpy", "bytes": 1, "name": "copy"} for d, s, n in copies],
        schema=MEMOP_SCHEMA,
    )  # fmt: skip
    return k, m


@given(
    st.lists(st.tuples(interval, st.sampled_from(CLASSES)), max_size=25),
    st.lists(interval, max_size=5),
    st.lists(st.integers(1, 20), min_size=1, max_size=5),
    st.integers(0, 10),
)
@settings(max_examples=300, deadline=None)
def test_iteration_metrics_equal_per_window(kernels, copies, widths, first) -> None:  # noqa: ANN001
    k, m = frames(kernels, copies)
    bounds = [first]
    for w in widths:
        bounds.append(bounds[-1] + w)
    windows = [Window(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
    got = iteration_metrics(k, m, windows)
    for i, w in enumerate(windows):
        gpus, _ = per_gpu(k, m, w)
        row = got.row(i, named=True)
        assert row["comm_ns"] == gpus["comm_ns"].sum(), i
        assert row["hidden_ns"] == gpus["hidden_ns"].sum(), i
        assert row["idle_ns"] == gpus["idle_ns"].sum(), i
