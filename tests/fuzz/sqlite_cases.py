"""Hostile SQLite exports: real-DDL exports damaged one way each (bytes, tables, columns, values,
text encodings, sidecar journals). Each mutation edits a private copy in place."""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

Mutation = Callable[[Path], None]
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"


def _sql(*statements: str) -> Mutation:
    def apply(path: Path) -> None:
        con = sqlite3.connect(path)
        try:
            for s in statements:
                con.execute(s)
            con.commit()
        finally:
            con.close()

    return apply


def _truncate(fraction: float) -> Mutation:
    def apply(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * fraction)])

    return apply


def _flip(seed: int, n: int) -> Mutation:
    """Overwrite ``n`` random bytes past the 100-byte header (page corruption)."""

    def apply(path: Path) -> None:
        data = bytearray(path.read_bytes())
        rng = random.Random(seed)
        for _ in range(n):
            data[rng.randrange(100, len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))

    return apply


def _header(offset: int, value: bytes) -> Mutation:
    def apply(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[offset : offset + len(value)] = value
        path.write_bytes(bytes(data))

    return apply


def _every(table: str, k: int, assignment: str) -> Mutation:
    """``assignment`` on every k-th row of ``table`` (by rowid); where the real DDL's NOT NULL
    forbids the value, the table is first rebuilt without constraints (as a damaged or
    hand-made export would be)."""
    update = f"UPDATE {table} SET {assignment} WHERE rowid % {k} = 0"

    def apply(path: Path) -> None:
        try:
            _sql(update)(path)
        except sqlite3.IntegrityError:
            _sql(f"CREATE TABLE fuzz_copy AS SELECT * FROM {table}", f"DROP TABLE {table}",
                 f"ALTER TABLE fuzz_copy RENAME TO {table}", update)(path)  # fmt: skip

    return apply


def _sidecar(suffix: str, data: bytes) -> Mutation:
    def apply(path: Path) -> None:
        Path(str(path) + suffix).write_bytes(data)

    return apply


def _bad_utf8(table: str, column: str, k: int) -> Mutation:
    """Bytes that are no UTF-8 (0xff 0xfe, a lone continuation byte) in a TEXT column."""
    return _sql(f"UPDATE {table} SET {column} = CAST(X'6b65726e656cfffe80' AS TEXT) "
                f"WHERE rowid % {k} = 0")  # fmt: skip


def mutations() -> dict[str, Mutation]:
    m: dict[str, Mutation] = {}
    for f in (0.0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99):
        m[f"truncate-{f}"] = _truncate(f)
    for seed in range(24):
        m[f"flip-{seed}"] = _flip(seed, 1 + seed % 6 * 40)
    m["header-page-size"] = _header(16, b"\x00\x03")
    m["header-magic"] = _header(0, b"SQLite format 4\x00")
    m["header-reserved"] = _header(20, b"\xff")
    for table in (KERNEL, RUNTIME, NVTX, "StringIds", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "TARGET_INFO_GPU", "META_DATA_EXPORT",
                  "TARGET_INFO_CUDA_DEVICE", "ThreadNames"):  # fmt: skip
        m[f"drop-{table}"] = _sql(f"DROP TABLE IF EXISTS {table}")
        m[f"empty-{table}"] = _sql(f"DELETE FROM {table}") if table != "META_DATA_EXPORT" \
            else _sql("DELETE FROM META_DATA_EXPORT WHERE 1")
    for col in ("start", '"end"', "deviceId", "streamId", "globalPid", "demangledName",
                "shortName", "correlationId"):  # fmt: skip
        m[f"kernel-null-{col.strip(chr(34))}"] = _every(KERNEL, 7, f"{col} = NULL")
        m[f"kernel-text-{col.strip(chr(34))}"] = _every(KERNEL, 5, f"{col} = 'x<b>'")
    for col in ("start", '"end"', "globalTid", "correlationId", "eventClass"):
        m[f"runtime-null-{col.strip(chr(34))}"] = _every(RUNTIME, 3, f"{col} = NULL")
        m[f"runtime-text-{col.strip(chr(34))}"] = _every(RUNTIME, 4, f"{col} = 'abc'")
    for col in ("start", '"end"', "globalTid", "eventType", "text", "textId", "domainId",
                "endGlobalTid"):  # fmt: skip
        m[f"nvtx-null-{col.strip(chr(34))}"] = _every(NVTX, 3, f"{col} = NULL")
        m[f"nvtx-text-{col.strip(chr(34))}"] = _every(NVTX, 4, f"{col} = '1.5e99999'")
    big, small = 2**63 - 1, -(2**63)
    m["kernel-end-max"] = _every(KERNEL, 9, f'"end" = {big}')
    m["kernel-start-min"] = _every(KERNEL, 9, f"start = {small}")
    m["kernel-inverted"] = _every(KERNEL, 6, 'start = "end" + 1000')
    m["kernel-negative"] = _every(KERNEL, 6, 'start = -5, "end" = -1')
    m["kernel-zero-length"] = _every(KERNEL, 2, '"end" = start')
    m["kernel-real-values"] = _every(KERNEL, 5, "start = start + 0.5")
    m["kernel-blob-values"] = _every(KERNEL, 8, "start = X'00ff'")
    m["kernel-device-huge"] = _every(KERNEL, 5, f"deviceId = {big}")
    m["kernel-name-dangling-id"] = _every(KERNEL, 4, "demangledName = 987654321")
    m["runtime-corr-duplicates"] = _every(RUNTIME, 2, "correlationId = 1")
    m["nvtx-end-before-start"] = _every(NVTX, 2, '"end" = start - 10')
    m["nvtx-huge-end"] = _every(NVTX, 3, f'"end" = {big}')
    m["strings-bad-utf8"] = _bad_utf8("StringIds", "value", 3)
    m["nvtx-text-bad-utf8"] = _bad_utf8(NVTX, "text", 2)
    m["strings-markup"] = _sql("UPDATE StringIds SET value = value || char(10) || "
                               "'<details ontoggle=alert(1)>' || char(27) || ']0;x' || char(7)")
    m["strings-huge"] = _sql("UPDATE StringIds SET value = printf('%.*c', 100000, 'a') || value "
                             "WHERE rowid % 5 = 0")  # fmt: skip
    m["strings-duplicate-ids"] = _sql("CREATE TABLE s2 AS SELECT * FROM StringIds",
                                      "DROP TABLE StringIds",
                                      "CREATE TABLE StringIds (id INTEGER, value TEXT)",
                                      "INSERT INTO StringIds SELECT * FROM s2",
                                      "INSERT INTO StringIds SELECT id, value || '2' FROM s2",
                                      "DROP TABLE s2")  # fmt: skip
    m["kernel-missing-column"] = _sql(f"ALTER TABLE {KERNEL} DROP COLUMN shortName")
    m["kernel-renamed-start"] = _sql(f"ALTER TABLE {KERNEL} RENAME COLUMN start TO begin")
    m["kernel-as-view"] = _sql(f"ALTER TABLE {KERNEL} RENAME TO k2",
                               f"CREATE VIEW {KERNEL} AS SELECT * FROM k2")  # fmt: skip
    m["wal-sidecar"] = _sidecar("-wal", b"\x37\x7f\x06\x82" + b"\x00" * 28)
    m["journal-sidecar"] = _sidecar("-journal", b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x00" * 512)
    m["shm-sidecar"] = _sidecar("-shm", b"\x00" * 32768)
    return m


def copy_base(base: Path, to: Path) -> Path:
    shutil.copyfile(base, to)
    return to
