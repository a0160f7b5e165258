"""The launch shape every reader gives each kernel (blocks, threads per block, registers per
thread, shared memory per block) and each GPU's SM count and per-SM limits — the SM budget's
inputs — from the columns nsys writes (every schema from 2.9.1 on) and Kineto's args; values no
launch has (negative, past CUDA's limits, not numbers) read as unknown, never as a wrapped
product."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nsysmoe.io import load_trace
from tests.fixtures.columnar import to_columnar
from tests.fixtures.generate import write_export
from tests.fixtures.spec import ExportSpec, GpuInfo, Kernel, LaunchConfig, Process

P = 1001
SHAPES = {
    "grouped": (LaunchConfig(grid=(2, 56, 1), block=(384, 1, 1), registers=168,
                             static_smem=1024, dynamic_smem=202752), (112, 384, 168, 203776)),
    "dispatch": (LaunchConfig(grid=(20, 1, 1), block=(32, 16, 1), registers=113,
                              dynamic_smem=332), (20, 512, 113, 332)),
    "widest": (LaunchConfig(grid=(2**31 - 1, 65535, 65535), block=(1024, 1, 1)),
               ((2**31 - 1) * 65535 * 65535, 1024, 64, 0)),
    "negative": (LaunchConfig(grid=(-1, 1, 1), block=(1, -4, 1), registers=-3),
                 (None, None, None, 0)),
    "too_big": (LaunchConfig(grid=(1, 65536, 1), block=(2**31 - 1, 2, 1),
                             static_smem=2**31 - 1, dynamic_smem=1), (None, None, 64, None)),
    # 2^30 · 2^30 · 16 = 2^64 wraps to 0 in 64-bit integers: a block of no threads, not unknown
    "wraps": (LaunchConfig(grid=(1, 1, 1), block=(2**30, 2**30, 16)), (1, None, 64, 0)),
    "largest_block": (LaunchConfig(grid=(1, 1, 1), block=(2**31 - 1, 1, 1)),
                      (1, 2**31 - 1, 64, 0)),
}  # fmt: skip


def export(folder: Path, ddl: str) -> Path:
    kernels = [Kernel(P, 0, 7, 10 * i, 10 * i + 5, name, name, None, None, None, None,
                      launch=cfg) for i, (name, (cfg, _)) in enumerate(SHAPES.items())]  # fmt: skip
    spec = ExportSpec("shapes", processes=[Process(P, "python3", ((P, "python3"),), (0,))],
                      gpus=[GpuInfo(0, sm_count=108)], kernels=kernels)  # fmt: skip
    return write_export(folder / "shapes.sqlite", spec, ddl)


@pytest.mark.parametrize("ddl", ["2.9.1", "3.13.2"])
def test_each_kernel_reads_its_launch_shape_and_each_gpu_its_limits(tmp_path: Path, ddl: str
                                                                    ) -> None:  # fmt: skip
    path = export(tmp_path, ddl)
    for trace in (load_trace(path), load_trace(to_columnar(path, tmp_path / "shapes_pqtdir"))):
        got = {r[0]: r[1:] for r in trace.kernels.select(
            "name", "blocks", "threads", "registers", "shared_bytes").iter_rows()}  # fmt: skip
        assert got == {name: want for name, (_, want) in SHAPES.items()}
        gpu = trace.gpus.row(0, named=True)
        assert (gpu["sm_count"], gpu["max_threads_per_sm"], gpu["max_blocks_per_sm"],
                gpu["registers_per_sm"], gpu["shared_bytes_per_sm"]) == (
            108, 64 * 32, 32, 65536, 233472)  # the fixture's H100 limits  # fmt: skip


def test_kineto_args_give_the_shape_and_device_properties_the_limits(tmp_path: Path) -> None:
    def kernel(ts: int, args: dict) -> dict:
        return {"ph": "X", "cat": "kernel", "name": f"k{ts}", "pid": 0, "tid": 7, "ts": ts,
                "dur": 1, "args": {"device": 0, "stream": 7, "correlation": ts, **args}}

    events = [
        kernel(1, {"grid": [2, 56, 1], "block": [384, 1, 1], "registers per thread": 168,
                   "shared memory": 203776}),
        kernel(2, {"grid": [20, 1, 1], "block": [512, 1, 1]}),  # no registers, no shared
        kernel(3, {"grid": "20", "block": [1, 2], "registers per thread": 1.5,
                   "shared memory": -1}),  # not a launch's
        kernel(4, {"grid": [2**31, 1, 1], "block": [True, 1, 1]}),
    ]  # fmt: skip
    props = [{"id": 0, "name": "NVIDIA H800", "numSms": 132, "maxThreadsPerMultiprocessor": 2048,
              "regsPerMultiprocessor": 65536, "sharedMemPerMultiprocessor": 233472}]  # fmt: skip
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}, fh)
    trace = load_trace(path)
    got = trace.kernels.sort("start").select("blocks", "threads", "registers",
                                             "shared_bytes").rows()  # fmt: skip
    assert got == [(112, 384, 168, 203776), (20, 512, None, None), (None, None, None, None),
                   (None, None, None, None)]  # fmt: skip
    gpu = trace.gpus.row(0, named=True)
    assert (gpu["sm_count"], gpu["max_threads_per_sm"], gpu["max_blocks_per_sm"],
            gpu["registers_per_sm"], gpu["shared_bytes_per_sm"]) == (
        132, 2048, None, 65536, 233472)  # fmt: skip
