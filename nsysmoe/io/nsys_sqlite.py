"""Reader for ``nsys export --type sqlite`` files, schema 2.9 (nsys 2022.2) to 3.2x (nsys 2026.x).

Columns are selected by name, tables are discovered from ``sqlite_master`` (lazy exports omit empty
tables), and the file is opened read-only and immutable so the input's bytes never change (a file
with a live journal or WAL is refused: see :mod:`nsysmoe.io.nsys_db`). Only integer columns and
the strings actually referenced are read; names are joined in polars. Invalid rows are left out
and counted by the policy every reader shares (:mod:`nsysmoe.io.clean`).

The big tables' readers (``read_kernels``, ``read_memop_table``, ``read_runtime_rows``,
``read_nvtx_rows`` with ``nvtx_ranges``) also read a rowid range of their table (``part``) with a
StringIds lookup of the caller's: :mod:`nsysmoe.io.nsys_split` reads an export range by range
through them, so a table split while read is made exactly as the whole table is here.

The per-table readers (and :func:`read_export`, :func:`read_nvtx`) take any
:class:`~nsysmoe.io.export_tables.ExportTables`: the Parquet and Arrow exports
(:mod:`nsysmoe.io.nsys_columnar`) are read through them too, so every format gives one Trace.

About 600 lines because it holds one function per canonical table (kernels, memops, CUDA API,
NVTX, GPUs, memory events), each small; the connection, catalogue and byte-safe text reads are
in :mod:`nsysmoe.io.nsys_db`. Split it by table when a table's reader grows past a screen.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import polars as pl

from nsysmoe import env, model
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.clean import Notes, all_invalid, drop_invalid, reasons_text
from nsysmoe.io.cuda_api import api_kind
from nsysmoe.io.export_tables import METADATA_TABLES, ExportTables
from nsysmoe.io.generated import generator
from nsysmoe.io.launch import read_launch
from nsysmoe.io.nsys_db import SQLITE_MAGIC, all_of, opened, pid_of
from nsysmoe.model import Trace

__all__ = ["SQLITE_MAGIC", "check_export", "read_export", "read_nsys_sqlite", "read_nvtx"]

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
#: the memory-op tables, in the order their rows are read
MEMOP_TABLES = ((MEMCPY_TABLE, "memcpy"), (MEMSET_TABLE, "memset"))
NVTX_TABLE = "NVTX_EVENTS"
MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
#: a uint32 id column's "none" (stored as 4294967295, or as -1 where it went through a signed int)
NO_ID = (4294967295, -1)
#: one row per whole CUDA-graph replay (``--cuda-graph-trace=graph``), host- or device-launched
GRAPH_TABLES = ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE")
GRAPH_OPTIONS = "CUDA_GRAPH_TRACE_OPTIONS:"
#: export metadata row naming the program that generated a synthetic export (not a measurement)
GENERATED_BY = "NSYSMOE_GENERATED_BY"

#: every table the readers here read (a report is exported with ``--tables`` of these only)
TABLES_READ = (
    KERNEL_TABLE, RUNTIME_TABLE, MEMCPY_TABLE, MEMSET_TABLE, NVTX_TABLE, "StringIds",
    "TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE", *METADATA_TABLES, "META_DATA_CAPTURE",
    "TARGET_INFO_SYSTEM_ENV", "TARGET_INFO_SESSION_START_TIME", MEMORY_TABLE, SYNC_TABLE,
    EVENT_TABLE, *GRAPH_TABLES,
)  # fmt: skip

#: threads decoding parts of the big tables (SQLite and the Arrow driver release the GIL): one
#: per core this process may use, at most 4
READERS = min(4, env.cores())
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
    connection in a thread while the CUDA tables are read; both hand their big tables' rowid
    ranges to one pool of :data:`READERS` threads (``Db.parts``), so every core decodes until
    the last part is read. SQLite, the Arrow driver and polars release the GIL.
    """
    path = Path(path)
    with ThreadPoolExecutor(READERS) as parts, ThreadPoolExecutor(1) as side:
        with opened(path, parts) as db:
            check_export(db)
            nvtx = side.submit(_read_nvtx_alone, path, parts)
            trace, notes = read_export(db)
            nvtx_table, nvtx_missing, nvtx_notes = nvtx.result()
            notes.replaced, notes.mixed = db.replaced_strings, db.mixed
            notes = notes.merged(nvtx_notes)
    not_captured = {**trace.not_captured, **nvtx_missing}
    return replace(
        trace,
        nvtx=nvtx_table,
        not_captured=not_captured,
        warnings=notes.warnings(),
        dropped=notes.dropped,
    )


