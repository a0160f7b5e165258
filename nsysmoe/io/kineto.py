"""Reader for PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, into the canonical tables.

One file is one process (what ``torch.profiler`` writes per rank); several ranks are several files.
Rules, and why:

* **pid** — Kineto sets a GPU event's ``pid`` to its device index and a CPU event's to the OS
  process id, so neither names the process alone. Every row gets one canonical pid: the rank from
  ``distributedInfo.rank`` (stable across runs, so A/B reports line up), else the most common OS
  pid of the CPU events, else 0. ``device`` = ``args.device`` (fallback: the event's pid),
  ``stream`` = ``args.stream`` (fallback: its tid), ``corr_id`` = ``args.correlation``.
* **tid** — ``(pid << 24) | (tid & 0xFFFFFF)``, nsys' globalTid layout, so threads of different
  processes never collide and ``pid`` is recoverable the same way (Linux tids stay below 2^22).
* **time** — ``ts``/``dur`` are µs in every Chrome trace (``displayTimeUnit`` only sets the viewer's
  unit, ``baseTimeNanoseconds`` is not added: all events share ``ts``'s clock). Newer Kineto writes
  ns-resolution floats (``4458676983543.183``); at Unix-epoch µs (1.7e15) a double is 0.25 µs
  apart, so floats are never built: the JSON parser hands float *text* over (``parse_float=str``)
  and :func:`to_ns` shifts the decimal point exactly (beyond-ns digits round half to even).
  ``end = start + dur`` so durations are exact too.
* **NVTX equivalents** — ``user_annotation`` (``record_function``, ``ProfilerStep#N``) and
  ``cpu_op`` (aten ops) become push/pop ranges in the default domain, as ``emit_nvtx`` would record
  them under nsys, so step detection, CPU totals and GPU projection work unchanged.
  ``gpu_user_annotation`` rows are GPU-side copies of annotations: left out (counted in
  ``dropped``) so CPU totals are not doubled. ``python_function`` (with_stack) rows are left out.
* **CUDA API** — ``cuda_runtime`` and ``cuda_driver`` rows (``cuLaunchKernel`` launches kernels).
* **CUDA graphs** — Kineto records a replay's kernels one by one, all with the correlation of
  the ``cudaGraphLaunch`` call: those kernels are graph nodes (``graph = "node"``), as under
  ``nsys --cuda-graph-trace=node``; the graph id is not recorded.
* **memory** — ``[memory]`` instant events on CUDA devices; ``bytes`` is the change of
  ``Total Allocated``, so the running sum is the allocator's total including what was allocated
  before the profiler started.

Speed and memory: stdlib ``json.loads`` once, one pass appending a tuple per kept event, one polars
frame per table, the decoded document freed before the frames are built. On a 195 MB trace (811k
events) that is ~5 s and ~0.9 GiB peak. orjson parses ~1.4x faster but needs more memory and gives
only binary floats, which would lose the ns digits; it is not used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from nsysmoe import model
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.clean import Notes, all_invalid, drop_invalid, reasons_text
from nsysmoe.io.cuda_api import api_kind
from nsysmoe.io.generated import generator
from nsysmoe.io.kineto_events import HINT, frame, frames, is_kineto, to_ns
from nsysmoe.model import Launch, Trace

__all__ = ["is_kineto", "read_kineto", "to_ns"]

TID_BITS = 24
#: a canonical pid must leave room for the tid bits in an int64 global tid
MAX_PID = (1 << (63 - TID_BITS)) - 1
CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA in [memory] events' "Device Type"
MALFORMED = "events with a malformed ts/dur/args"
ANNOTATIONS = "gpu_user_annotation rows (GPU copies of CPU annotations)"


def read_kineto(path: str | Path) -> Trace:
    """Read one Kineto JSON trace (``.json`` or gzip, detected by content) into a Trace.

    Decoding (:func:`~nsysmoe.io.kineto_events.frames`) is kept apart from shaping the tables,
    so the decoded JSON, the memory peak, is gone before the frames are filtered and widened.
    Invalid rows are left out and counted by the policy every reader shares
    (:mod:`nsysmoe.io.clean`).
    """
    path = Path(path)
    meta, gpu, cpu, memory, malformed = frames(path)
    if not (gpu["kind"] == "kernel").any() and not meta["malformed_kernels"]:
        raise NsysmoeError(
            f"{path}: trace holds no GPU kernels; profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
    notes = Notes(dropped={MALFORMED: malformed}, quiet=(ANNOTATIONS,))
    if meta["replaced"]:  # counted per byte sequence: a JSON scan cannot tell strings apart
        notes.said.append(f"{meta['replaced']} invalid UTF-8 byte sequences in strings shown "
                          "with U+FFFD")  # fmt: skip
    pid = _canonical_pid(meta["rank"], cpu, notes)
    gpu, cpu = _with_ids(gpu, cpu, pid)
    raw_gpu = gpu
    gpu = drop_invalid(gpu, "GPU", notes.dropped, gpu=True, inverted="dur < 0")
    cpu = drop_invalid(cpu, "CPU", notes.dropped, gpu=False, inverted="dur < 0")
    notes.dropped[ANNOTATIONS] = int((cpu["kind"] == "gpu_annotation").sum())
    kernels = gpu.filter(pl.col("kind") == "kernel").with_columns(
        pl.col("name").fill_null("[unknown]"), short_name=pl.col("name").fill_null("[unknown]")
    )
    if kernels.is_empty():
        raise _all_invalid(path, raw_gpu.filter(pl.col("kind") == "kernel"), meta)
    not_captured: dict[str, str] = {}
    # the order of these calls is the order of the not_captured notes in every report
    memops = _memops(gpu, not_captured)
    runtime = _runtime(cpu, not_captured)
    kernels = _graph_nodes(kernels, runtime)
    nvtx = _nvtx(cpu, not_captured)
    return Trace(
        path=str(path),
        source_format="kineto-json",
        schema_version=None if meta["schema_version"] is None else str(meta["schema_version"]),
        product_version=None,
        kernels=_select(kernels, model.KERNEL_SCHEMA),
        memops=memops,
        runtime=_select(runtime, model.RUNTIME_SCHEMA),
        nvtx=_select(nvtx, model.NVTX_SCHEMA),
        gpus=_gpus(pid, kernels, memops, meta["props"], not_captured),
        memory_events=_memory(pid, memory, not_captured),
        launch=Launch(system=dict(sorted(meta["system"].items())),
                      generated_by=generator(meta["generated_by"])),
        not_captured=not_captured,
        warnings=notes.warnings(),
        dropped=notes.dropped,
    )


def _all_invalid(path: Path, kernels: pl.DataFrame, meta: dict[str, Any]) -> NsysmoeError:
    """Every kernel event was malformed or left out: say so, and why, not "no kernels"."""
    why: dict[str, int] = {}
    drop_invalid(kernels, "kernel", why, gpu=True, inverted="dur < 0")
    bad = meta["malformed_kernels"]
    reasons = ", ".join(filter(None, [f"{bad} with a malformed ts/dur/args" if bad else "",
                                      reasons_text(why, "kernel")]))  # fmt: skip
    return all_invalid(path, len(kernels) + bad, "kernel events", reasons,
                       "the trace is damaged; " + HINT)  # fmt: skip


def _with_ids(gpu: pl.DataFrame, cpu: pl.DataFrame, pid: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows given the canonical pid, an exact ``end``, and (CPU) nsys-style global tids, so
    threads of different processes never collide."""
    gpu = gpu.with_columns(
        pl.lit(pid, pl.Int64).alias("pid"), (pl.col("start") + pl.col("dur")).alias("end")
    )
    cpu = cpu.with_columns(
        pl.lit(pid, pl.Int64).alias("pid"),
        (pl.col("start") + pl.col("dur")).alias("end"),
        ((pid << TID_BITS) | (pl.col("os_tid") & ((1 << TID_BITS) - 1))).alias("tid"),
    )
    return gpu, cpu


