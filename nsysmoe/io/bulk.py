"""Bulk, column-oriented reads from a read-only SQLite file.

Python's ``sqlite3`` builds one tuple per row (about 3× slower than the ``sqlite3`` command-line
tool on a million kernels); the Arrow ADBC SQLite driver hands polars whole Arrow columns instead,
and honours ``mode=ro&immutable=1``. Without the driver we fall back to ``sqlite3``. ADBC infers a
column's type from its first rows, so callers select integers, or text as ``CAST(coalesce(…, '')
AS BLOB)`` — never a text column that starts with NULLs, and never text as Arrow strings (invalid
UTF-8 there makes polars panic). A column that holds something else than the type asked for
raises :class:`MixedTypes`, so the caller can select it again with the values checked.

The driver decodes one row at a time on one core (about 2.5x SQLite's own decode), so a big
table is read as several SELECTs over rowid ranges (:meth:`BulkReader.frames`), each on its own
connection in a shared pool of threads: the driver and polars release the GIL, so the parts
decode on every core, and joined in order they are the rows one SELECT gives.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from concurrent.futures import Executor, Future, wait
from typing import TypeVar

import polars as pl

try:  # pragma: no cover - exercised by whichever backend is installed
    import adbc_driver_manager
    import adbc_driver_sqlite

    ADBC_ERRORS: tuple[type[Exception], ...] = (adbc_driver_manager.Error,)
except ImportError:  # pragma: no cover
    adbc_driver_manager = None
    ADBC_ERRORS = ()

DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, *ADBC_ERRORS)


#: the SQLite driver's rows per Arrow batch (default 1024); its type guess reads the first batch
BATCH_ROWS = "adbc.sqlite.query.batch_rows"


T = TypeVar("T")


class MixedTypes(Exception):
    """A selected column holds values of another type than asked (text in an integer column)."""


def in_order(parts: Sequence[Future[T]]) -> list[T]:
    """Every part's result, in order; where one fails, the others are cancelled or waited for
    (the caller reads again or gives up: no work left behind) and the first failing part's
    error is raised, as reading them in order would."""
    try:
        return [part.result() for part in parts]
    except BaseException:
        for part in parts:
            part.cancel()
        wait(parts)
        raise


class BulkReader:
    """Runs SELECTs on one read-only URI and returns polars frames with a fixed schema."""

    def __init__(self, uri: str, fallback: sqlite3.Connection, pool: Executor | None = None):
        self._uri = uri
        self._fallback = fallback
        self._pool = pool
        self._db = self._conn = None
        if adbc_driver_manager is not None:
            self._db = adbc_driver_sqlite.connect(uri)
            self._conn = adbc_driver_manager.AdbcConnection(self._db)

    @property
    def arrow(self) -> bool:
        """Whether reads go through ADBC (else row tuples from ``sqlite3``, which convert types
        leniently, so the caller checks every value in SQL)."""
        return self._conn is not None

    def frame(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        if self._conn is None:
            rows = self._fallback.execute(sql).fetchall()
            try:
                return pl.DataFrame(rows, schema=schema, orient="row")
            except (pl.exceptions.PolarsError, TypeError, OverflowError) as exc:
                raise MixedTypes(str(exc)) from None
        return _arrow_frame(self._conn, sql, schema)

    @property
    def parallel(self) -> bool:
        """Whether :meth:`frames` reads its SELECTs at the same time."""
        return self._conn is not None and self._pool is not None

    def frames(self, sqls: Sequence[str], schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """The SELECTs' rows one after another, as :meth:`frame` gives each; read in the pool,
        each on a connection of its own (an ADBC connection serves one thread at a time). The
        first failing part's error is raised, as reading them in order would."""
        if not self.parallel or len(sqls) < 2:
            return pl.concat([self.frame(sql, schema) for sql in sqls])
        parts = [self._pool.submit(self._frame_alone, sql, schema) for sql in sqls]
        return pl.concat(in_order(parts))

    def _frame_alone(self, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        db = adbc_driver_sqlite.connect(self._uri)
        try:
            conn = adbc_driver_manager.AdbcConnection(db)
            try:
                return _arrow_frame(conn, sql, schema)
            finally:
                conn.close()
        finally:
            db.close()

    def close(self) -> None:
        for handle in (self._conn, self._db):
            if handle is not None:
                handle.close()


def _arrow_frame(conn: object, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """One SELECT through an ADBC connection, as a frame with ``schema`` (see the module doc)."""
    stmt = adbc_driver_manager.AdbcStatement(conn)
    try:
        try:  # fewer, larger Arrow chunks: less per-batch work in the driver and in polars
            stmt.set_options(**{BATCH_ROWS: "65536"})
        except adbc_driver_manager.Error:  # pragma: no cover - a driver without the option
            pass
        stmt.set_sql_query(sql)
        handle, _ = stmt.execute_query()
        df = pl.DataFrame(handle)
    except pl.exceptions.ComputeError as exc:  # the driver's error, raised while streaming
        if "Type mismatch" in str(exc):
            raise MixedTypes(str(exc)) from None
        raise sqlite3.DatabaseError(str(exc).removeprefix("got external error: ")) from None
    finally:
        stmt.close()
    if df.width != len(schema) or df.is_empty():  # no rows: no columns, or guessed types
        return pl.DataFrame(schema=schema)
    for got, want in zip(df.dtypes, schema.values(), strict=True):
        if got != want and got != pl.Null:  # e.g. text in the first rows of an integer column
            raise MixedTypes(f"{got} where {want} was asked for")
    return df.rename(dict(zip(df.columns, schema, strict=True))).cast(schema)
