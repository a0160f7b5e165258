"""Bulk, column-oriented reads from a read-only SQLite file.

Python's ``sqlite3`` builds one tuple per row (about 3× slower than the ``sqlite3`` command-line
tool on a million kernels); the Arrow ADBC SQLite driver hands polars whole Arrow columns instead,
and honours ``mode=ro&immutable=1``. Without the driver we fall back to ``sqlite3``. ADBC infers a
column's type from its first rows, so callers select integers, or text as ``CAST(coalesce(…, '')
AS BLOB)`` — never a text column that starts with NULLs, and never text as Arrow strings (invalid
UTF-8 there makes polars panic). A column that holds something else than the type asked for
raises :class:`MixedTypes`, so the caller can select it again with the values checked.
"""

from __future__ import annotations

import sqlite3

import polars as pl

try:  # pragma: no cover - exercised by whichever backend is installed
    import adbc_driver_manager
    import adbc_driver_sqlite

    ADBC_ERRORS: tuple[type[Exception], ...] = (adbc_driver_manager.Error,)
except ImportError:  # pragma: no cover
    adbc_driver_manager = None
    ADBC_ERRORS = ()

DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, *ADBC_ERRORS)


class MixedTypes(Exception):
    """A selected column holds values of another type than asked (text in an integer column)."""


class BulkReader:
    """Runs SELECTs on one read-only URI and returns polars frames with a fixed schema."""

    def __init__(self, uri: str, fallback: sqlite3.Connection):
        self._fallback = fallback
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
        stmt = adbc_driver_manager.AdbcStatement(self._conn)
        try:
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

    def close(self) -> None:
        for handle in (self._conn, self._db):
            if handle is not None:
                handle.close()