def _read_nvtx_alone(
    path: Path, parts: Executor
) -> tuple[pl.DataFrame, dict[str, str], Notes]:
    """The NVTX table through its own connection (for the reading thread)."""
    missing: dict[str, str] = {}
    notes = Notes()
    with opened(path, parts) as db:
        table = read_nvtx(db, missing, notes)
        notes.replaced, notes.mixed = db.replaced_strings, db.mixed
    return table, missing, notes


def check_export(db: ExportTables, what: str = "SQLite file",
                 hint: str = "pass the output of `nsys export --type sqlite`") -> None:  # fmt: skip
    """An nsys export with kernel data, or a one-line error saying what it is instead."""
    nsys_markers = {"StringIds", KERNEL_TABLE, NVTX_TABLE, "META_DATA_EXPORT", "EXPORT_META_DATA"}
    if "StringIds" not in db.tables or not (db.tables & (nsys_markers - {"StringIds"})):
        raise NsysmoeError(
            f"{db.path}: {what} is not an Nsight Systems export (no StringIds/CUPTI/NVTX "
            f"tables); {hint}"
        )
    if not db.has(KERNEL_TABLE):
        raise NsysmoeError(
            f"{db.path}: export contains no CUDA kernel data; record with "
            "`nsys profile --trace=cuda,nvtx` (and --cuda-graph-trace=node for CUDA graphs)"
        )


def read_export(db: ExportTables) -> tuple[Trace, Notes]:
    """Everything but NVTX (see :func:`read_nsys_sqlite`)."""
    meta = db.metadata()
    not_captured: dict[str, str] = {}
    notes = Notes()
    raw_kernels = read_kernels(db)
    kernels = drop_invalid(raw_kernels, "kernel", notes.dropped, gpu=True)
    check_kernels(db, len(raw_kernels), len(kernels), notes)
    note_unnamed(int(kernels["unnamed"].sum()), len(kernels), notes)
    kernels = kernels.drop("unnamed")
    graphs = read_graph_rows(db, notes)
    if graphs is not None:
        kernels = pl.concat([kernels, graphs])
    memops = drop_invalid(_read_memops(db, not_captured), "memory op", notes.dropped, gpu=True)
    runtime = drop_invalid(_read_runtime(db, not_captured), "CUDA API", notes.dropped, gpu=False)
    keys = pl.concat([kernels.select("pid", "device"), memops.select("pid", "device")])
    trace = small_tables(db, meta, keys, not_captured, notes)
    return replace(trace, kernels=kernels, memops=memops, runtime=runtime), notes


def small_tables(db: ExportTables, meta: dict[str, str], keys: pl.DataFrame,
                 not_captured: dict[str, str], notes: Notes) -> Trace:  # fmt: skip
    """The trace without its four big tables (left empty): GPUs (those of ``keys``, the kernels'
    and memory ops' (pid, device), repeats allowed), memory events, synchronisation, metadata."""
    gpus = read_gpus(db, keys, not_captured)
    memory_events = _read_memory_events(db, not_captured, notes)
    syncs, records = _read_syncs(db), _read_event_records(db)
    return Trace(
        path=str(db.path),
        source_format="nsys-sqlite",
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        product_version=meta.get("EXPORT_PRODUCT_VERSION"),
        kernels=model.empty(model.KERNEL_SCHEMA),
        memops=model.empty(model.MEMOP_SCHEMA),
        runtime=model.empty(model.RUNTIME_SCHEMA),
        nvtx=model.empty(model.NVTX_SCHEMA),
        gpus=gpus,
        memory_events=memory_events,
        syncs=syncs,
        event_records=records,
        not_captured=not_captured,
        graph_trace=_graph_trace_options(db),
        session_start_ns=_session_start(db),
        launch=replace(read_launch(db), generated_by=generator(meta.get(GENERATED_BY))),
    )