def _runtime(cpu: pl.DataFrame, not_captured: dict[str, str]) -> pl.DataFrame:
    """CUDA runtime and driver calls; without them NVTX cannot be projected, which is noted."""
    runtime = cpu.filter(pl.col("kind") == "api").with_columns(api=api_kind(pl.col("name")))
    if runtime.is_empty():
        not_captured["cuda_api"] = (
            "no cuda_runtime/cuda_driver events: NVTX ranges cannot be projected onto the GPU"
        )
    return runtime


def _graph_nodes(kernels: pl.DataFrame, runtime: pl.DataFrame) -> pl.DataFrame:
    """Kernels with ``graph``/``graph_id``: "node" where a ``cudaGraphLaunch`` launched them."""
    launches = runtime.filter(pl.col("api") == "graph_launch").select(
        "corr_id", pl.lit("node").alias("graph")
    ).drop_nulls().unique("corr_id")
    kernels = kernels.join(launches, on="corr_id", how="left", maintain_order="left")
    return kernels.with_columns(graph_id=pl.lit(None, pl.Int64))


def _nvtx(cpu: pl.DataFrame, not_captured: dict[str, str]) -> pl.DataFrame:
    """Annotations and aten ops as default-domain push/pop ranges, as ``emit_nvtx`` under nsys
    would record them, so step detection and projection work unchanged."""
    nvtx = cpu.filter(pl.col("kind") == "range").with_columns(
        pl.col("name").fill_null(""),
        domain=pl.lit(None, pl.String),
        style=pl.lit("pushpop"),
        cross_thread=pl.lit(False),
    )
    if nvtx.is_empty():
        not_captured["nvtx"] = "no user_annotation or cpu_op ranges in the trace"
    return nvtx


