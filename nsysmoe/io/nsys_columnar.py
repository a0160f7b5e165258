"""Reader for nsys's columnar exports: ``nsys export --type parquetdir`` (``NAME_pqtdir/`` of
``<TABLE>.parquet``) and ``--type arrowdir`` (``NAME_arwdir/`` of ``<TABLE>.arrow``, each an Arrow
IPC *stream*), nsys 2023 and later; also the partial ``<report>_pqtdir/`` an ``nsys recipe`` run
leaves beside each report.

They hold the SQLite export's tables and columns, typed: ids are unsigned integers (``globalPid``
is UInt64, ``correlationId`` UInt32 in Arrow), names are StringIds ids, NVTX ``text`` is inline.
:class:`Columnar` reads them through the same interface as the SQLite export
(:class:`~nsysmoe.io.export_tables.ExportTables`), so the same per-table readers
(:mod:`nsysmoe.io.nsys_sqlite`) make the same :class:`~nsysmoe.model.Trace`: only the columns a
reader selects are read (a lazy Parquet scan; Arrow streams are read with a column projection),
integers become Int64 exactly as SQLite stores them (a UInt64 past 2^63 as its two's complement,
the value nsys writes to SQLite), text stays text (nulls as '').

One rule says what a folder is (:func:`columnar_kind`): a folder holding ``<TABLE>.parquet`` or
``<TABLE>.arrow`` files is one export; any other folder is a folder of ranks.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.fingerprint import TABLE_SUFFIXES
from nsysmoe.io.arrow_streams import BadStream, Span, read_stream, table_streams
from nsysmoe.io.clean import Notes, decode_text
from nsysmoe.io.export_tables import METADATA_TABLES, ExportTables, parse_where
from nsysmoe.io.nsys_sqlite import check_export, read_export, read_nvtx
from nsysmoe.model import Trace

#: file suffix → export kind; one export holds files of one kind only
SUFFIXES = dict(zip(TABLE_SUFFIXES, ("parquet", "arrow"), strict=True))
T = TypeVar("T")
FORMATS = {"parquet": "nsys-parquet", "arrow": "nsys-arrow", "arrows": "nsys-arrow"}
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def table_files(folder: Path) -> list[Path]:
    """The ``<TABLE>.parquet`` / ``<TABLE>.arrow`` entries of a folder (not opened), sorted;
    none for a folder of ranks or any other folder."""
    try:
        names = os.listdir(folder)
    except OSError as exc:
        raise NsysmoeError(f"{folder}: cannot list it ({exc.strerror or exc}); check its "
                           "permissions") from None  # fmt: skip
    found = (Path(n) for n in names)
    return sorted(folder / p for p in found
                  if p.suffix in SUFFIXES and _TABLE_NAME.fullmatch(p.stem))  # fmt: skip


def columnar_kind(folder: Path) -> str | None:
    """``"parquet"`` or ``"arrow"`` when ``folder`` is one columnar export (it holds
    ``<TABLE>.parquet`` or ``<TABLE>.arrow`` files), else None. A folder holding both kinds is
    refused: two exports mixed, whose tables could come from different reports."""
    kinds = {SUFFIXES[p.suffix] for p in table_files(folder)}
    if len(kinds) > 1:
        raise NsysmoeError(f"{folder}: holds both .parquet and .arrow tables; an export has one "
                           "kind: move one of them to a folder of its own")  # fmt: skip
    return kinds.pop() if kinds else None


def _error(path: Path | str, what: str) -> NsysmoeError:
    return NsysmoeError(f"{path}: {what}")


def _regular(file: Path, what: str) -> None:
    """Refuse, by name, a file that is not a regular one (a FIFO, a link to nothing) before
    anything is read from it."""
    try:
        mode = os.stat(file).st_mode
    except OSError as exc:
        raise _error(file, f"cannot open {what} ({exc.strerror or exc}); a broken link? export "
                           "the report again") from None  # fmt: skip
    if not stat.S_ISREG(mode):
        raise _error(file, f"{what} is not a regular file; export the report again")


class Columnar(ExportTables):
    """A Parquet or Arrow export folder, read by table and column (see the module docstring).
    Every file is only opened for reading; a table file that is not a regular file (a FIFO, a
    link to nothing) is refused by name before anything is read."""

    def __init__(self, path: Path, kind: str):
        self.path, self.kind = path, kind
        #: where each table's rows are: its own file, or a stream's bytes in one .arrows file
        self.spans: dict[str, Span] = {}
        if kind == "arrows":
            _regular(path, "the export")
            try:
                self.spans = table_streams(path)
            except (BadStream, OSError) as exc:
                raise _error(path, f"unreadable Arrow stream file ({exc}); it is truncated, "
                                   "damaged or not `nsys export --type arrow` output: export "
                                   "the report again") from None  # fmt: skip
            self.files = {table: path for table in self.spans}
        else:
            self.files = {p.stem: p for p in table_files(path)}
            for table, file in self.files.items():
                _regular(file, f"table {table}")
        self.tables = set(self.files)
        self.mixed: set[str] = set()
        self.replaced = 0
        self._schemas: dict[str, dict[str, pl.DataType]] = {}

    @property
    def replaced_strings(self) -> int:
        return self.replaced

    def schema(self, table: str) -> dict[str, pl.DataType]:
        """The table's columns and their types, from the file's footer or stream header."""
        if table not in self._schemas:
            file = self.files[table]
            if self.kind == "parquet":
                got = self._guard(table, lambda: pl.read_parquet_schema(file))
            else:
                got = self._guard(table, lambda: pl.read_ipc_stream(
                    self._stream(table, schema_only=True), n_rows=0).schema)
            self._schemas[table] = dict(got)
        return self._schemas[table]

    def _where(self, table: str) -> Path | str:
        """What an error about ``table`` names: its file, or the .arrows file and the table."""
        return f"{self.path} (table {table})" if self.kind == "arrows" else self.files[table]

    def _stream(self, table: str, schema_only: bool = False) -> Path | io.BytesIO:
        """An Arrow table's stream: its file, or its bytes in the one .arrows file (with
        ``schema_only``, its schema alone)."""
        if self.kind == "arrows":
            return io.BytesIO(read_stream(self.path, self.spans[table], schema_only))
        return self.files[table]

    def columns(self, table: str) -> set[str]:
        return set(self.schema(table))

    def _guard(self, table: str, read: Callable[[], T]) -> T:
        """``read()``, a damaged or foreign file said in one line (polars' own reason)."""
        what = "Parquet" if self.kind == "parquet" else "Arrow IPC stream"
        where = self._where(table)
        try:
            return read()
        except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
            reason = " ".join(str(exc).split("\n", 1)[0].split())[:200] or type(exc).__name__
        except pl.exceptions.PanicException as exc:  # a BaseException: polars gave up on it
            reason = " ".join(str(exc).split("\n", 1)[0].split())[:200] or "panic"
        raise _error(where, f"unreadable {what} ({reason}); the file is truncated, damaged or "
                            "not an nsys export table: export the report again") from None

    def _scan(self, table: str, names: Sequence[str]) -> pl.LazyFrame:
        """The columns ``names`` of ``table`` (which it has), as a query: nothing else read (a
        Parquet scan pushes a filter down; an Arrow stream is read with its columns only)."""
        file = self.files[table]
        if self.kind == "parquet":
            return pl.scan_parquet(file).select(names)
        return self._guard(table, lambda: pl.read_ipc_stream(self._stream(table),
                                                             columns=list(names))).lazy()

    def _frame(self, table: str, names: Sequence[str]) -> pl.DataFrame:
        """The columns ``names`` of ``table``, read."""
        return self._guard(table, lambda: self._scan(table, names).collect())

    def _integer(self, table: str, name: str) -> pl.Expr:
        """An integer column as Int64, stored values kept (UInt64 past 2^63 wraps, as SQLite
        holds it); a column of another type is not an nsys export's, said in one line."""
        dtype = self.schema(table)[name]
        if dtype == pl.UInt64:
            return pl.col(name).reinterpret(signed=True)
        if dtype.is_integer() or dtype == pl.Null:
            return pl.col(name).cast(pl.Int64)
        raise _error(self._where(table), f"column {name} holds {dtype} values where nsys writes "
                                        "integers: not an nsys export table; export the report "
                                        "again")  # fmt: skip

    def select(
        self, table: str, exprs: Sequence[str], schema: dict[str, pl.DataType], where: str = ""
    ) -> pl.DataFrame:
        conditions = parse_where(where)
        columns = [_column(e) for e in exprs]
        names = sorted({c for c in columns if c is not None} | {c for c, _ in conditions})
        query = self._scan(table, names)
        if conditions:
            query = query.filter(*(self._integer(table, c).is_not_null() if values is None
                                   else self._integer(table, c).is_in(values)
                                   for c, values in conditions))  # fmt: skip
        kept = query.select(pl.len()) if not any(columns) else None
        out, raw_text, text = [], [], []
        for (alias, dtype), expr, col in zip(schema.items(), exprs, columns, strict=True):
            if col is None:
                out.append(pl.lit(_value(expr, dtype), dtype).alias(alias))
            elif dtype != pl.String:
                out.append(self._integer(table, col).alias(alias))
            elif self.schema(table)[col] == pl.Binary:  # decoded below, bad bytes counted
                out.append(pl.col(col).alias(alias))
                raw_text.append(alias)
            else:
                out.append(self._text_column(table, col).alias(alias))
                text.append(alias)
        if kept is not None:  # every column a literal: as many rows as the condition keeps
            height = self._guard(table, kept.collect).item()
            return pl.DataFrame({a: pl.repeat(_value(e, t), height, dtype=t, eager=True)
                                 for (a, t), e in zip(schema.items(), exprs, strict=True)})
        df = self._guard(table, lambda: query.select(out).collect())
        for alias in raw_text:
            df = df.with_columns(self._decoded(df[alias]).fill_null(""))
        for alias in text:  # nulls as '' (SQL's coalesce), where there are any
            df = df.with_columns(_empty_for_null(df[alias]))
        return df

    def _decoded(self, raw: pl.Series) -> pl.Series:
        """Text stored as bytes, as text: invalid UTF-8 shown with U+FFFD, and counted."""
        decoded, bad = decode_text(raw)
        self.replaced += bad
        return decoded.alias(raw.name)

    def _text_column(self, table: str, name: str) -> pl.Expr:
        """A text column as String (its nulls made '' by the select); another type is not an
        nsys export's, said in one line."""
        dtype = self.schema(table)[name]
        if not _is_text(dtype):
            raise _error(self._where(table), f"column {name} holds {dtype} values where nsys "
                                            "writes text: not an nsys export table; export the "
                                            "report again")  # fmt: skip
        return pl.col(name).cast(pl.String)

    def rows(self, table: str, names: Sequence[str]) -> list[tuple[object, ...]]:
        """As :meth:`ExportTables.rows`: text as ``str`` whatever its encoding (bytes decoded,
        invalid UTF-8 shown with U+FFFD and counted, dictionary-encoded text as its values),
        as SQLite's rows give it."""
        df = self._frame(table, names)
        for name in names:
            dtype = df.schema[name]
            if dtype == pl.Binary:
                df = df.with_columns(self._decoded(df[name]))
            elif isinstance(dtype, pl.Categorical | pl.Enum):
                df = df.with_columns(pl.col(name).cast(pl.String))
        return df.rows()

    def last_time(self, table: str) -> int | None:
        got = self.select(table, ["start", '"end"'], {"start": pl.Int64, "end": pl.Int64})
        most = got.select(pl.max_horizontal(pl.col("start").max(), pl.col("end").max())).item()
        return None if most is None else int(most)


def _empty_for_null(text: pl.Series) -> pl.Series:
    """``text`` with '' for its nulls: written over the few null rows, where ``fill_null``
    copies every row's text (3M NVTX rows: ~0.1 s)."""
    return text.scatter(text.is_null().arg_true(), "") if text.null_count() else text


def _is_text(dtype: pl.DataType) -> bool:
    """Text as a Parquet or Arrow writer may store it: plain, dictionary-encoded, or all null."""
    return dtype in (pl.String, pl.Null) or isinstance(dtype, pl.Categorical | pl.Enum)


def _column(expr: str) -> str | None:
    """The column an expression names (``name`` or ``"name"``), None for a literal."""
    bare = expr[1:-1] if len(expr) > 1 and expr[0] == expr[-1] == '"' else expr
    if expr in ("NULL", "''") or re.fullmatch(r"-?\d+", expr):
        return None
    if not _TABLE_NAME.fullmatch(bare):
        raise ValueError(f"not a column or literal a columnar export can read: {expr!r}")
    return bare


def _value(expr: str, dtype: pl.DataType) -> object:
    """A literal's value as a select reads it: text is coalesce(value, '')."""
    if dtype == pl.String:
        return ""
    return None if expr == "NULL" else int(expr)


def read_nsys_columnar(path: str | Path, kind: str) -> Trace:
    """Read a Parquet or Arrow export folder into a :class:`~nsysmoe.model.Trace`, through the
    same table readers as an SQLite export (NVTX on a second thread, as there)."""
    path = Path(path)
    db, nvtx_db = Columnar(path, kind), Columnar(path, kind)
    what = {"parquet": "folder of Parquet tables", "arrow": "folder of Arrow tables",
            "arrows": "Arrow stream file"}[kind]
    check_export(db, what, "pass the output of `nsys export --type "
                           f"{'arrow' if kind == 'arrows' else kind + 'dir'}`")
    with ThreadPoolExecutor(1) as side:
        nvtx_missing: dict[str, str] = {}
        nvtx_notes = Notes()
        nvtx = side.submit(read_nvtx, nvtx_db, nvtx_missing, nvtx_notes)
        trace, notes = read_export(db)
        nvtx_table = nvtx.result()
    notes.replaced, notes.mixed = db.replaced_strings, db.mixed
    nvtx_notes.replaced = nvtx_db.replaced_strings
    if kind == "arrows" and not db.has("PROCESSES") and not missing_tables(db):
        notes.said.append("no PROCESSES table, which every whole nsys export holds: the file may "
                          "be cut short between two tables (an interrupted export), and what it "
                          "lacks is not 'not captured'; export it again if so")  # fmt: skip
    notes = notes.merged(nvtx_notes)
    return replace(
        trace,
        source_format=FORMATS[kind],
        nvtx=nvtx_table,
        not_captured={**trace.not_captured, **nvtx_missing, **missing_tables(db)},
        warnings=notes.warnings(),
        dropped=notes.dropped,
    )


#: tables a partial export (a recipe's cache, ``--tables``) may lack, and what each costs (a
#: missing GPU table is said by the GPU reader, as for any export: ``gpu_info``)
COSTS = {
    "META_DATA_EXPORT": "nsys and export schema versions unknown",
    "META_DATA_CAPTURE": "no launch command or environment: the A/B contract cannot compare them",
    "TARGET_INFO_SYSTEM_ENV": "no driver, CUDA or host: the A/B contract cannot compare them",
    "TARGET_INFO_SESSION_START_TIME": "no UTC clock: rank files are aligned by their steps only",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "no synchronisation edges in the critical path",
}


def missing_tables(db: ExportTables) -> dict[str, str]:
    """For a partial export, each table of :data:`COSTS` it lacks and what that costs, keyed
    ``table:NAME``; empty for a whole export. Partial: no export metadata table (a recipe's
    cache), or made with ``--tables`` (``EXPORT_PARAM_TABLES_TO_EXPORT``) — then a table one
    of its patterns asked for is not missing, only empty (a lazy export writes no empty
    table)."""
    meta = db.metadata()
    if not any(db.has(t) for t in METADATA_TABLES):
        asked: list[str] = []
    elif patterns := meta.get("EXPORT_PARAM_TABLES_TO_EXPORT", "").split():
        asked = patterns
    else:
        return {}
    return {f"table:{t}": f"not in this partial export: {cost}" for t, cost in COSTS.items()
            if not db.has(t) and not any(_matches(p, t) for p in asked)}  # fmt: skip


def _matches(pattern: str, table: str) -> bool:
    """Whether an ``nsys export --tables`` pattern (a case-insensitive POSIX basic regular
    expression, matched anywhere in the name) selects ``table``; one Python cannot read
    selects nothing."""
    try:
        return re.search(pattern, table, re.IGNORECASE) is not None
    except re.error:
        return False
