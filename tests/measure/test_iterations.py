"""Vectorised per-iteration metrics equal measuring each window on its own (per_gpu); an
iteration's idle time is its window length minus each GPU's active time."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.measure.iterations import iteration_metrics
from nsysmoe.measure.overlap import per_gpu
from nsysmoe.model import KERNEL_SCHEMA, MEMOP_SCHEMA, Iterations, Window
from tests.fixtures.frames import kernel_frame

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
@settings(max_examples=200, deadline=None)
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
        length = w.end_ns - w.start_ns
        assert row["idle_ns"] == sum(length - a for a in gpus["active_ns"]), i


def test_skewed_processes_are_not_counted_twice() -> None:
    """Two ranks in one export, the second half a step late: each rank's kernels count in its
    own iterations only, so the iterations add up to the window (review finding)."""
    from nsysmoe import model
    from nsysmoe.model import Scope, Trace
    from nsysmoe.pipeline import analyze_trace, prepare

    kernels, runtime, nvtx = [], [], []
    for pid, lag in ((1, 0), (2, 50)):
        for step in (1, 2, 3):
            g0 = 1000 + lag + (step - 1) * 100
            kernels.append((pid, 0, 7, g0, g0 + 90, step, "ncclDevKernel_AllReduce", "x", None,
                            None))  # fmt: skip
            runtime.append((pid, (pid << 24) | 1, 10 * step, 10 * step + 1, step, None))
            nvtx.append((pid, (pid << 24) | 1, 10 * step - 5, 10 * step + 5, f"step {step}",
                         None, "pushpop", False))  # fmt: skip
    trace = Trace(
        path="synthetic", source_format="nsys-sqlite", schema_version=None, product_version=None,
        kernels=kernel_frame(kernels),
        memops=model.empty(model.MEMOP_SCHEMA),
        runtime=pl.DataFrame(runtime, schema=model.RUNTIME_SCHEMA, orient="row"),
        nvtx=pl.DataFrame(nvtx, schema=model.NVTX_SCHEMA, orient="row"),
        gpus=model.empty(model.GPU_SCHEMA), memory_events=model.empty(model.MEMORY_EVENT_SCHEMA),
    )  # fmt: skip
    result = analyze_trace(prepare(trace), scope=Scope(window=Iterations(skip=0)))
    assert result.iterations["comm_ns"].to_list() == [180, 180, 180]
    assert result.iterations["comm_ns"].sum() == result.gpus["comm_ns"].sum() == 540
