"""An nsys SQLite export opened read-only and immutable, with its table and column catalogue.

Exports differ by version (lazy exports omit empty tables; columns come and go), so readers ask
the catalogue what exists and select by name; a missing optional column degrades to NULL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.bulk import DB_ERRORS, BulkReader

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_ID_LIST = 100_000  # above this many distinct name ids, read StringIds whole


def pid_of(col: str) -> pl.Expr:
    """PID bits of a serialized GlobalId (schema doc §2)."""
    return ((pl.col(col) // (1 << 24)) % (1 << 24)).cast(pl.Int64)


def connect_readonly(path: Path) -> tuple[sqlite3.Connection, str]:
    """Open an SQLite file so that nothing (not even a journal) can be written."""
    if not path.exists():
        raise NsysmoeError(f"{path}: no such file; check the path")
    if path.is_dir():
        raise NsysmoeError(f"{path}: is a directory; pass an .sqlite export file")
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        raise NsysmoeError(
            f"{path}: neither an SQLite export nor a profiler JSON trace; for an nsys report run "
            "`nsys export --type sqlite -o REPORT.sqlite REPORT.nsys-rep` and pass REPORT.sqlite"
        )
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False), uri


class Db:
    """A read-only export plus its table/column catalogue; bulk reads go through BulkReader."""

    def __init__(self, conn: sqlite3.Connection, path: Path, bulk: BulkReader):
        self.conn = conn
        self.path = path
        self.bulk = bulk
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = {r[0] for r in rows}
        self._columns: dict[str, set[str]] = {}

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            info = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = {r[1] for r in info}
        return self._columns[table]

    def col(self, table: str, name: str, fallback: str = "NULL") -> str:
        """The column if the table has it, else a SQL literal: missing optional columns degrade."""
        return f'"{name}"' if name in self.columns(table) else fallback

    def frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        return self.bulk.frame(sql, schema)

    def small(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """Small tables with nullable text (GPU info): row-wise sqlite3 is fine and type-safe."""
        rows = self.conn.execute(sql).fetchall()
        return pl.DataFrame(rows, schema=schema, orient="row")

    def strings(self, ids: pl.Series) -> pl.DataFrame:
        """StringIds rows for the given ids only: StringIds can hold millions of rows, while a
        table's distinct name ids are usually a few thousand."""
        unique = ids.drop_nulls().unique()
        where = ""
        if len(unique) <= MAX_ID_LIST:
            where = " WHERE id IN (" + ",".join(map(str, unique.to_list())) + ")"
        return self.frame(
            f"SELECT id, coalesce(value, '') FROM StringIds{where}",
            {"id": pl.Int64, "value": pl.String},
        )

    def metadata(self) -> dict[str, str]:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.has(table):
                return dict(self.conn.execute(f"SELECT name, value FROM {table}").fetchall())
        return {}


@contextmanager
def opened(path: Path) -> Iterator[Db]:
    conn, uri = connect_readonly(path)
    bulk = None
    try:
        bulk = BulkReader(uri, conn)
        yield Db(conn, path, bulk)
    except DB_ERRORS as exc:  # raised here or in the caller's with-block
        raise _corrupt(path, exc) from None
    finally:
        if bulk is not None:
            bulk.close()
        conn.close()


def _corrupt(path: Path, exc: Exception) -> NsysmoeError:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return NsysmoeError(
        f"{path}: unreadable SQLite ({reason}); the file is truncated or corrupt, export it again"
    )
