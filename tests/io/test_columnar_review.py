"""What a review of the Parquet/Arrow reader found (each fails before its fix): text stored as
bytes or dictionary-encoded in any table, a FIFO table with --cache, a damaged Parquet export
beside a report."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.io import load_trace, nsys_db
from tests.conftest import REPO
from tests.fixtures.columnar import to_columnar
from tests.io.test_columnar import TRACE_SOURCE, assert_same_trace

EXAMPLE = sorted((Path(nsys_db.__file__).parents[1] / "examples").glob("*.sqlite"))[0]


def rewrite(folder: Path, table: str, cast: pl.DataType) -> None:
    """Every text column of ``table`` stored as ``cast`` (Binary, Categorical)."""
    path = folder / f"{table}.parquet"
    df = pl.read_parquet(path)
    df.with_columns(pl.col(c).cast(cast) for c, t in df.schema.items() if t == pl.String
                    ).write_parquet(path)  # fmt: skip


@pytest.mark.parametrize("cast", [pl.Binary, pl.Categorical], ids=["bytes", "dictionary"])
def test_text_stored_another_way_reads_as_the_sqlite(cast: pl.DataType, tmp_path: Path) -> None:
    """The small tables' text (versions, launch, GPU name) as bytes or dictionary-encoded reads
    as text, not as None or "b'…'" (Columnar.rows); so does StringIds' and NVTX's."""
    folder = to_columnar(EXAMPLE, tmp_path / "x_pqtdir")
    for table in ("META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_GPU", "StringIds",
                  "NVTX_EVENTS", "TARGET_INFO_SYSTEM_ENV"):  # fmt: skip
        if (folder / f"{table}.parquet").exists():
            rewrite(folder, table, cast)
    got, want = load_trace(folder), load_trace(EXAMPLE)
    assert got.product_version == want.product_version is not None
    assert got.generated_by == want.generated_by is not None
    assert_same_trace(got, want, str(cast), TRACE_SOURCE - {"product_version", "schema_version"})


def test_invalid_utf8_bytes_in_a_small_table_are_shown_and_counted(tmp_path: Path) -> None:
    folder = to_columnar(EXAMPLE, tmp_path / "x_pqtdir")
    path = folder / "TARGET_INFO_GPU.parquet"
    df = pl.read_parquet(path)
    df.with_columns(pl.lit(b"H100\xff", pl.Binary).alias("name")).write_parquet(path)
    got = load_trace(folder)
    assert got.gpus["gpu_name"].to_list() == ["H100\ufffd"] * len(got.gpus)
    assert any("invalid UTF-8" in w for w in got.warnings)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_table_with_cache_is_one_line_not_a_hang(tmp_path: Path) -> None:
    folder = to_columnar(EXAMPLE, tmp_path / "x_pqtdir")
    os.mkfifo(folder / "EXTRA.parquet")
    env = {**os.environ, "NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    got = subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", str(folder), "--cache"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=REPO,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert got.returncode == 2 and "EXTRA" in got.stderr and "not a regular file" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1


def test_a_damaged_parquet_export_beside_a_report_is_not_used(tmp_path: Path) -> None:
    """A ``<report>_pqtdir/`` that is newer and holds the needed tables but cannot be read is
    passed over: without nsys the report says it needs nsys (not an error naming a path that
    does not exist, again on every run)."""
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"report")
    os.utime(report, ns=(0, 0))
    folder = to_columnar(EXAMPLE, tmp_path / "run_pqtdir")
    strings = folder / "StringIds.parquet"
    strings.write_bytes(strings.read_bytes()[:100])
    empty = tmp_path / "bin"
    empty.mkdir()
    got = subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", str(report)],
                         capture_output=True, text=True, env={**os.environ, "PATH": str(empty)},
                         cwd=REPO)  # fmt: skip
    assert got.returncode == 2 and "needs `nsys` on PATH" in got.stderr, got.stderr


def test_null_nvtx_text_reads_as_the_sqlite(tmp_path: Path) -> None:
    """A range whose text is NULL (no inline text, and an id StringIds lacks or none) is named
    '' and counted as unnamed, from Parquet as from the SQLite's coalesce(text, '')."""
    copy = tmp_path / "x.sqlite"
    copy.write_bytes(EXAMPLE.read_bytes())
    with closing(sqlite3.connect(copy)) as db, db:
        rowids = [r for (r,) in db.execute("SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 "
                                           "ORDER BY rowid LIMIT 4")]  # fmt: skip
        assert len(rowids) == 4
        db.execute(f"UPDATE NVTX_EVENTS SET text = NULL, textId = NULL WHERE rowid IN "
                   f"({rowids[0]}, {rowids[1]})")  # fmt: skip
        db.execute(f"UPDATE NVTX_EVENTS SET text = NULL, textId = 987654321 WHERE rowid = "
                   f"{rowids[2]}")  # fmt: skip
    folder = to_columnar(copy, tmp_path / "x_pqtdir")
    got, want = load_trace(folder), load_trace(copy)
    assert want.nvtx["name"].null_count() == 0
    assert (want.nvtx["name"] == "").sum() >= 3
    assert_same_trace(got, want, "null NVTX text", TRACE_SOURCE)
    assert got.warnings == want.warnings
