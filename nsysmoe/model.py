"""The canonical tables every reader produces; analyses never see a source format's table names.

All times are integer nanoseconds on the trace's own timeline. A GPU is ``(pid, device)``: several
processes in one export are several ranks, even when each calls its GPU device 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

#: Column schemas of the canonical tables (readers must produce exactly these columns).
KERNEL_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "stream": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,  # null when the export has none; unique only within a pid
    "name": pl.String,  # demangled name
    "short_name": pl.String,
}
MEMOP_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "stream": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,
    "kind": pl.String,  # "memcpy" | "memset"
    "bytes": pl.Int64,
    "name": pl.String,  # display name, e.g. "[CUDA memcpy DtoD]"
}
RUNTIME_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "tid": pl.Int64,  # full serialized globalTid, so threads of different processes never collide
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,
}
NVTX_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "tid": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,  # unended ranges are closed at the trace's last NVTX timestamp
    "name": pl.String,  # bare range text
    "domain": pl.String,  # null for the default domain
    "style": pl.String,  # "pushpop" | "startend"
    "cross_thread": pl.Boolean,  # start/end range ended on another thread (no GPU projection)
}
GPU_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "gpu_name": pl.String,
    "total_memory": pl.Int64,
}
MEMORY_EVENT_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "start": pl.Int64,
    "bytes": pl.Int64,  # positive for allocation, negative for deallocation
}


def empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


@dataclass(frozen=True)
class Trace:
    """One input trace, read into canonical polars tables plus what the file did not capture."""

    path: str
    source_format: str  # e.g. "nsys-sqlite"
    schema_version: str | None
    product_version: str | None
    kernels: pl.DataFrame
    memops: pl.DataFrame
    runtime: pl.DataFrame
    nvtx: pl.DataFrame
    gpus: pl.DataFrame
    memory_events: pl.DataFrame
    #: data kinds absent from the file, e.g. {"nvtx": "not captured (no NVTX_EVENTS table)"}
    not_captured: dict[str, str] = field(default_factory=dict)
    #: reader warnings a user should see (dropped rows and why)
    warnings: tuple[str, ...] = ()
    #: counts of rows left out by the reader, by reason
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def gpu_keys(self) -> list[tuple[int, int]]:
        """(pid, device) of every GPU that ran at least one kernel or memory op, sorted."""
        keys = pl.concat(
            [self.kernels.select("pid", "device"), self.memops.select("pid", "device")]
        ).unique()
        return sorted(keys.iter_rows())