def check_kernels(db: ExportTables, read: int, kept: int, notes: Notes) -> None:
    """Refuse a kernel table whose ``read`` rows (some) were all left out (``kept`` = 0)."""
    if read and not kept:
        why = reasons_text(notes.dropped, "kernel")
        raise all_invalid(db.path, read, "kernel rows", why, "export the report again")


def note_unnamed(n: int, kept: int, notes: Notes) -> None:
    """Say how many of the ``kept`` kernels have no name in StringIds."""
    if n:
        notes.said.append(f"{n} of {kept} kernel names not found in StringIds "
                          "(shown as [unknown])")  # fmt: skip


#: StringIds rows (``id``, ``value``) of some ids: :meth:`Db.strings`, or a reader's own lookup
Strings = Callable[[pl.Series], pl.DataFrame]


def _names(ids: pl.Expr, strings: pl.DataFrame) -> pl.Expr:
    """The StringIds value of each id (null where StringIds has none): a hash lookup that makes
    one column, where a join would copy every column of a million-row table."""
    return ids.replace_strict(
        strings["id"], strings["value"], default=None, return_dtype=pl.String
    )


def _with_names(
    db: ExportTables, df: pl.DataFrame, id_cols: dict[str, str], lookup: Strings | None = None
) -> pl.DataFrame:
    """Replace StringIds id columns (``{id_col: out_col}``) by their strings."""
    ids = pl.concat([df[c] for c in id_cols]) if len(df) else pl.Series([], dtype=pl.Int64)
    strings = (lookup or db.strings)(ids)
    named = [_names(pl.col(i), strings).alias(o) for i, o in id_cols.items()]
    return df.with_columns(named).drop(list(id_cols))


#: the leading columns every GPU activity query selects, in order
GPU_ROW = {
    "start": pl.Int64, "end": pl.Int64, "device": pl.Int64, "stream": pl.Int64,
    "corr_id": pl.Int64, "gpid": pl.Int64,
}  # fmt: skip
GPU_COLUMNS = ("start", "end", "deviceId", "streamId")


def _gpu_exprs(db: ExportTables, table: str) -> list[str]:
    db.need(table, *GPU_COLUMNS)
    return ['start', '"end"', "deviceId", "streamId", db.col(table, "correlationId"),
            db.col(table, "globalPid", "0")]  # fmt: skip


def read_kernels(db: ExportTables, part: str = "", lookup: Strings | None = None) -> pl.DataFrame:
    """Kernels with their names (of the rows ``part`` selects, all by default); ``unnamed``
    marks names missing from StringIds. A kernel with a ``graphNodeId`` ran as a node of a
    CUDA-graph replay (``--cuda-graph-trace=node``)."""
    t = KERNEL_TABLE
    db.need(t, "demangledName")
    df = db.select(
        t,
        [*_gpu_exprs(db, t), "demangledName", db.col(t, "shortName"), db.col(t, "graphNodeId"),
         db.col(t, "graphId"), *(db.col(t, c) for c in LAUNCH_COLUMNS)],  # fmt: skip
        {**GPU_ROW, "name_id": pl.Int64, "short_id": pl.Int64, "node_id": pl.Int64,
         "graph_id": pl.Int64, **dict.fromkeys(LAUNCH_COLUMNS, pl.Int64)},  # fmt: skip
        part,
    )
    df = _with_names(db, df, {"name_id": "name", "short_id": "short_name"}, lookup)
    df = df.with_columns(
        pid_of("gpid").alias("pid"),
        pl.col("name").is_null().alias("unnamed"),
        pl.col("name").fill_null("[unknown]"),
        pl.when(pl.col("node_id").is_not_null()).then(pl.lit("node")).alias("graph"),
        *launch_shape(),
    ).drop(LAUNCH_COLUMNS)
    schema = {**model.KERNEL_SCHEMA, "unnamed": pl.Boolean}
    return df.select(list(schema)).cast(schema)


