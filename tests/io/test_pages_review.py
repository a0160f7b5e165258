"""The page decoder's bugs a review found (helper-34), kept as regressions: each builds a file
where the decoder once read otherwise than SQL (or crashed, leaked, or waited), and holds
``Db.select`` through the pages (``NSYSMOE_READER=pages``) to the one through SQL."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from nsysmoe.io import nsys_db, pages
from tests.io import pages_cases as pc


@pytest.fixture(autouse=True)
def decoder() -> None:
    pages.warm()  # compiled now: a read never goes to SQL while it compiles


def select(path: Path, how: str, exprs: list[str], schema: dict[str, Any],
           where: str = "") -> tuple[Any, ...]:  # fmt: skip
    """``Db.select`` on table ``t`` read ``how`` ("pages" or "sql"): the frame, what
    ``db.mixed`` noted and the pages' answers, or the error said."""
    answered: list[bool] = []
    real = pages.Pages.select

    def recorded(self: pages.Pages, *args: Any) -> Any:
        out = real(self, *args)
        answered.append(out is not None)
        return out

    os.environ["NSYSMOE_READER"] = how
    pages.Pages.select = recorded  # type: ignore[method-assign]
    try:
        with nsys_db.opened(path) as db:
            df = db.select("t", exprs, schema, where)
            return ("rows", df.to_dict(as_series=False), df.schema, sorted(db.mixed)), answered
    except Exception as exc:  # noqa: BLE001 - the error is what is compared
        return ("error", type(exc).__name__, str(exc)), answered
    finally:
        pages.Pages.select = real  # type: ignore[method-assign]
        del os.environ["NSYSMOE_READER"]


def assert_same(path: Path, exprs: list[str], schema: dict[str, Any], where: str = "") -> list:
    got, answered = select(path, "pages", exprs, schema, where)
    want, _ = select(path, "sql", exprs, schema, where)
    assert got == want
    return answered


