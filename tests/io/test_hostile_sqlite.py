"""Damaged and hostile nsys SQLite exports: every defect is one line on stderr, or is counted in
``Trace.dropped`` and said in a warning, and the numbers of what is left stay exact.

Each file starts as a real-DDL export with known truth (``tests/fixtures/hostile.py``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.api import analyze, load
from nsysmoe.errors import NsysmoeError
from nsysmoe.io import bulk, nsys_sqlite
from nsysmoe.io.nsys_sqlite import read_nsys_sqlite
from nsysmoe.model import WHOLE
from tests.fixtures.hostile import (
    KERNELS,
    copy_rows,
    digest,
    edited,
    export,
    gpu_numbers,
    lock,
    one_line_error,
    relax,
    reorder,
    run_cli,
    truth_numbers,
)

BAD_UTF8 = "CAST(X'626164ff6e616d65' AS TEXT)"  # b"bad\xffname"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"


def assert_clean_run(proc) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr, proc.stderr


# --- 1. text that is not UTF-8 ------------------------------------------------------------------


def test_invalid_utf8_in_string_ids_nvtx_text_and_gpu_names(tmp_path: Path) -> None:
    path, truth = export(tmp_path / "utf8.sqlite")
    with edited(path) as conn:
        (name_id,) = conn.execute(f"SELECT demangledName FROM {KERNELS} LIMIT 1").fetchone()
        conn.execute(f"UPDATE StringIds SET value = {BAD_UTF8} WHERE id = ?", (name_id,))
        conn.execute(f"UPDATE {NVTX} SET text = {BAD_UTF8} WHERE rowid IN "
                     f"(SELECT rowid FROM {NVTX} WHERE eventType = 59 LIMIT 2)")  # fmt: skip
        conn.execute(f"UPDATE TARGET_INFO_GPU SET name = {BAD_UTF8}")
    before = digest(path)
    trace = load(path)
    # the kernel name, two NVTX texts, and the GPU name (one row per physical GPU)
    n_gpus = len(trace.gpus)
    assert n_gpus == 1
    gpu_rows = sqlite3.connect(path).execute("SELECT count(*) FROM TARGET_INFO_GPU").fetchone()[0]
    replaced = 1 + 2 + gpu_rows
    assert f"{replaced} strings with invalid UTF-8 bytes shown with U+FFFD" in trace.warnings
    assert trace.kernels.filter(pl.col("name") == "bad\ufffdname").height > 0
    assert trace.nvtx.filter(pl.col("name") == "bad\ufffdname").height == 2
    assert trace.gpus["gpu_name"].to_list() == ["bad\ufffdname"]
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth)
    proc = run_cli("analyze", str(path))
    assert_clean_run(proc)
    assert "strings with invalid UTF-8 bytes shown with U+FFFD" in proc.stdout
    assert digest(path) == before


def test_invalid_utf8_in_metadata_is_replaced_not_corrupt(tmp_path: Path) -> None:
    path, _ = export(tmp_path / "meta.sqlite")
    with edited(path) as conn:
        conn.execute(f"UPDATE META_DATA_EXPORT SET value = {BAD_UTF8} "
                     "WHERE name = 'EXPORT_PRODUCT_VERSION'")  # fmt: skip
    trace = load(path)
    assert trace.product_version == "bad\ufffdname"
    assert "1 strings with invalid UTF-8 bytes shown with U+FFFD" in trace.warnings


# --- 2. a writer that has not finished -----------------------------------------------------------


def test_uncheckpointed_wal_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path, _ = export(tmp_path / "live.sqlite")
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute(f"INSERT INTO {KERNELS} SELECT * FROM {KERNELS}")  # doubles the kernels
        writer.commit()
        wal = path.with_name(path.name + "-wal")
        assert wal.stat().st_size > 0
        before = digest(path, wal)
        message = one_line_error(run_cli("analyze", str(path)))
        assert message == (
            f"{path}: live.sqlite-wal beside it may hold changes not yet in the file (a writer "
            "still has it open, or did not checkpoint), so its numbers would be wrong; stop the "
            "writer, or copy both files and run `sqlite3 COPY.sqlite 'PRAGMA "
            "wal_checkpoint(TRUNCATE)'` on the copy, or export again"
        )
        assert digest(path, wal) == before
    finally:
        writer.close()
    assert len(load(path).kernels) == 2 * 836  # checkpointed on close: now the file has them


def test_hot_rollback_journal_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    """A writer in the middle of a large transaction spills pages into the file itself; only
    the journal says they are not committed."""
    path, truth = export(tmp_path / "spill.sqlite")
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA cache_size=2")  # spill dirty pages into the main file
        writer.execute("BEGIN")
        writer.execute(f'UPDATE {KERNELS} SET "end" = "end" + 1000000000')
        journal = path.with_name(path.name + "-journal")
        assert journal.stat().st_size > 0
        before = digest(path, journal)
        message = one_line_error(run_cli("analyze", str(path)))
        assert message == (
            f"{path}: spill.sqlite-journal beside it means a write to the file is unfinished "
            "(nsys export still running, or interrupted), so its numbers would be wrong; wait "
            "for the writer to finish, or export again"
        )
        assert digest(path, journal) == before
        writer.rollback()
    finally:
        writer.close()
    assert gpu_numbers(analyze(path, scope=WHOLE)) == truth_numbers(truth)


def test_persistent_journal_after_commit_is_not_refused(tmp_path: Path) -> None:
    """journal_mode=PERSIST leaves a journal with a zeroed header: nothing is unfinished."""
    path, truth = export(tmp_path / "persist.sqlite")
    with edited(path) as conn:
        conn.execute("PRAGMA journal_mode=PERSIST")
        conn.execute("PRAGMA user_version = 7")
    assert path.with_name(path.name + "-journal").stat().st_size > 0
    assert gpu_numbers(analyze(path, scope=WHOLE)) == truth_numbers(truth)


def test_file_changed_while_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = export(tmp_path / "growing.sqlite")
    read_runtime = nsys_sqlite._read_runtime

    def and_touch(*args):
        out = read_runtime(*args)
        os.utime(path, ns=(1, 1))  # the writer moved on while we read
        return out

    monkeypatch.setattr(nsys_sqlite, "_read_runtime", and_touch)
    with pytest.raises(NsysmoeError) as err:
        read_nsys_sqlite(path)
    assert str(err.value) == (
        f"{path}: the file changed while it was read (is it still being written?); wait for the "
        "writer to finish and run again"
    )


# --- 2. rows that are left out: counted, warned, numbers exact ----------------------------------


def test_null_start_end_rows_are_counted_and_numbers_exact(tmp_path: Path) -> None:
    path, truth = export(tmp_path / "nulls.sqlite")
    with edited(path) as conn:
        relax(conn, KERNELS)
        copy_rows(conn, KERNELS, 500, start="NULL")
        copy_rows(conn, KERNELS, 336, end="NULL")
        copy_rows(conn, KERNELS, 7, deviceId="NULL")
        copy_rows(conn, KERNELS, 2, globalPid="NULL")  # the DDL allows it: no GPU to put it on
        relax(conn, "CUPTI_ACTIVITY_KIND_MEMCPY")
        copy_rows(conn, "CUPTI_ACTIVITY_KIND_MEMCPY", 1, start="NULL")
    trace = load(path)
    assert trace.dropped["kernel rows with a missing or non-integer start/end"] == 836
    assert trace.dropped["kernel rows without a device or process"] == 9
    assert trace.dropped["memory op rows with a missing or non-integer start/end"] == 1
    assert "836 kernel rows with a missing or non-integer start/end left out" in trace.warnings
    assert "9 kernel rows without a device or process left out" in trace.warnings
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth)
    assert_clean_run(run_cli("analyze", str(path), "--format", "json"))


def test_cpu_rows_cleaned_by_the_same_policy(tmp_path: Path) -> None:
    path, truth = export(tmp_path / "cpu.sqlite")
    with edited(path) as conn:
        relax(conn, RUNTIME)
        relax(conn, NVTX)
        copy_rows(conn, RUNTIME, 3, start="NULL")
        copy_rows(conn, RUNTIME, 2, start='"end" + 5')
        copy_rows(conn, RUNTIME, 1, start="-10", end="-5")
        insert = f'INSERT INTO {NVTX} (start, "end", eventType, text, globalTid) SELECT '
        conn.execute(insert + f"NULL, 10, 59, 'x', globalTid FROM {NVTX} LIMIT 4")
        conn.execute(insert + f"50, 10, 59, 'y', globalTid FROM {NVTX} LIMIT 1")
    trace = load(path)
    assert {k: v for k, v in trace.dropped.items() if v and not k.startswith("kernel")} == {
        "CUDA API rows with a missing or non-integer start/end": 3,
        "CUDA API rows with end < start": 2,
        "CUDA API rows starting before the capture (start < 0)": 1,
        "NVTX range rows with a missing or non-integer start/end": 4,
        "NVTX range rows with end < start": 1,
    }
    assert "4 NVTX range rows with a missing or non-integer start/end left out" in trace.warnings
    result = analyze(trace, scope=WHOLE)
    assert gpu_numbers(result) == truth_numbers(truth)
    ours = {r["name"]: (r["count"], r["total_ns"]) for r in result.nvtx.iter_rows(named=True)}
    assert "x" not in ours and "y" not in ours


def test_all_invalid_kernel_rows_say_so(tmp_path: Path) -> None:
    path, _ = export(tmp_path / "allbad.sqlite")
    with edited(path) as conn:
        relax(conn, KERNELS)
        conn.execute(f"UPDATE {KERNELS} SET start = NULL WHERE rowid % 4 <> 0")
        conn.execute(f'UPDATE {KERNELS} SET "end" = start - 1 WHERE rowid % 4 = 0')
    message = one_line_error(run_cli("analyze", str(path)))
    assert message == (
        f"{path}: all 836 kernel rows were invalid (627 with a missing or non-integer "
        "start/end, 209 with end < start); export the report again"
    )


def test_empty_string_ids_warn_with_the_count(tmp_path: Path) -> None:
    path, truth = export(tmp_path / "nostrings.sqlite")
    with edited(path) as conn:
        conn.execute("DELETE FROM StringIds")
    trace = load(path)
    assert set(trace.kernels["name"]) == {"[unknown]"}
    assert trace.warnings == (
        "836 of 836 kernel names not found in StringIds (shown as [unknown])",
        "2 NVTX range names not found in StringIds (shown as empty names)",  # the 2 by textId
    )
    assert gpu_numbers(analyze(trace, scope=WHOLE))[(48211, 0)]["kernels"] == 836
    del truth


def test_some_names_missing_from_string_ids(tmp_path: Path) -> None:
    path, _ = export(tmp_path / "fewstrings.sqlite")
    with edited(path) as conn:
        (name_id,) = conn.execute(f"SELECT demangledName FROM {KERNELS} LIMIT 1").fetchone()
        (n,) = conn.execute(f"SELECT count(*) FROM {KERNELS} WHERE demangledName = ?",
                            (name_id,)).fetchone()  # fmt: skip
        conn.execute("DELETE FROM StringIds WHERE id = ?", (name_id,))
    trace = load(path)
    assert trace.kernels.filter(pl.col("name") == "[unknown]").height == n
    assert f"{n} of 836 kernel names not found in StringIds (shown as [unknown])" in trace.warnings


# --- 3. malformed values, missing columns, unreadable files --------------------------------------


@pytest.mark.parametrize("where", ["first", "late"])
def test_text_and_real_in_integer_columns_are_counted(tmp_path: Path, where: str) -> None:
    """ADBC guesses a column's type from its first rows: text there, or text later, or a REAL
    must all come out as a counted, left-out row (not an internal error, not a truncated 1.5)."""
    path, truth = export(tmp_path / "mixed.sqlite")
    with edited(path) as conn:
        copy_rows(conn, KERNELS, 3, start="'soon'")
        copy_rows(conn, KERNELS, 2, start="1.5")
        copy_rows(conn, KERNELS, 1, deviceId="'gpu0'")
        if where == "first":
            odd = "typeof(start) = 'integer' AND typeof(deviceId) = 'integer'"
            reorder(conn, KERNELS, f"{odd}, rowid")
            assert conn.execute(f"SELECT typeof(start) FROM {KERNELS} LIMIT 1").fetchone() == (
                "text",
            )
    trace = load(path)
    assert trace.dropped["kernel rows with a missing or non-integer start/end"] == 5
    assert trace.dropped["kernel rows without a device or process"] == 1
    assert ("values that are not integers in integer columns of CUPTI_ACTIVITY_KIND_KERNEL "
            "read as missing") in trace.warnings  # fmt: skip
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth)
    proc = run_cli("analyze", str(path))
    assert_clean_run(proc)
    assert "5 kernel rows with a missing or non-integer start/end left out" in proc.stdout


def test_missing_required_column_is_named(tmp_path: Path) -> None:
    path, _ = export(tmp_path / "nostart.sqlite")
    with edited(path) as conn:
        conn.execute(f"ALTER TABLE {KERNELS} RENAME COLUMN start TO begin")
    message = one_line_error(run_cli("analyze", str(path)))
    assert message == (
        f"{path}: table {KERNELS} has no column start: not an export layout nsysmoe knows (nsys "
        "2022.2 to 2026.x (export schema 2.9 to 3.2x)); export the report with a supported nsys, "
        "or report the nsys version"
    )


def test_unreadable_file_says_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests run as root, where chmod 000 does not stop reads: the refusal is simulated."""
    path, _ = export(tmp_path / "locked.sqlite")
    lock(monkeypatch, path)
    with pytest.raises(NsysmoeError) as err:
        read_nsys_sqlite(path)
    assert str(err.value) == (
        f"{path}: cannot read (Permission denied); check the file and its permissions"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_chmod_000_file_says_permission_denied(tmp_path: Path) -> None:
    path, _ = export(tmp_path / "locked.sqlite")
    path.chmod(0)
    try:
        with pytest.raises(NsysmoeError, match=r"cannot read \(Permission denied\)"):
            read_nsys_sqlite(path)
    finally:
        path.chmod(0o644)


def test_sqlite3_fallback_reads_damage_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the ADBC driver rows come from ``sqlite3``, whose conversions are lenient (1.5
    would become 1): every value is checked in SQL instead, with the same result."""
    path, truth = export(tmp_path / "fallback.sqlite")
    with edited(path) as conn:
        copy_rows(conn, KERNELS, 3, start="'soon'")
        copy_rows(conn, KERNELS, 2, start="1.5")
        copy_rows(conn, KERNELS, 1, deviceId="'gpu0'")
        (name_id,) = conn.execute(f"SELECT demangledName FROM {KERNELS} LIMIT 1").fetchone()
        conn.execute(f"UPDATE StringIds SET value = {BAD_UTF8} WHERE id = ?", (name_id,))
    arrow = read_nsys_sqlite(path)
    monkeypatch.setattr(bulk, "adbc_driver_manager", None)
    rows = read_nsys_sqlite(path)
    for table in ("kernels", "memops", "runtime", "nvtx", "gpus", "memory_events"):
        assert getattr(rows, table).equals(getattr(arrow, table)), table
    assert rows.warnings == arrow.warnings and rows.dropped == arrow.dropped
    assert rows.dropped["kernel rows with a missing or non-integer start/end"] == 5
    assert "1 strings with invalid UTF-8 bytes shown with U+FFFD" in rows.warnings
    assert gpu_numbers(analyze(rows, scope=WHOLE)) == truth_numbers(truth)


def test_damaged_schema_with_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """SQLite's error message quotes the damaged schema text; its bytes must not escape as a
    UnicodeDecodeError (an internal error)."""
    path, _ = export(tmp_path / "schema.sqlite")
    bad = b"CREATE TABLE TARGET_INFO_GPU (id INTEGER, 'x\xff\xfe".hex()
    with edited(path) as conn:
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute(f"UPDATE sqlite_master SET sql = CAST(X'{bad}' AS TEXT) "
                     "WHERE name = 'TARGET_INFO_GPU'")  # fmt: skip
    assert one_line_error(run_cli("analyze", str(path))) == (
        f"{path}: unreadable SQLite (an error quoting bytes that are not UTF-8, from a damaged "
        "schema); the file is truncated or corrupt, export it again"
    )