#: the kernel table's launch configuration columns (nsys 2022.2 to 2026: every export has them)
LAUNCH_COLUMNS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                  "staticSharedMemory", "dynamicSharedMemory")  # fmt: skip
#: a grid x or block dimension, a register count or a shared memory size outside [0, 2^31),
#: a grid y or z outside [0, 2^16), or a block of 2^31 threads or more, is not one CUDA
#: launches: read as unknown (null), so the block count stays below 2^63 (the threads' product
#: is checked in floating point, where it cannot wrap: exact below 2^53)
_DIMENSION, _GRID_YZ = 1 << 31, 1 << 16


def _in_range(col: str, limit: int = _DIMENSION) -> pl.Expr:
    return pl.col(col).is_between(0, limit - 1)


def launch_shape() -> list[pl.Expr]:
    """:data:`nsysmoe.model.LAUNCH_SHAPE` from the raw :data:`LAUNCH_COLUMNS` (null where one
    it needs is missing or out of range). Each figure is one product under one mask (bits), so
    a million kernels make no per-column copies beside the raw columns while they are read."""
    grid = _in_range("gridX") & _in_range("gridY", _GRID_YZ) & _in_range("gridZ", _GRID_YZ)
    block = _in_range("blockX") & _in_range("blockY") & _in_range("blockZ")
    threads = pl.col("blockX") * pl.col("blockY") * pl.col("blockZ")  # may wrap: checked as
    exact = pl.col("blockX").cast(pl.Float64) * pl.col("blockY") * pl.col("blockZ")  # a float
    shared = pl.col("staticSharedMemory") + pl.col("dynamicSharedMemory")
    return [
        pl.when(grid).then(pl.col("gridX") * pl.col("gridY") * pl.col("gridZ")).alias("blocks"),
        pl.when(block & (exact < _DIMENSION)).then(threads).alias("threads"),
        pl.when(_in_range("registersPerThread")).then(pl.col("registersPerThread"))
        .alias("registers"),
        pl.when(_in_range("staticSharedMemory") & _in_range("dynamicSharedMemory")
                & (shared < _DIMENSION)).then(shared).alias("shared_bytes"),
    ]  # fmt: skip


def read_graph_rows(db: ExportTables, notes: Notes) -> pl.DataFrame | None:
    """Whole-graph replays as kernel-table rows named ``[CUDA graph N]``, or None when the
    export has none (so an export without graphs reads exactly as before)."""
    parts = []
    for t in (t for t in GRAPH_TABLES if db.has(t)):
        graph_id = db.col(t, "graphId")
        df = db.select(t, [*_gpu_exprs(db, t), graph_id], {**GPU_ROW, "graph_id": pl.Int64})
        parts.append(df)
    if not parts:
        return None
    df = pl.concat(parts)
    name = pl.format("[CUDA graph {}]", pl.col("graph_id").cast(pl.String).fill_null("?"))
    df = df.with_columns(
        pid_of("gpid").alias("pid"),
        name.alias("name"),
        name.alias("short_name"),
        pl.lit("whole").alias("graph"),
        *(pl.lit(None, model.KERNEL_SCHEMA[c]).alias(c) for c in model.LAUNCH_SHAPE),
    )
    df = drop_invalid(df, "CUDA graph", notes.dropped, gpu=True)
    return df.select(list(model.KERNEL_SCHEMA)).cast(model.KERNEL_SCHEMA)


def _session_start(db: ExportTables) -> int | None:
    """``TARGET_INFO_SESSION_START_TIME.utcEpochNs``: where this file's clock starts on the UTC
    epoch, so separate per-rank files can be put on one timeline."""
    t = "TARGET_INFO_SESSION_START_TIME"
    if not db.has(t) or "utcEpochNs" not in db.columns(t):
        return None
    starts = [v for (v,) in db.rows(t, ["utcEpochNs"]) if type(v) is int]
    return min(starts) if starts else None


