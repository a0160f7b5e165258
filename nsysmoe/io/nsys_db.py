"""An nsys SQLite export opened read-only and immutable, with its table and column catalogue.

Exports differ by version (lazy exports omit empty tables; columns come and go), so readers ask
the catalogue what exists and select by name; a missing optional column degrades to NULL, a
missing required one is named in the error.

``immutable=1`` makes SQLite ignore a ``-wal`` or ``-journal`` beside the file, so a file that
another process is still writing (or left half-written) would read as something it never was:
such a file is refused, before the read and again after it, as is a file that changed while it
was read. Text is selected as bytes and decoded here (invalid UTF-8 becomes U+FFFD, counted).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.fingerprint import pending_writes
from nsysmoe.io.bulk import DB_ERRORS, BulkReader, MixedTypes
from nsysmoe.io.clean import decode_text
from nsysmoe.io.export_tables import ExportTables
from nsysmoe.io.page_policy import KEYWORDS, pages_enabled

if TYPE_CHECKING:
    from nsysmoe.io.pages import Pages

SQLITE_MAGIC = b"SQLite format 3\x00"
#: rowids per part of a table read in parallel (see :meth:`Db.parts`); the most parts per table
PART_ROWS = 250_000
MAX_PARTS = 16


def pid_of(col: str) -> pl.Expr:
    """PID bits of a serialized GlobalId (schema doc §2)."""
    return ((pl.col(col) // (1 << 24)) % (1 << 24)).cast(pl.Int64)


def read_head(path: Path, n: int) -> bytes:
    """The first ``n`` bytes, or a one-line error saying why the file cannot be read."""
    try:
        with path.open("rb") as fh:
            return fh.read(n)
    except FileNotFoundError:
        raise NsysmoeError(f"{path}: no such file; check the path") from None
    except IsADirectoryError:
        raise NsysmoeError(f"{path}: is a directory; pass an .sqlite export file") from None
    except OSError as exc:
        raise NsysmoeError(
            f"{path}: cannot read ({exc.strerror or exc}); check the file and its permissions"
        ) from None


def check_not_being_written(path: Path) -> None:
    """Refuse a file whose rollback journal or write-ahead log holds changes: ``immutable=1``
    would read the file without them (an un-checkpointed WAL, a writer's spilled pages). The
    caches check the same (:func:`nsysmoe.fingerprint.pending_writes`: such a file has no key)."""
    pending = pending_writes(path)
    if pending is None:
        return
    side, kind = pending
    if kind == "wal":
        raise NsysmoeError(
            f"{path}: {side.name} beside it may hold changes not yet in the file (a writer still "
            "has it open, or did not checkpoint), so its numbers would be wrong; stop the writer, "
            f"or copy both files and run `sqlite3 COPY.sqlite 'PRAGMA wal_checkpoint(TRUNCATE)'` "
            "on the copy, or export again"
        )
    raise NsysmoeError(
        f"{path}: {side.name} beside it means a write to the file is unfinished (nsys "
        "export still running, or interrupted), so its numbers would be wrong; wait for the "
        "writer to finish, or export again"
    )


def _state(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:  # removed or replaced while read
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def connect_readonly(path: Path) -> tuple[sqlite3.Connection, str]:
    """Open an SQLite file so that nothing (not even a journal) can be written."""
    if not path.exists():
        raise NsysmoeError(f"{path}: no such file; check the path")
    if path.is_dir():
        raise NsysmoeError(f"{path}: is a directory; pass an .sqlite export file")
    if read_head(path, len(SQLITE_MAGIC)) != SQLITE_MAGIC:
        raise NsysmoeError(
            f"{path}: neither an SQLite export nor a profiler JSON trace; for an nsys report run "
            "`nsys export --type sqlite -o REPORT.sqlite REPORT.nsys-rep` and pass REPORT.sqlite"
        )
    check_not_being_written(path)
    # the path's own bytes, percent-encoded: a name that is not UTF-8 (surrogate-escaped in
    # the str) opens the same file, and the URI itself is ASCII
    uri = f"file:{quote(os.fsencode(path.resolve()))}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    return conn, uri


class _Text:
    """``sqlite3`` text factory: invalid UTF-8 becomes U+FFFD (counted), never an error."""

    def __init__(self) -> None:
        self.replaced = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced += 1
            return raw.decode("utf-8", "replace")


def _checked(expr: str) -> str:
    """An integer column's value, or NULL for anything else (text, a float, a blob)."""
    return f"iif(typeof({expr}) = 'integer', {expr}, NULL)"


_INT_LITERAL = re.compile(r"-?[0-9]{1,18}")
_PLAIN = re.compile(r'"(\w+)"|([A-Za-z_]\w*)')  # a column named as it is


def _constants(exprs: Sequence[str], schema: dict[str, pl.DataType]) -> dict[str, object]:
    """The columns whose expression is a literal standing in for a missing column (``NULL``,
    ``0``, ``''``), with the value each would read as: added in polars instead of being decoded
    row by row. None when every column is one (the SELECT still has to count the rows)."""
    consts: dict[str, object] = {}
    for (name, dtype), expr in zip(schema.items(), exprs, strict=True):
        if dtype == pl.String and expr in ("NULL", "''"):
            consts[name] = ""  # text is read as coalesce(value, '')
        elif dtype == pl.Int64 and expr == "NULL":
            consts[name] = None
        elif dtype == pl.Int64 and _INT_LITERAL.fullmatch(expr):
            consts[name] = int(expr)
    return consts if len(consts) < len(schema) else {}


def all_of(*conditions: str) -> str:
    """A condition requiring every non-empty one of ``conditions`` ('' where none is)."""
    return " AND ".join(f"({c})" for c in conditions if c)


def _where(*conditions: str) -> str:
    """A WHERE clause requiring every non-empty condition, or nothing."""
    held = all_of(*conditions)
    return f" WHERE {held}" if held else ""


class Db(ExportTables):
    """A read-only SQLite export plus its table/column catalogue; bulk reads decoded from the
    file's pages where they are the plain case (:mod:`nsysmoe.io.pages`), else through
    BulkReader."""

    def __init__(
        self, conn: sqlite3.Connection, path: Path, bulk: BulkReader, pages: Pages | None = None
    ):
        self.conn = conn
        self.path = path
        self.bulk = bulk
        self.pages = pages  # the plain case decoded from the file's pages (io.pages)
        self._text = _Text()
        conn.text_factory = self._text
        self.replaced = 0  # strings with invalid UTF-8 read by select()
        #: tables where a value of another type stood in an integer column (read as NULL)
        self.mixed: set[str] = set()
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = {r[0] for r in rows}
        self._columns: dict[str, set[str]] = {}
        rows = conn.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'index'").fetchall()
        self._indexed = {r[0] for r in rows}

    @property
    def replaced_strings(self) -> int:
        """Strings with invalid UTF-8 bytes, shown with U+FFFD, read so far."""
        return self.replaced + self._text.replaced

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            info = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = {r[1] for r in info}
        return self._columns[table]

    def parts(self, table: str) -> list[str]:
        """Conditions splitting ``table`` into rowid ranges of about :data:`PART_ROWS` rows to
        read in parallel, or ``[""]`` (the whole table) where that could change the rows' order
        or is not worth it. A scan of a rowid table without indexes returns rows in rowid
        order, as do range scans on the rowid, so the parts joined in order are the whole
        scan; an index could make SQLite answer from it in its own order, so indexed tables
        (and tables without rowid, whose key is an index) are read whole."""
        if not self.bulk.parallel:
            return [""]
        return self.ranges(table, PART_ROWS, MAX_PARTS)

    def ranges(self, table: str, rows: int, most: int | None = None) -> list[str]:
        """Conditions splitting ``table`` into rowid ranges of about ``rows`` rows (at most
        ``most`` of them), which read one after another give the rows one scan gives, in its
        order; ``[""]`` (the whole table) where they might not (see :meth:`parts`), and for a
        table of fewer than ``2 * rows`` rowids."""
        if table in self._indexed:
            return [""]
        names = {c.lower() for c in self.columns(table)}
        rowid = next((n for n in ("rowid", "_rowid_", "oid") if n not in names), None)
        if rowid is None:  # every alias is a column's name
            return [""]
        low = self.conn.execute(f"SELECT min({rowid}) FROM {table}").fetchone()[0]
        high = self.conn.execute(f"SELECT max({rowid}) FROM {table}").fetchone()[0]
        if low is None or (high - low) < 2 * rows:
            return [""]
        n = (high - low) // rows if most is None else min(most, (high - low) // rows)
        cuts = [low + (high - low) * i // n for i in range(1, n)]
        return [
            f"{rowid} <= {cuts[0]}",
            *(f"{rowid} > {a} AND {rowid} <= {b}" for a, b in zip(cuts, cuts[1:], strict=False)),
            f"{rowid} > {cuts[-1]}",
        ]

    def select(
        self, table: str, exprs: Sequence[str], schema: dict[str, pl.DataType], where: str = ""
    ) -> pl.DataFrame:
        """``SELECT exprs FROM table WHERE where`` as a frame with ``schema``: Int64 columns are
        integers (a value of another type becomes NULL, and the table is noted in ``mixed``),
        String columns are text decoded from bytes (invalid UTF-8 counted in ``replaced``).
        A big table is read in rowid ranges at once (:meth:`parts`), in the same order."""
        consts = _constants(exprs, schema)
        names = [n for n in schema if n not in consts]
        text = [n for n in names if schema[n] == pl.String]
        raw = {n: pl.Binary if n in text else schema[n] for n in names}
        plain = [
            f"CAST(coalesce({e}, '') AS BLOB)" if n in text else e
            for n, e in zip(schema, exprs, strict=True)
            if n not in consts
        ]
        checked = [e if n in text else _checked(e) for n, e in zip(names, plain, strict=True)]
        # every column gets its own name: two missing columns both read as ``NULL``
        plain = [f'{e} AS "{n}"' for n, e in zip(names, plain, strict=True)]
        checked = [f'{e} AS "{n}"' for n, e in zip(names, checked, strict=True)]
        direct = self._from_pages(table, exprs, schema, names, where)
        if direct is not None:
            df = direct
        else:
            df = self._from_sql(table, plain, checked, raw, exprs, schema, where)
        for n in text:
            decoded, bad = decode_text(df[n])
            self.replaced += bad
            df = df.with_columns(decoded.alias(n))
        if consts:
            df = df.with_columns(pl.lit(v, schema[n]).alias(n) for n, v in consts.items())
        return df.select(list(schema))

    def _from_pages(self, table: str, exprs: Sequence[str], schema: dict[str, pl.DataType],
                    names: list[str], where: str) -> pl.DataFrame | None:  # fmt: skip
        """The raw columns decoded from the file's pages (:mod:`nsysmoe.io.pages`), where
        every one is a plain column of ``table`` and the pages are the plain case; else None."""
        if self.pages is None:
            return None
        by_name = dict(zip(schema, exprs, strict=True))
        columns = [_PLAIN.fullmatch(by_name[n]) for n in names]
        if not names or not all(columns) or any(m[2] and m[2].upper() in KEYWORDS
                                                for m in columns):  # fmt: skip
            return None  # an expression, or a keyword (NULL, CURRENT_DATE) rather than a column
        got = self.pages.select(
            table, [m[1] or m[2] for m in columns], [schema[n] == pl.String for n in names], where
        )
        return None if got is None else pl.DataFrame(dict(zip(names, got, strict=True)))

    def _from_sql(self, table: str, plain: list[str], checked: list[str],
                  raw: dict[str, pl.DataType], exprs: Sequence[str],
                  schema: dict[str, pl.DataType], where: str) -> pl.DataFrame:  # fmt: skip
        tails = [f" FROM {table}{_where(part, where)}" for part in self.parts(table)]
        try:
            if not self.bulk.arrow:  # row tuples convert leniently (1.5 → 1): always check
                raise MixedTypes(table)
            df = self.bulk.frames(["SELECT " + ", ".join(plain) + t for t in tails], raw)
        except MixedTypes:
            df = self.bulk.frames(["SELECT " + ", ".join(checked) + t for t in tails], raw)
            if self.bulk.arrow or self._has_mixed(table, exprs, schema, where):
                self.mixed.add(table)
        return df

    def _has_mixed(
        self, table: str, exprs: Sequence[str], schema: dict[str, pl.DataType], where: str
    ) -> bool:
        ints = [e for e, t in zip(exprs, schema.values(), strict=True) if t != pl.String]
        if not ints:
            return False
        odd = " OR ".join(f"typeof({e}) NOT IN ('integer', 'null')" for e in ints)
        where = f"WHERE {where} AND ({odd})" if where else f"WHERE {odd}"
        return self.conn.execute(f"SELECT 1 FROM {table} {where} LIMIT 1").fetchone() is not None

    def rows(self, table: str, names: Sequence[str]) -> list[tuple[object, ...]]:
        cols = ", ".join(f'"{n}"' for n in names)
        return self.conn.execute(f"SELECT {cols} FROM {table}").fetchall()

    def last_time(self, table: str) -> int | None:
        sql = 'SELECT max(max({s}), coalesce(max({e}), 0)) FROM {t}'
        row = self.conn.execute(sql.format(s="start", e='"end"', t=table)).fetchone()
        if row and row[0] is not None and type(row[0]) is not int:  # text sorts above numbers
            checked = sql.format(s=_checked("start"), e=_checked('"end"'), t=table)
            row = self.conn.execute(checked).fetchone()
        return row[0] if row and type(row[0]) is int else None


@contextmanager
def opened(path: Path, pool: Executor | None = None) -> Iterator[Db]:
    """The export at ``path`` as a :class:`Db`; ``pool`` reads big tables in parallel parts."""
    conn, uri = connect_readonly(path)
    before = _state(path)
    bulk = pages = None
    try:
        bulk = BulkReader(uri, conn, pool)
        if pages_enabled(path):  # the decoder (and numba) imported only where it is used
            from nsysmoe.io.pages import Pages

            pages = Pages.open(path, conn, pool)
        yield Db(conn, path, bulk, pages)
        if _state(path) != before:
            raise NsysmoeError(
                f"{path}: the file changed while it was read (is it still being written?); "
                "wait for the writer to finish and run again"
            )
        check_not_being_written(path)
    except (*DB_ERRORS, UnicodeDecodeError) as exc:  # here or in the caller's with-block; an
        raise _corrupt(path, exc) from None  # error message quoting a damaged schema's bytes
    finally:
        if bulk is not None:
            bulk.close()
        if pages is not None:
            pages.close()
        conn.close()


def _corrupt(path: Path, exc: Exception) -> NsysmoeError:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, UnicodeDecodeError):
        reason = "an error quoting bytes that are not UTF-8, from a damaged schema"
    return NsysmoeError(
        f"{path}: unreadable SQLite ({reason}); the file is truncated or corrupt, export it again"
    )