def _canonical_pid(rank: Any, cpu: pl.DataFrame, notes: Notes) -> int:
    """The rank when the trace names it, else the CPU events' OS pid (the most common, ties to
    the smallest), else 0. GPU annotations carry the device index as pid and do not vote. A pid
    beyond :data:`MAX_PID` would not fit the global tid, so it is no pid (a rank: warned)."""
    if type(rank) is int and 0 <= rank <= MAX_PID:
        return rank
    if rank is not None:
        notes.said.append(f"distributedInfo.rank is not a rank (a whole number from 0 to "
                          f"{MAX_PID}); the process is named by its OS pid")  # fmt: skip
    votes = (
        cpu.filter(
            pl.col("kind") != "gpu_annotation", pl.col("os_pid").is_between(0, MAX_PID)
        )
        .group_by("os_pid")
        .len()
        .sort(["len", "os_pid"], descending=[True, False])
    )
    return int(votes["os_pid"][0]) if len(votes) else 0


def _select(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return df.select(list(schema)).cast(schema)


def _memops(gpu: pl.DataFrame, not_captured: dict[str, str]) -> pl.DataFrame:
    """Copies and fills, named as the nsys reader names them (``[CUDA memcpy DtoD]``)."""
    ops = gpu.filter(pl.col("kind").is_in(["memcpy", "memset"]))
    if ops.is_empty():
        not_captured["memcpy"] = "no gpu_memcpy/gpu_memset events in the trace"
    copy_kind = pl.col("name").str.extract(r"^Memcpy (\w+)", 1)
    name = (
        pl.when(pl.col("kind") == "memset")
        .then(pl.lit("[CUDA memset]"))
        .when(copy_kind.is_not_null())
        .then(pl.format("[CUDA memcpy {}]", copy_kind))
        .otherwise(pl.col("name"))
    )
    return _select(ops.with_columns(name.alias("name")), model.MEMOP_SCHEMA)


def _gpus(
    pid: int,
    kernels: pl.DataFrame,
    memops: pl.DataFrame,
    props: Any,
    not_captured: dict[str, str],
) -> pl.DataFrame:
    """One row per device that ran work, named from ``deviceProperties`` (matched on ``id``)."""
    devices = pl.concat([kernels["device"], memops["device"]]).drop_nulls().unique().sort()
    info: dict[int, tuple[Any, Any]] = {}
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and type(p.get("id")) is int:
                info[p["id"]] = (p.get("name"), p.get("totalGlobalMem"),
                                 *(_limit(p.get(k)) for k in _SM_PROPERTIES))  # fmt: skip
    else:
        not_captured["gpu_info"] = ("no deviceProperties in the trace: GPU model and SM count "
                                    "unknown")  # fmt: skip
    unknown = (None,) * (2 + len(_SM_PROPERTIES))
    rows = [(pid, d, *info.get(d, unknown)) for d in devices.to_list()]
    return frame(rows, model.GPU_SCHEMA)


#: deviceProperties' SM count and per-SM limits, in GPU_SCHEMA's order (Kineto records no
#: blocks-per-SM limit: None)
_SM_PROPERTIES = ("numSms", "maxThreadsPerMultiprocessor", "maxBlocksPerMultiProcessor",
                  "regsPerMultiprocessor", "sharedMemPerMultiprocessor")  # fmt: skip


def _limit(v: object) -> int | None:
    """A per-GPU count as the GPU table holds it: an int in [1, 2^31), else unknown."""
    return v if type(v) is int and 0 < v < 1 << 31 else None


def _memory(pid: int, memory: pl.DataFrame, not_captured: dict[str, str]) -> pl.DataFrame:
    """Allocator totals per CUDA device as signed changes whose running sum is the total."""
    cuda = memory.filter(pl.col("device_type") == CUDA_DEVICE_TYPE).drop_nulls(["device", "total"])
    if cuda.is_empty():
        not_captured["memory_usage"] = (
            "no [memory] events in the trace (record with torch.profiler profile_memory=True)"
        )
        return model.empty(model.MEMORY_EVENT_SCHEMA)
    cuda = cuda.sort("device", "start", maintain_order=True).with_columns(
        pl.lit(pid, pl.Int64).alias("pid"),
        pl.col("total").diff().over("device").fill_null(pl.col("total")).alias("bytes"),
    )
    return _select(cuda, model.MEMORY_EVENT_SCHEMA)