def _graph_trace_options(db: ExportTables) -> dict[str, str]:
    """``CUDA_GRAPH_TRACE_OPTIONS:*`` from META_DATA_CAPTURE (plain, or per process as
    ``PROCESS_n:…``); values that differ between processes are joined with ", "."""
    t = "META_DATA_CAPTURE"
    if not db.has(t) or not {"name", "value"} <= db.columns(t):
        return {}
    found: dict[str, list[str]] = {}
    for name, value in db.rows(t, ["name", "value"]):
        if not isinstance(name, str) or GRAPH_OPTIONS not in name or value is None:
            continue
        key = name[name.index(GRAPH_OPTIONS) + len(GRAPH_OPTIONS):]
        values = found.setdefault(key, [])
        if str(value) not in values:
            values.append(str(value))
    return {key: ", ".join(values) for key, values in sorted(found.items())}


def _read_memops(db: ExportTables, not_captured: dict[str, str]) -> pl.DataFrame:
    parts = [read_memop_table(db, table, kind) for table, kind in memop_tables(db, not_captured)]
    return pl.concat(parts) if parts else model.empty(model.MEMOP_SCHEMA)


def memop_tables(db: ExportTables, not_captured: dict[str, str]) -> list[tuple[str, str]]:
    """The memory-op tables (:data:`MEMOP_TABLES`) the export has; those it lacks are noted."""
    found = []
    for table, kind in MEMOP_TABLES:
        if db.has(table):
            found.append((table, kind))
        else:
            not_captured[kind] = f"not captured (no {table} table)"
    return found


def read_memop_table(db: ExportTables, table: str, kind: str, part: str = "") -> pl.DataFrame:
    """The rows ``part`` selects (all by default) of one memory-op table (:data:`MEMOP_TABLES`)."""
    schema = {**GPU_ROW, "bytes": pl.Int64, "copy_kind": pl.Int64}
    db.need(table, "bytes")
    copy_kind = db.col(table, "copyKind", "0") if kind == "memcpy" else "0"
    df = db.select(table, [*_gpu_exprs(db, table), "bytes", copy_kind], schema, part)
    if kind == "memcpy":
        label = pl.col("copy_kind").replace_strict(MEMCPY_KINDS, default="Unknown")
        name = pl.format("[CUDA memcpy {}]", label)
    else:
        name = pl.lit("[CUDA memset]")
    df = df.with_columns(kind=pl.lit(kind), name=name, pid=pid_of("gpid"))
    return df.select(list(model.MEMOP_SCHEMA)).cast(model.MEMOP_SCHEMA)


def _read_runtime(db: ExportTables, not_captured: dict[str, str]) -> pl.DataFrame:
    if not runtime_captured(db, not_captured):
        return model.empty(model.RUNTIME_SCHEMA)
    return read_runtime_rows(db)


def runtime_captured(db: ExportTables, not_captured: dict[str, str]) -> bool:
    """Whether the export has CUDA API calls (if not, it is noted)."""
    t = RUNTIME_TABLE
    if not db.has(t):
        not_captured["cuda_api"] = (
            f"not captured (no {t} table): NVTX ranges cannot be projected onto the GPU"
        )
    return db.has(t)


def read_runtime_rows(
    db: ExportTables, part: str = "", lookup: Strings | None = None
) -> pl.DataFrame:
    """The CUDA API calls among the rows ``part`` selects (all by default)."""
    t = RUNTIME_TABLE
    db.need(t, "start", "end", "globalTid", "correlationId")
    where = ""
    if "eventClass" in db.columns(t):
        where = f"eventClass IN {API_EVENT_CLASSES}"
    df = db.select(
        t,
        ["start", '"end"', "globalTid", "correlationId", db.col(t, "nameId")],
        {"start": pl.Int64, "end": pl.Int64, "tid": pl.Int64, "corr_id": pl.Int64,
         "name_id": pl.Int64},  # fmt: skip
        all_of(where, part),
    )
    kinds = (lookup or db.strings)(df["name_id"]).select(
        "id", api_kind(pl.col("value")).alias("value")
    ).drop_nulls("value")
    if kinds.is_empty():
        df = df.with_columns(api=pl.lit(None, pl.String))
    else:
        df = df.with_columns(_names(pl.col("name_id"), kinds).alias("api"))
    df = df.with_columns(pid_of("tid").alias("pid"))
    return df.select(list(model.RUNTIME_SCHEMA)).cast(model.RUNTIME_SCHEMA)


