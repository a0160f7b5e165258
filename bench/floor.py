"""The decode floor: the sqlite3 command-line tool reading every column nsysmoe reads, once.

One ``SELECT total(c1), total(c2), … FROM T [WHERE …]`` per table nsysmoe's reader
(``nsysmoe/io/nsys_sqlite.py``) selects in bulk, with its columns and its row filters; a text
column counts as ``total(length(c))`` (which loads every byte of the text). ``total()`` makes
SQLite decode each value and print one line per table, so the floor measures decoding, not
printing. Columns a file lacks are left out (nsysmoe reads NULL for them). Small tables
(metadata, GPU info) are left out: they are a few rows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: nsysmoe's row filters (API_EVENT_CLASSES, NVTX_RANGE_TYPES + NVTX_DOMAIN_CREATE)
RUNTIME_WHERE = "WHERE eventClass IN (0, 1)"
NVTX_WHERE = "WHERE eventType IN (59, 60, 70, 71, 75)"
GPU = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid"]
NVTX_TABLE = "NVTX_EVENTS"

#: table -> (columns in the order nsysmoe selects them, text columns, filter)
READS: dict[str, tuple[list[str], set[str], str]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        [*GPU, "demangledName", "shortName", "graphNodeId", "graphId"],
        set(),
        "",
    ),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": ([*GPU, "graphId"], set(), ""),
    "CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE": ([*GPU, "graphId"], set(), ""),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ([*GPU, "bytes", "copyKind"], set(), ""),
    "CUPTI_ACTIVITY_KIND_MEMSET": ([*GPU, "bytes"], set(), ""),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        ["start", "end", "globalTid", "correlationId", "nameId"],
        set(),
        RUNTIME_WHERE,
    ),
    NVTX_TABLE: (
        ["start", "end", "eventType", "text", "textId", "globalTid", "endGlobalTid", "domainId"],
        {"text"},
        NVTX_WHERE,
    ),
    "CUDA_GPU_MEMORY_USAGE_EVENTS": (
        ["start", "globalPid", "deviceId", "bytes", "memoryOperationType"],
        set(),
        "",
    ),
    # nsysmoe reads only the ids its tables reference; the floor reads the whole table (in the
    # generated exports StringIds has ~60 rows: NVTX names are inline text)
    "StringIds": (["id", "value"], {"value"}, ""),
}


def statements(path: Path) -> dict[str, str]:
    """``{table: SELECT …;}`` for the tables of ``path`` that nsysmoe reads in bulk."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        out = {}
        for table, (columns, text, where) in READS.items():
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if not have:
                continue
            if "eventClass" not in have:
                where = "" if where == RUNTIME_WHERE else where
            sums = ", ".join(
                f'total(length("{c}"))' if c in text else f'total("{c}")'
                for c in columns
                if c in have
            )
            out[table] = f"SELECT {sums} FROM {table} {where}".rstrip() + ";"
        return out
    finally:
        con.close()


def command(cli: str, path: Path) -> list[str]:
    """One sqlite3 process reading every table in turn."""
    return [cli, "-readonly", uri(path), " ".join(statements(path).values())]


def command_split(cli: str, path: Path) -> list[str]:
    """Two sqlite3 processes at once, NVTX in one and everything else in the other: the split
    nsysmoe's reader makes (NVTX on a second connection in a thread)."""
    sql = statements(path)
    nvtx = sql.pop(NVTX_TABLE, "SELECT 1;")
    rest = " ".join(sql.values()) or "SELECT 1;"
    script = '"$0" -readonly "$1" "$2" & "$0" -readonly "$1" "$3"; wait'
    return ["sh", "-c", script, cli, uri(path), nvtx, rest]


def uri(path: Path) -> str:
    return f"file:{path.resolve()}?mode=ro&immutable=1"
