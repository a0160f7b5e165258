"""Big tables are read as rowid ranges at once (``Db.parts``, ``BulkReader.frames``): joined in
order the parts must be exactly what one SELECT gives (same rows, order, dtypes, values, warnings
and counts), on real exports and on damaged ones. Parts are forced here with a tiny part size;
the whole-table read, and ``sqlite3``'s row tuples, are the references."""

from __future__ import annotations

import dataclasses
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.io import bulk, nsys_db
from nsysmoe.io.nsys_sqlite import read_nsys_sqlite
from nsysmoe.model import Trace
from tests.conftest import require_shared
from tests.fixtures.hostile import KERNELS, copy_rows, edited, export, reorder

EXAMPLES = sorted((Path(nsys_db.__file__).parents[1] / "examples").glob("*.sqlite"))
BAD_UTF8 = "CAST(X'626164ff6e616d65' AS TEXT)"  # b"bad\xffname"
NVTX = "NVTX_EVENTS"


@pytest.fixture(autouse=True)
def through_sql(monkeypatch: pytest.MonkeyPatch) -> None:
    """These are the SQL path's parts: the page decoder (io.pages, tested against this path
    in test_pages.py) would answer first."""
    monkeypatch.setenv("NSYSMOE_READER", "sql")


def assert_same(a: Trace, b: Trace) -> None:
    for field in dataclasses.fields(Trace):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pl.DataFrame):
            assert x.schema == y.schema and x.equals(y), field.name
        else:
            assert x == y, field.name


def read(path: Path, monkeypatch: pytest.MonkeyPatch, part_rows: int) -> tuple[Trace, int]:
    """The trace read with parts of ``part_rows`` rowids, and how many parts were read."""
    monkeypatch.setattr(nsys_db, "PART_ROWS", part_rows)
    monkeypatch.setattr(nsys_db, "MAX_PARTS", 7)
    calls = []
    alone = bulk.BulkReader._frame_alone

    def counted(self, sql, schema):
        calls.append(sql)
        return alone(self, sql, schema)

    monkeypatch.setattr(bulk.BulkReader, "_frame_alone", counted)
    trace = read_nsys_sqlite(path)
    monkeypatch.setattr(bulk.BulkReader, "_frame_alone", alone)
    return trace, len(calls)


def assert_parts_change_nothing(path: Path, monkeypatch: pytest.MonkeyPatch) -> Trace:
    whole, n_whole = read(path, monkeypatch, 10**15)
    parted, n_parts = read(path, monkeypatch, 3)
    assert n_whole == 0 and n_parts > 0
    assert_same(parted, whole)
    monkeypatch.setattr(bulk, "adbc_driver_manager", None)  # sqlite3 row tuples: no parts
    rows, _ = read(path, monkeypatch, 3)
    monkeypatch.undo()
    assert_same(parted, rows)
    return parted


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_read_in_parts_are_the_whole_read(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_parts_change_nothing(path, monkeypatch)


def test_shared_traces_read_in_parts_are_the_whole_read(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted((require_shared() / "nsys").rglob("*.sqlite"))
    assert paths
    for path in paths:
        assert_parts_change_nothing(path, monkeypatch)


@pytest.mark.parametrize("where", ["first", "late"])
def test_mixed_types_and_bad_text_read_in_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Text and REAL in integer columns, in one part only, and invalid UTF-8: the same rows
    left out, the same warnings, the same U+FFFD count as one SELECT."""
    path, _ = export(tmp_path / "mixed.sqlite")
    with edited(path) as conn:
        copy_rows(conn, KERNELS, 3, start="'soon'")
        copy_rows(conn, KERNELS, 2, start="1.5")
        copy_rows(conn, KERNELS, 1, deviceId="'gpu0'")
        conn.execute(f"UPDATE {NVTX} SET text = {BAD_UTF8} WHERE rowid IN "
                     f"(SELECT rowid FROM {NVTX} WHERE eventType = 59 LIMIT 2)")  # fmt: skip
        if where == "first":
            reorder(conn, KERNELS, "typeof(start) = 'integer', rowid")
    trace = assert_parts_change_nothing(path, monkeypatch)
    assert trace.dropped["kernel rows with a missing or non-integer start/end"] == 5
    assert "2 strings with invalid UTF-8 bytes shown with U+FFFD" in trace.warnings


def test_parts_cover_every_row_once_with_gaps_and_shadowed_rowid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges over rowids with gaps (deleted rows) count each row once; a column named
    ``rowid`` is not taken for the rowid; an indexed table is read whole."""
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (rowid INTEGER, x INTEGER)")
    conn.execute("CREATE TABLE i (x INTEGER)")
    conn.execute("CREATE INDEX ix ON i (x)")
    for table in ("t", "i"):
        conn.executemany(f"INSERT INTO {table} (x) VALUES (?)", [(v,) for v in range(1000)])
    conn.execute("DELETE FROM t WHERE x % 7 = 3 OR x BETWEEN 400 AND 650")
    conn.commit()
    conn.close()
    ro, uri = nsys_db.connect_readonly(path)
    with ThreadPoolExecutor(2) as pool:
        reader = bulk.BulkReader(uri, ro, pool)
    try:
        db = nsys_db.Db(ro, path, reader)
        assert db.parts("i") == [""]
        for part_rows in (1, 2, 10, 100, 333, 10**9):
            monkeypatch.setattr(nsys_db, "PART_ROWS", part_rows)
            parts = db.parts("t")
            assert "rowid <=" not in " ".join(parts)
            counted = [ro.execute(f"SELECT x FROM t WHERE {p or 1}").fetchall() for p in parts]
            joined = [x for rows in counted for x in rows]
            assert joined == ro.execute("SELECT x FROM t").fetchall()
            assert len(parts) <= nsys_db.MAX_PARTS
    finally:
        reader.close()
        ro.close()
