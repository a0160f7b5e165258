"""The one interface every nsys export format is read through: its tables and columns by name.

nsys writes the same tables and columns to SQLite (``--type sqlite``), Parquet (``parquetdir``)
and Arrow (``arrowdir``). The per-table readers of :mod:`nsysmoe.io.nsys_sqlite` ask an
:class:`ExportTables` what exists and select columns by name, so one set of readers turns every
format into the same :class:`~nsysmoe.model.Trace`: :class:`nsysmoe.io.nsys_db.Db` (SQLite) and
:class:`nsysmoe.io.nsys_columnar.Columnar` (Parquet, Arrow) are the two sources.

What a reader asks for is SQL-shaped, as the SQLite source runs it: a column is ``name`` or
``"name"``, a missing optional column's stand-in is a literal (``NULL``, ``0``, ``''``), and a
condition is ``col IN (n, …)`` (an empty list matches nothing, as in SQLite), ``col = n`` or
``col IS NOT NULL``, ANDed. A columnar source reads exactly that language (:func:`parse_where`);
nothing else reaches it.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError

SUPPORTED = "nsys 2022.2 to 2026.x (export schema 2.9 to 3.2x)"
MAX_ID_LIST = 100_000  # above this many distinct name ids, read StringIds whole
#: tables of the export's own metadata (nsys, schema and export parameters), by schema
METADATA_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")

_ATOM = re.compile(
    r'\s*"?(?P<col>[A-Za-z_]\w*)"?\s+(?:(?P<notnull>IS\s+NOT\s+NULL)'
    r"|(?P<op>=|IN)\s*(?P<v>-?\d+|\(\s*(?:-?\d+(?:\s*,\s*-?\d+)*)?\s*\)))\s*",
    re.IGNORECASE,
)


def parse_where(where: str) -> list[tuple[str, tuple[int, ...] | None]]:
    """A condition of the readers' language as ``(column, values)`` pairs, ANDed: ``values``
    the integers the column must equal one of, or None for ``IS NOT NULL``. Anything else is a
    programming error (the readers write these conditions, never a user)."""
    out: list[tuple[str, tuple[int, ...] | None]] = []
    for part in re.split(r"\bAND\b", where, flags=re.IGNORECASE) if where.strip() else []:
        part = part.strip()
        if part.startswith("(") and part.endswith(")"):  # all_of's parentheses
            part = part[1:-1]
        m = _ATOM.fullmatch(part)
        if m is None:
            raise ValueError(f"not a condition a columnar export can hold: {part!r}")
        values = None if m["notnull"] else tuple(int(v) for v in re.findall(r"-?\d+", m["v"]))
        out.append((m["col"], values))
    return out


class ExportTables(ABC):
    """An nsys export's tables, read by name (see the module docstring). Subclasses say which
    tables and columns exist and read them; the catalogue questions and the string, metadata
    and small-table lookups are the same for every format, so they are written here once."""

    path: Path
    tables: set[str]
    #: tables where a value of another type stood in an integer column (read as NULL)
    mixed: set[str]

    @property
    @abstractmethod
    def replaced_strings(self) -> int:
        """Strings with invalid UTF-8 bytes, shown with U+FFFD, read so far."""

    @abstractmethod
    def columns(self, table: str) -> set[str]:
        """The column names of ``table`` (a table the export has)."""

    @abstractmethod
    def select(
        self, table: str, exprs: Sequence[str], schema: dict[str, pl.DataType], where: str = ""
    ) -> pl.DataFrame:
        """``SELECT exprs FROM table WHERE where`` as a frame with ``schema``: Int64 columns are
        integers, String columns text (nulls as ''), invalid UTF-8 shown with U+FFFD, counted."""

    @abstractmethod
    def rows(self, table: str, names: Sequence[str]) -> list[tuple[object, ...]]:
        """Every row of a small table's columns ``names`` (which it has), values as stored
        (str, int, None, …): for the name/value tables of metadata and launch."""

    @abstractmethod
    def last_time(self, table: str) -> int | None:
        """The largest start or end in ``table`` (integers only)."""

    def has(self, table: str) -> bool:
        return table in self.tables

    def col(self, table: str, name: str, fallback: str = "NULL") -> str:
        """The column if the table has it, else a SQL literal: missing optional columns degrade."""
        return f'"{name}"' if name in self.columns(table) else fallback

    def need(self, table: str, *names: str) -> None:
        """Columns a table must have; a missing one means an export layout nsysmoe does not
        know, which is said as such (not as a corrupt file)."""
        missing = [n for n in names if n not in self.columns(table)]
        if missing:
            raise NsysmoeError(
                f"{self.path}: table {table} has no column {', '.join(missing)}: not an export "
                f"layout nsysmoe knows ({SUPPORTED}); export the report with a supported nsys, "
                "or report the nsys version"
            )

    def small(
        self, table: str, names: Sequence[str], schema: dict[str, pl.DataType]
    ) -> pl.DataFrame:
        """A small table's columns ``names`` (one it lacks reads as NULL; it has the first)
        with ``schema``, row by row, each value checked against its column's type (anything
        else becomes NULL)."""
        have = self.columns(table)
        present = [n for n in names if n in have]
        at = {n: i for i, n in enumerate(present)}
        kinds = [str if t == pl.String else int for t in schema.values()]

        def value(row: tuple[object, ...], name: str, kind: type) -> object:
            v = row[at[name]] if name in at else None
            ok = type(v) is kind and (kind is str or -(2**63) <= v < 2**63)  # type: ignore[operator]
            return v if ok else None

        clean = [tuple(value(row, n, k) for n, k in zip(names, kinds, strict=True))
                 for row in self.rows(table, present)]  # fmt: skip
        return pl.DataFrame(clean, schema=schema, orient="row")

    def strings(self, ids: pl.Series) -> pl.DataFrame:
        """StringIds rows for the given ids only: StringIds can hold millions of rows, while a
        table's distinct name ids are usually a few thousand."""
        unique = ids.drop_nulls().unique()
        return self.string_rows(unique if len(unique) <= MAX_ID_LIST else None)

    def string_rows(self, unique: pl.Series | None) -> pl.DataFrame:
        """StringIds rows (``id``, ``value``) for these distinct ids, or every row where None;
        an id held by several rows gets the first."""
        self.need("StringIds", "id", "value")
        where = ""
        if unique is not None:
            where = "id IN (" + ",".join(map(str, unique.to_list())) + ")"
        df = self.select("StringIds", ["id", "value"], {"id": pl.Int64, "value": pl.String}, where)
        return df.drop_nulls("id").unique("id", keep="first")

    def metadata(self) -> dict[str, str]:
        """The export's own metadata (``EXPORT_SCHEMA_VERSION``, …), empty where it has none."""
        for table in METADATA_TABLES:
            if self.has(table) and {"name", "value"} <= self.columns(table):
                rows = self.rows(table, ["name", "value"])
                return {str(k): str(v) for k, v in rows if k is not None and v is not None}
        return {}
