"""A Parquet copy of a bench export, laid out as ``nsys export --type parquetdir`` writes one
(issue 37): ``NAME_pqtdir/<TABLE>.parquet``, every table of the SQLite export, typed as nsys
2023.4 types them (``tests/fixtures/columnar-types-nsys-2023.4.json``, read from a real
export: ids unsigned, a value SQLite holds signed written as its two's complement). Made once
per export and reused while its marker names the same SQLite file (size, mtime). Run as a
script (``python bench/parquet_copy.py EXPORT.sqlite NAME_pqtdir``) so that the rows it reads
never grow the bench's own process, whose peak RSS every child it forks would start from."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import polars as pl

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
TYPES = FIXTURES / "columnar-types-nsys-2023.4.json"
_DTYPES = {"Int32": pl.Int32, "Int64": pl.Int64, "UInt32": pl.UInt32, "UInt64": pl.UInt64,
           "String": pl.String}  # fmt: skip
MARKER = ".made-from.json"


def _typed(df: pl.DataFrame, types: dict[str, str]) -> pl.DataFrame:
    cols = []
    for c in df.columns:
        want = _DTYPES.get(types.get(c, ""))
        if want is None or not df[c].dtype.is_integer():
            cols.append(pl.col(c))
        elif want == pl.UInt64:
            cols.append(pl.col(c).cast(pl.Int64).reinterpret(signed=False))
        elif want == pl.UInt32:
            cols.append((pl.col(c).cast(pl.Int64) % (1 << 32)).cast(pl.UInt32))
        else:
            cols.append(pl.col(c).cast(want))
    return df.select(cols)


def parquet_copy(sqlite: Path, folder: Path) -> Path:
    """``folder`` (``NAME_pqtdir``) holding the Parquet copy of ``sqlite``, made if missing or
    made from another file."""
    st = sqlite.stat()
    made_from = {"path": str(sqlite.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    marker = folder.parent / f"{folder.name}{MARKER}"
    if folder.is_dir() and marker.is_file() and json.loads(marker.read_text()) == made_from:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    types = json.loads(TYPES.read_text())["parquet"]
    con = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            df = pl.read_database(f'SELECT * FROM "{table}"', con, infer_schema_length=None)
            _typed(df, types.get(table, {})).write_parquet(folder / f"{table}.parquet")
    finally:
        con.close()
    marker.write_text(json.dumps(made_from))
    return folder


if __name__ == "__main__":
    parquet_copy(Path(sys.argv[1]), Path(sys.argv[2]))