def table(path: Path, ddl: str, rows: list[tuple], page_size: int = 4096) -> int:
    """``t`` made by ``ddl`` holding ``rows``; its root page."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute(ddl)
    if rows:
        conn.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(rows[0]))})", rows)
    conn.commit()
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone()[0]
    conn.close()
    return root


def test_real_affinity_whole_numbers_are_floats_to_sql(tmp_path: Path) -> None:
    """1.0 in a DOUBLE column is an integer on disk and a REAL to SQL (NULL, and noted)."""
    p = tmp_path / "real.sqlite"
    table(p, "CREATE TABLE t (a INTEGER, d DOUBLE)", [(i, float(i)) for i in range(5)])
    assert assert_same(p, ["a", "d"], {"a": pl.Int64, "d": pl.Int64}) == [False]


def test_identifiers_fold_ascii_case_only(tmp_path: Path) -> None:
    p = tmp_path / "case.sqlite"
    table(p, 'CREATE TABLE t ("é" INTEGER, "É" INTEGER, k INTEGER)',
          [(i, 100 + i, 7) for i in range(3)])  # fmt: skip
    assert assert_same(p, ['"é"'], {"x": pl.Int64}) == [True]
    assert_same(p, ['"\u212a"'], {"x": pl.Int64})  # KELVIN SIGN: no column, a string to SQL
    assert assert_same(p, ['"K"'], {"x": pl.Int64}) == [True]  # ASCII: the column k


@pytest.mark.parametrize("where", [" ", "  \n", "(", "AND"])
def test_a_where_without_conditions_is_sqls(where: str, tmp_path: Path) -> None:
    p = tmp_path / "blank.sqlite"
    table(p, "CREATE TABLE t (a INTEGER)", [(i,) for i in range(3)])
    assert assert_same(p, ["a"], {"a": pl.Int64}, where) in ([], [False])


def test_a_keyword_is_not_a_column(tmp_path: Path) -> None:
    p = tmp_path / "keyword.sqlite"
    table(p, 'CREATE TABLE t ("null" INTEGER, "current_date" TEXT, a INTEGER)',
          [(i, "x", i) for i in range(3)])  # fmt: skip
    assert_same(p, ["NULL", "a"], {"n": pl.Int64, "a": pl.Int64})
    assert_same(p, ["CURRENT_DATE", "a"], {"n": pl.String, "a": pl.Int64})
    assert assert_same(p, ['"null"', "a"], {"n": pl.Int64, "a": pl.Int64}) == [True]


@pytest.mark.parametrize("damage", ["kind", "empty", "lower"])
def test_a_damaged_leaf_beside_a_range_is_read_as_sql_reads_it(damage: str,
                                                               tmp_path: Path) -> None:  # fmt: skip
    """SQL steps into the leaf after ``rowid <= K`` and seeks through the one holding K for
    ``rowid > K``: damaged, they make it fail, so the decoder may not prune them."""
    p = tmp_path / "beside.sqlite"
    root = table(p, "CREATE TABLE t (a INTEGER, b TEXT)", [(i, "x" * 20) for i in range(1, 200)],
                 page_size=512)  # fmt: skip
    data = bytearray(p.read_bytes())
    _, leaves = pc.tree(bytes(data), root)
    last = max(pc.varint(data, pc.varint(data, q)[1])[0] for q in pc.cells(data, leaves[0]))
    where = f"rowid <= {last}"
    if damage == "lower":
        data[pc.head_of(leaves[0], 512)] = 0x0A
        where = f"rowid > {last}"
    elif damage == "kind":
        data[pc.head_of(leaves[1], 512)] = 0x0A  # an index leaf, not a table leaf
    else:
        h = pc.head_of(leaves[1], 512)
        data[h + 3 : h + 5] = b"\0\0"  # no cells
    p.write_bytes(bytes(data))
    assert_same(p, ["a"], {"a": pl.Int64}, where)


def test_pages_past_the_headers_page_count_are_sqls(tmp_path: Path) -> None:
    p = tmp_path / "count.sqlite"
    table(p, "CREATE TABLE t (a INTEGER, b TEXT)", [(i, "x" * 20) for i in range(1, 200)],
          page_size=512)  # fmt: skip
    data = bytearray(p.read_bytes())
    assert data[24:28] == data[92:96]  # the count is valid
    data[28:32] = (len(data) // 512 - 1).to_bytes(4, "big")
    p.write_bytes(bytes(data))
    assert assert_same(p, ["a"], {"a": pl.Int64}) == []  # not opened by page


def _varint(v: int) -> bytes:
    if v < 1 << 56:
        out = [v & 0x7F]
        v >>= 7
        while v:
            out.append(0x80 | (v & 0x7F))
            v >>= 7
        return bytes(reversed(out))
    top, last = v >> 8, v & 0xFF
    return bytes(0x80 | ((top >> (7 * (7 - k))) & 0x7F) for k in range(8)) + bytes([last])


def _one_cell(p: Path, root: int, cell: bytes) -> None:
    """The root leaf of ``p`` (512-byte pages) rewritten to hold ``cell`` alone."""
    data = bytearray(p.read_bytes())
    page = bytearray(512)
    at = 512 - len(cell)
    page[0] = 13
    page[3:5] = (1).to_bytes(2, "big")
    page[5:7] = at.to_bytes(2, "big")
    page[8:10] = at.to_bytes(2, "big")
    page[at:] = cell
    base = (root - 1) * 512
    data[base : base + 512] = page
    p.write_bytes(bytes(data))


def test_serial_types_past_32_bits_do_not_wrap(tmp_path: Path) -> None:
    """Five blobs of (2**64 + 4) / 5 bytes "filled" 4 bytes in int64 arithmetic; SQLite reads
    each serial type as 32 bits and refuses the record."""
    p = tmp_path / "wrap.sqlite"
    root = table(p, "CREATE TABLE t (a INTEGER, b, c, d, e, f, g INTEGER)",
                 [(1, None, None, None, None, None, 2)], page_size=512)  # fmt: skip
    x = ((1 << 64) + 4) // 5
    types = _varint(1) + _varint(2 * x + 12) * 5 + _varint(1)
    record = bytes([1 + len(types)]) + types + b"\x01" + b"ABCD" + b"\x02"
    _one_cell(p, root, _varint(len(record)) + _varint(1) + record)
    assert_same(p, ["a", "g"], {"a": pl.Int64, "g": pl.Int64})
    assert_same(p, ["a", "b"], {"a": pl.Int64, "b": pl.String})  # no MemoryError


def test_a_nine_byte_payload_size_is_sqls(tmp_path: Path) -> None:
    """SQLite reads a payload size 7 bits a byte into 32 bits, the 9th byte too."""
    p = tmp_path / "size.sqlite"
    root = table(p, "CREATE TABLE t (a INTEGER, b TEXT)", [(1, "x")], page_size=512)
    text = b"y" * 150
    tb = 13 + 2 * len(text)
    types = bytes([6]) + bytes([0x80 | (tb >> 7), tb & 0x7F])
    record = bytes([1 + len(types)]) + types + (1).to_bytes(8, "big") + text
    _one_cell(p, root, b"\x80" * 8 + bytes([len(record)]) + b"\x01" + record)
    assert_same(p, ["a", "b"], {"a": pl.Int64, "b": pl.String})


def test_cell_counts_past_a_page_are_refused_before_any_allocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "cells.sqlite"
    root = table(p, "CREATE TABLE t (a INTEGER, b INTEGER)", [(i, i) for i in range(20_000)],
                 page_size=512)  # fmt: skip
    data = bytearray(p.read_bytes())
    for leaf in pc.tree(bytes(data), root)[1]:
        h = pc.head_of(leaf, 512)
        data[h + 3 : h + 5] = b"\xff\xff"
    p.write_bytes(bytes(data))
    asked: list[int] = []
    zeros = np.zeros

    def counted(shape: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        asked.append(int(np.prod(shape)))
        return zeros(shape, *args, **kwargs)

    monkeypatch.setattr(pages.np, "zeros", counted)
    assert_same(p, ["a", "b"], {"a": pl.Int64, "b": pl.Int64})
    assert max(asked, default=0) < 1_000_000  # not 160 leaves x 65,535 cells x 2 columns


def test_a_failed_header_read_leaks_nothing(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "eio.sqlite"
    table(p, "CREATE TABLE t (a INTEGER)", [(1,)])
    monkeypatch.setenv("NSYSMOE_READER", "pages")

    def failing(fd: int, n: int, offset: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error (simulated)")

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        monkeypatch.setattr(pages.os, "pread", failing)
        with nsys_db.opened(p) as db:
            assert db.pages is None
        monkeypatch.undo()
        monkeypatch.setenv("NSYSMOE_READER", "pages")
    assert len(os.listdir("/proc/self/fd")) == before


def test_after_a_fork_mid_warm_up_a_read_starts_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked while the warm-up ran has no thread to finish it: a Db opened before the
    fork waited READY_WAIT_S (30 s) on every select. (The state a fork leaves, without a fork:
    polars may deadlock in a forked child.)"""
    monkeypatch.setattr(pages, "_WARM", threading.Event())
    monkeypatch.setattr(pages, "_PROBED", threading.Event())
    monkeypatch.setattr(pages, "_warming", threading.Thread(target=lambda: None))  # not here
    monkeypatch.setattr(pages, "_compiled", False)
    monkeypatch.setattr(pages, "READY_WAIT_S", 20.0)
    pages._after_fork()
    t = time.monotonic()
    assert pages._ready()
    assert time.monotonic() - t < 10