def _id(col: str) -> pl.Expr:
    """An id column with its "none" values (:data:`NO_ID`) as null."""
    return pl.when(pl.col(col).is_in(NO_ID)).then(None).otherwise(pl.col(col)).alias(col)


def _read_sync_like(db: ExportTables, table: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The rows of a synchronisation or event-record table that name their call (a row
    without a correlationId cannot be tied to a call, so is left out): only what the dependency
    graph reads; an export without the table (or its key columns) has none."""
    cols = ("correlationId", "deviceId", "streamId", "eventId")
    if not db.has(table) or not set(cols) <= db.columns(table):
        return model.empty(schema)
    df = db.select(
        table,
        [*(f'"{c}"' for c in cols), db.col(table, "eventSyncId"), db.col(table, "globalPid", "0")],
        {"corr_id": pl.Int64, "device": pl.Int64, "stream": pl.Int64, "event_id": pl.Int64,
         "event_sync_id": pl.Int64, "gpid": pl.Int64},  # fmt: skip
        "correlationId IS NOT NULL",
    )
    # an event sync id of 0 is "none" too (stream synchronizes carry 0 in nsys 2026.4)
    df = df.with_columns(pid_of("gpid").alias("pid"), _id("stream"), _id("event_id"),
                         _id("event_sync_id").replace(0, None))  # fmt: skip
    return df.select(list(schema)).cast(schema)


def _read_syncs(db: ExportTables) -> pl.DataFrame:
    return _read_sync_like(db, SYNC_TABLE, model.SYNC_SCHEMA)


def _read_event_records(db: ExportTables) -> pl.DataFrame:
    return _read_sync_like(db, EVENT_TABLE, model.EVENT_RECORD_SCHEMA)


def read_nvtx(db: ExportTables, not_captured: dict[str, str], notes: Notes) -> pl.DataFrame:
    t = NVTX_TABLE
    if not nvtx_captured(db, not_captured):
        return model.empty(model.NVTX_SCHEMA)
    df, strings = read_nvtx_rows(db)
    domains = nvtx_domains(df, strings)
    ranges, unnamed = nvtx_ranges(df, strings, domains, lambda: db.last_time(t))
    note_nvtx_unnamed(unnamed, notes)
    del df  # the raw columns not kept: freed before the one filtering copy
    ranges = drop_invalid(ranges, "NVTX range", notes.dropped, gpu=False, among=pl.col("is_range"))
    if ranges.is_empty():
        not_captured["nvtx"] = "no NVTX ranges in the export"
    return ranges.select(list(model.NVTX_SCHEMA)).cast(model.NVTX_SCHEMA)


def nvtx_captured(db: ExportTables, not_captured: dict[str, str]) -> bool:
    """Whether the export has NVTX events (if not, it is noted)."""
    t = NVTX_TABLE
    if not db.has(t):
        not_captured["nvtx"] = f"not captured (no {t} table; record with --trace=nvtx)"
    return db.has(t)


def read_nvtx_rows(
    db: ExportTables,
    where: str = "",
    lookup: Strings | None = None,
    types: tuple[int, ...] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The NVTX rows of ``types`` (ranges and domain creations by default) that ``where``
    selects, with their ``name`` and ``pid``, and the StringIds rows of their text ids."""
    t = NVTX_TABLE
    db.need(t, "start", "end", "eventType", "globalTid")
    types = types or (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE)
    df = db.select(
        t,
        ["start", '"end"', "eventType", db.col(t, "text", "''"), db.col(t, "textId"),
         "globalTid", db.col(t, "endGlobalTid"), db.col(t, "domainId", "0")],  # fmt: skip
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
        all_of(f"eventType IN {types}" if len(types) > 1 else f"eventType = {types[0]}", where),
    )
    strings = (lookup or db.strings)(df["text_id"])
    # a registered string where the id has one, else the inline text ('' stood in for NULL)
    name = _registered_over(df["text_id"], df["text"], strings).alias("name")
    return df.with_columns(name, pid_of("tid").alias("pid")), strings


def _registered_over(ids: pl.Series, text: pl.Series, strings: pl.DataFrame) -> pl.Series:
    """``coalesce(StringIds value of ids, text)``, made by writing the few registered strings
    over the text column: a coalesce of two text columns copies every row's text (3M NVTX rows:
    ~0.1 s and ~0.2 GB), while most ranges carry their text inline and no id."""
    at = ids.is_not_null().arg_true()
    if at.is_empty():
        return text
    found = ids.gather(at).replace_strict(
        strings["id"], strings["value"], default=None, return_dtype=pl.String
    )
    kept = found.is_not_null()
    return text.scatter(at.filter(kept), found.filter(kept))


def nvtx_domains(df: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """Each (pid, domain id) key's name, from the domain-create rows of ``df`` (the last
    creation of a key counts)."""
    text = pl.when(pl.col("text") != "").then("text")
    return (  # a null key matches no range, as in a join
        df.filter(pl.col("etype") == NVTX_DOMAIN_CREATE)
        .drop_nulls(["pid", "domain_id"])
        .select(
            pl.struct("pid", "domain_id").alias("key"),
            pl.coalesce(_names(pl.col("text_id"), strings), text).alias("domain"),
        )
        .unique("key", keep="last")
    )


def nvtx_ranges(
    df: pl.DataFrame,
    strings: pl.DataFrame,
    domains: pl.DataFrame,
    last_time: Callable[[], int | None],
) -> tuple[pl.DataFrame, int]:
    """The rows of :func:`read_nvtx_rows` as ranges (``is_range`` marks the rows that are; an
    unended one ends at ``last_time()``, asked only then), and how many range names are not in
    StringIds."""
    # a lookup of the two key columns, not a join (which holds every row's match): domains are few
    domain = df.select(
        pl.struct("pid", "domain_id").replace_strict(
            domains["key"], domains["domain"], default=None, return_dtype=pl.String
        )
    ).to_series()
    is_range = pl.col("etype") != NVTX_DOMAIN_CREATE
    lost = pl.col("text_id").is_not_null() & ~pl.col("text_id").is_in(strings["id"].implode()) & (
        pl.col("text") == ""
    )
    unended = pl.col("end").is_null() & is_range
    unnamed, unended = df.select((lost & is_range).sum(), unended.sum()).row(0)
    last = last_time() if unended else None  # a full scan: only when needed
    ranges = df.select(
        "pid",
        "tid",
        "start",
        pl.col("end").fill_null(last if last is not None else 0),
        "name",
        domain.alias("domain"),
        pl.col("etype")
        .replace_strict(NVTX_RANGE_TYPES, default=None, return_dtype=pl.String)
        .alias("style"),
        pl.col("end_tid").is_not_null().alias("cross_thread"),
        is_range.alias("is_range"),
    )
    return ranges, int(unnamed)


def note_nvtx_unnamed(n: int, notes: Notes) -> None:
    if n:
        notes.said.append(f"{n} NVTX range names not found in StringIds "
                          "(shown as empty names)")  # fmt: skip


#: TARGET_INFO_GPU's SM count and per-SM limits (nsys 2022.2 to 2026), each kept only in
#: [1, 2^31) (anything else is unknown)
GPU_LIMITS = ("smCount", "maxWarpsPerSm", "threadsPerWarp", "maxBlocksPerSm",
              "maxRegistersPerSm", "maxShmemPerSm")  # fmt: skip


def read_gpus(db: ExportTables, keys: pl.DataFrame, not_captured: dict[str, str]) -> pl.DataFrame:
    """Name each (pid, device) of ``keys`` (those of the kernels and memory ops, repeats
    allowed); TARGET_INFO_CUDA_DEVICE maps CUDA ordinals to GPUs when present."""
    keys = keys.unique()
    if not db.has("TARGET_INFO_GPU"):
        not_captured["gpu_info"] = ("not captured (no TARGET_INFO_GPU table): GPU model and "
                                    "SM count unknown")  # fmt: skip
        unknown = {c: pl.lit(None, t) for c, t in model.GPU_SCHEMA.items() if c not in keys}
        return keys.with_columns(**unknown).select(list(model.GPU_SCHEMA)).sort("pid", "device")
    t = "TARGET_INFO_GPU"
    db.need(t, "id")
    info = db.small(
        t, ["id", "name", "totalMemory", *GPU_LIMITS],
        {"gpu_id": pl.Int64, "gpu_name": pl.String, "total_memory_bytes": pl.Int64,
         **dict.fromkeys(GPU_LIMITS, pl.Int64)},
    ).unique("gpu_id")  # fmt: skip
    sane = {c: pl.when(pl.col(c).is_between(1, _DIMENSION - 1)).then(pl.col(c))
            for c in GPU_LIMITS}  # fmt: skip
    info = info.with_columns(**sane).select(
        "gpu_id", "gpu_name", "total_memory_bytes",
        pl.col("smCount").alias("sm_count"),
        (pl.col("maxWarpsPerSm") * pl.col("threadsPerWarp")).alias("max_threads_per_sm"),
        pl.col("maxBlocksPerSm").alias("max_blocks_per_sm"),
        pl.col("maxRegistersPerSm").alias("registers_per_sm"),
        pl.col("maxShmemPerSm").alias("shared_bytes_per_sm"),
    )  # fmt: skip
    if db.has("TARGET_INFO_CUDA_DEVICE"):
        db.need("TARGET_INFO_CUDA_DEVICE", "pid", "cudaId", "gpuId")
        mapping = db.small(
            "TARGET_INFO_CUDA_DEVICE", ["pid", "cudaId", "gpuId"],
            {"pid": pl.Int64, "device": pl.Int64, "gpu_id": pl.Int64},
        ).unique(["pid", "device"])
        keys = keys.join(mapping, on=["pid", "device"], how="left").with_columns(
            pl.col("gpu_id").fill_null(pl.col("device"))
        )
    else:
        keys = keys.with_columns(gpu_id=pl.col("device"))
    out = keys.join(info, on="gpu_id", how="left")
    return out.select(list(model.GPU_SCHEMA)).cast(model.GPU_SCHEMA).sort("pid", "device")


def _read_memory_events(
    db: ExportTables, not_captured: dict[str, str], notes: Notes
) -> pl.DataFrame:
    t = MEMORY_TABLE
    if not db.has(t):
        not_captured["memory_usage"] = (
            f"not captured (no {t} table; record with --cuda-memory-usage=true)"
        )
        return model.empty(model.MEMORY_EVENT_SCHEMA)
    db.need(t, "start", "globalPid", "deviceId", "bytes", "memoryOperationType")
    df = db.select(
        t,
        ["start", "globalPid", "deviceId", "bytes", "memoryOperationType"],
        {
            "start": pl.Int64,
            "gpid": pl.Int64,
            "device": pl.Int64,
            "bytes": pl.Int64,
            "op": pl.Int64,
        },
    )
    complete = pl.all_horizontal(pl.col("start", "device", "bytes").is_not_null())
    notes.dropped["memory usage rows with a missing start/device/bytes"] = int(
        df.select((~complete).sum()).item()
    )
    df = df.filter(complete).with_columns(
        pid_of("gpid").alias("pid"),
        pl.when(pl.col("op") == 1).then(-pl.col("bytes")).otherwise(pl.col("bytes")).alias("bytes"),
    )
    return df.select(list(model.MEMORY_EVENT_SCHEMA)).cast(model.MEMORY_EVENT_SCHEMA)
