"""Reader for ``nsys export --type sqlite`` files, schema 2.9 (nsys 2022.2) to 3.2x (nsys 2026.x).

Columns are selected by name, tables are discovered from ``sqlite_master`` (lazy exports omit empty
tables), and the file is opened read-only and immutable so the input's bytes never change.
Only integer columns and the strings actually referenced are read; names are joined in polars.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import polars as pl

from nsysmoe import model
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.nsys_db import SQLITE_MAGIC, Db, opened, pid_of
from nsysmoe.model import Trace

__all__ = ["SQLITE_MAGIC", "check_export", "read_nsys_sqlite"]

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX_TABLE = "NVTX_EVENTS"
MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"

#: NVTX eventType codes (ENUM_NSYS_EVENT_TYPE): push/pop, start/end and their NVTXT variants
NVTX_RANGE_TYPES = {59: "pushpop", 60: "startend", 70: "pushpop", 71: "startend"}
NVTX_DOMAIN_CREATE = 75
#: runtime/driver rows; eventClass 67 rows are backtrace duplicates (nsys 2022.2)
API_EVENT_CLASSES = (0, 1)
#: ENUM_CUDA_MEMCPY_OPER labels, used when the file has no ENUM table (2.9.1)
MEMCPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "Unified HtoD",
    12: "Unified DtoH",
    13: "Unified DtoD",
}
def read_nsys_sqlite(path: str | Path) -> Trace:
    """Read an nsys SQLite export into a :class:`~nsysmoe.model.Trace`.

    NVTX (often the largest table: millions of PyTorch op ranges) is read on a second
    connection in a thread while the CUDA tables are read; SQLite, the Arrow driver and polars
    release the GIL, so the two reads overlap on two cores.
    """
    path = Path(path)
    with opened(path) as db, ThreadPoolExecutor(max_workers=1) as pool:
        check_export(db)
        nvtx = pool.submit(_read_nvtx_alone, path)
        trace = _read(db)
        nvtx_table, nvtx_missing = nvtx.result()
    not_captured = {**trace.not_captured, **nvtx_missing}
    return replace(trace, nvtx=nvtx_table, not_captured=not_captured)


def _read_nvtx_alone(path: Path) -> tuple[pl.DataFrame, dict[str, str]]:
    """The NVTX table through its own connection (for the reading thread)."""
    missing: dict[str, str] = {}
    with opened(path) as db:
        return _read_nvtx(db, missing), missing


def check_export(db: Db) -> None:
    """An nsys export with kernel data, or a one-line error saying what it is instead."""
    nsys_markers = {"StringIds", KERNEL_TABLE, NVTX_TABLE, "META_DATA_EXPORT", "EXPORT_META_DATA"}
    if "StringIds" not in db.tables or not (db.tables & (nsys_markers - {"StringIds"})):
        raise NsysmoeError(
            f"{db.path}: SQLite file is not an Nsight Systems export (no StringIds/CUPTI/NVTX "
            "tables); pass the output of `nsys export --type sqlite`"
        )
    if not db.has(KERNEL_TABLE):
        raise NsysmoeError(
            f"{db.path}: export contains no CUDA kernel data; record with "
            "`nsys profile --trace=cuda,nvtx` (and --cuda-graph-trace=node for CUDA graphs)"
        )


def _read(db: Db) -> Trace:
    """Everything but NVTX (see :func:`read_nsys_sqlite`)."""
    meta = db.metadata()
    not_captured: dict[str, str] = {}
    dropped: dict[str, int] = {}
    kernels = _clean_gpu_rows(_read_kernels(db), "kernel", dropped)
    memops = _clean_gpu_rows(_read_memops(db, not_captured), "memory op", dropped)
    runtime = _read_runtime(db, not_captured)
    gpus = _read_gpus(db, kernels, memops, not_captured)
    memory_events = _read_memory_events(db, not_captured)
    warnings = tuple(f"{n} {what} left out" for what, n in dropped.items() if n)
    return Trace(
        path=str(db.path),
        source_format="nsys-sqlite",
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        product_version=meta.get("EXPORT_PRODUCT_VERSION"),
        kernels=kernels,
        memops=memops,
        runtime=runtime,
        nvtx=model.empty(model.NVTX_SCHEMA),
        gpus=gpus,
        memory_events=memory_events,
        not_captured=not_captured,
        warnings=warnings,
        dropped=dropped,
    )


def _clean_gpu_rows(df: pl.DataFrame, what: str, dropped: dict[str, int]) -> pl.DataFrame:
    """Drop inverted rows (counted, warned) and rows that start before the capture (t < 0)."""
    inverted = df["end"] < df["start"]
    before = (df["start"] < 0) & ~inverted
    dropped[f"{what} rows with end < start"] = int(inverted.sum())
    dropped[f"{what} rows starting before the capture (start < 0)"] = int(before.sum())
    return df.filter(~inverted & ~before)


def _with_names(db: Db, df: pl.DataFrame, id_cols: dict[str, str]) -> pl.DataFrame:
    """Replace StringIds id columns (``{id_col: out_col}``) by their strings."""
    ids = pl.concat([df[c] for c in id_cols]) if len(df) else pl.Series([], dtype=pl.Int64)
    strings = db.strings(ids)
    for id_col, out_col in id_cols.items():
        df = df.join(strings.rename({"id": id_col, "value": out_col}), on=id_col, how="left").drop(
            id_col
        )
    return df


#: the leading columns every GPU activity query selects, in order
GPU_ROW = {
    "start": pl.Int64, "end": pl.Int64, "device": pl.Int64, "stream": pl.Int64,
    "corr_id": pl.Int64, "gpid": pl.Int64,
}  # fmt: skip


def _read_kernels(db: Db) -> pl.DataFrame:
    t = KERNEL_TABLE
    df = db.frame(
        f'SELECT start, "end", deviceId, streamId, {db.col(t, "correlationId")}, '
        f"{db.col(t, 'globalPid', '0')}, demangledName, {db.col(t, 'shortName')} FROM {t}",
        {**GPU_ROW, "name_id": pl.Int64, "short_id": pl.Int64},
    )
    df = _with_names(db, df, {"name_id": "name", "short_id": "short_name"})
    df = df.with_columns(pid_of("gpid").alias("pid"), pl.col("name").fill_null("[unknown]"))
    return df.select(list(model.KERNEL_SCHEMA)).cast(model.KERNEL_SCHEMA)


def _read_memops(db: Db, not_captured: dict[str, str]) -> pl.DataFrame:
    parts = []
    common = 'start, "end", deviceId, streamId, {corr}, {gpid}, bytes'
    schema = {**GPU_ROW, "bytes": pl.Int64}
    for table, kind in ((MEMCPY_TABLE, "memcpy"), (MEMSET_TABLE, "memset")):
        if not db.has(table):
            not_captured[kind] = f"not captured (no {table} table)"
            continue
        cols = common.format(
            corr=db.col(table, "correlationId"), gpid=db.col(table, "globalPid", "0")
        )
        extra = f", {db.col(table, 'copyKind', '0')}" if kind == "memcpy" else ", 0"
        df = db.frame(f"SELECT {cols}{extra} FROM {table}", {**schema, "copy_kind": pl.Int64})
        if kind == "memcpy":
            label = pl.col("copy_kind").replace_strict(MEMCPY_KINDS, default="Unknown")
            name = pl.format("[CUDA memcpy {}]", label)
        else:
            name = pl.lit("[CUDA memset]")
        parts.append(df.with_columns(kind=pl.lit(kind), name=name))
    if not parts:
        return model.empty(model.MEMOP_SCHEMA)
    df = pl.concat(parts).with_columns(pid_of("gpid").alias("pid"))
    return df.select(list(model.MEMOP_SCHEMA)).cast(model.MEMOP_SCHEMA)


def _read_runtime(db: Db, not_captured: dict[str, str]) -> pl.DataFrame:
    t = RUNTIME_TABLE
    if not db.has(t):
        not_captured["cuda_api"] = (
            f"not captured (no {t} table): NVTX ranges cannot be projected onto the GPU"
        )
        return model.empty(model.RUNTIME_SCHEMA)
    where = ""
    if "eventClass" in db.columns(t):
        where = f"WHERE eventClass IN {API_EVENT_CLASSES}"
    df = db.frame(
        f'SELECT start, "end", globalTid, correlationId FROM {t} {where}',
        {"start": pl.Int64, "end": pl.Int64, "tid": pl.Int64, "corr_id": pl.Int64},
    )
    df = df.with_columns(pid_of("tid").alias("pid"))
    return df.select(list(model.RUNTIME_SCHEMA)).cast(model.RUNTIME_SCHEMA)


def _read_nvtx(db: Db, not_captured: dict[str, str]) -> pl.DataFrame:
    t = NVTX_TABLE
    if not db.has(t):
        not_captured["nvtx"] = f"not captured (no {t} table; record with --trace=nvtx)"
        return model.empty(model.NVTX_SCHEMA)
    types = (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE)
    df = db.frame(
        f"SELECT start, \"end\", eventType, coalesce(text, ''), {db.col(t, 'textId')}, globalTid, "
        f"{db.col(t, 'endGlobalTid')}, {db.col(t, 'domainId', '0')} FROM {t} "
        f"WHERE eventType IN {types}",
        {
            "start": pl.Int64,
            "end": pl.Int64,
            "etype": pl.Int64,
            "text": pl.String,
            "text_id": pl.Int64,
            "tid": pl.Int64,
            "end_tid": pl.Int64,
            "domain_id": pl.Int64,
        },
    )
    last = db.conn.execute(f'SELECT max(max(start), coalesce(max("end"), 0)) FROM {t}').fetchone()
    strings = db.strings(df["text_id"]).rename({"id": "text_id", "value": "sid"})
    text = pl.when(pl.col("text") != "").then(pl.col("text"))  # '' stood in for NULL
    df = df.join(strings, on="text_id", how="left").with_columns(
        pl.coalesce("sid", text).alias("name"), pid_of("tid").alias("pid")
    )
    domains = (
        df.filter(pl.col("etype") == NVTX_DOMAIN_CREATE)
        .select("pid", "domain_id", pl.col("name").alias("domain"))
        .unique(["pid", "domain_id"], keep="last")
    )
    ranges = df.filter(pl.col("etype") != NVTX_DOMAIN_CREATE).join(
        domains, on=["pid", "domain_id"], how="left"
    )
    ranges = ranges.with_columns(
        pl.col("end").fill_null(last[0] if last and last[0] is not None else 0),
        pl.col("etype").replace_strict(NVTX_RANGE_TYPES, return_dtype=pl.String).alias("style"),
        pl.col("end_tid").is_not_null().alias("cross_thread"),
        pl.col("name").fill_null(""),
    )
    if ranges.is_empty():
        not_captured["nvtx"] = "no NVTX ranges in the export"
    return ranges.select(list(model.NVTX_SCHEMA)).cast(model.NVTX_SCHEMA)


def _read_gpus(
    db: Db, kernels: pl.DataFrame, memops: pl.DataFrame, not_captured: dict[str, str]
) -> pl.DataFrame:
    """Name each (pid, device); TARGET_INFO_CUDA_DEVICE maps CUDA ordinals to GPUs when present."""
    keys = pl.concat([kernels.select("pid", "device"), memops.select("pid", "device")]).unique()
    if not db.has("TARGET_INFO_GPU"):
        not_captured["gpu_info"] = "not captured (no TARGET_INFO_GPU table): GPU model unknown"
        return (
            keys.with_columns(
                gpu_name=pl.lit(None, pl.String), total_memory_bytes=pl.lit(None, pl.Int64)
            )
            .select(list(model.GPU_SCHEMA))
            .sort("pid", "device")
        )
    t = "TARGET_INFO_GPU"
    info = db.small(
        f"SELECT id, {db.col(t, 'name')}, {db.col(t, 'totalMemory')} FROM {t}",
        {"gpu_id": pl.Int64, "gpu_name": pl.String, "total_memory_bytes": pl.Int64},
    ).unique("gpu_id")
    if db.has("TARGET_INFO_CUDA_DEVICE"):
        mapping = db.small(
            "SELECT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE",
            {"pid": pl.Int64, "device": pl.Int64, "gpu_id": pl.Int64},
        ).unique(["pid", "device"])
        keys = keys.join(mapping, on=["pid", "device"], how="left").with_columns(
            pl.col("gpu_id").fill_null(pl.col("device"))
        )
    else:
        keys = keys.with_columns(gpu_id=pl.col("device"))
    out = keys.join(info, on="gpu_id", how="left")
    return out.select(list(model.GPU_SCHEMA)).cast(model.GPU_SCHEMA).sort("pid", "device")


def _read_memory_events(db: Db, not_captured: dict[str, str]) -> pl.DataFrame:
    t = MEMORY_TABLE
    if not db.has(t):
        not_captured["memory_usage"] = (
            f"not captured (no {t} table; record with --cuda-memory-usage=true)"
        )
        return model.empty(model.MEMORY_EVENT_SCHEMA)
    df = db.frame(
        f"SELECT start, globalPid, deviceId, bytes, memoryOperationType FROM {t}",
        {
            "start": pl.Int64,
            "gpid": pl.Int64,
            "device": pl.Int64,
            "bytes": pl.Int64,
            "op": pl.Int64,
        },
    )
    df = df.with_columns(
        pid_of("gpid").alias("pid"),
        pl.when(pl.col("op") == 1).then(-pl.col("bytes")).otherwise(pl.col("bytes")).alias("bytes"),
    )
    return df.select(list(model.MEMORY_EVENT_SCHEMA)).cast(model.MEMORY_EVENT_SCHEMA)
