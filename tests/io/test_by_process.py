"""An nsys export split by process while it is read (``nsys_split.read_by_process``) is exactly the
whole read split afterwards (``ByProcess.of(read_nsys_sqlite(path))``): the same shared tables,
notes and warnings, the same processes, and each process's rows and their positions in the whole
tables. Ranges are forced tiny here, so every table is read in many ranges, most of them holding
rows of several processes; real exports, multi-rank fixtures written from real DDL, and damaged
ones (rows left out in some ranges only, invalid UTF-8, text in integer columns, unended NVTX
ranges, a domain created after its ranges) are checked, and bad input fails with the whole
read's message."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsysmoe.errors import NsysmoeError
from nsysmoe.io import bulk, export_tables, load_by_process, load_trace, nsys_db, nsys_split
from nsysmoe.io.nsys_split import read_by_process
from nsysmoe.io.nsys_sqlite import read_nsys_sqlite
from nsysmoe.io.processes import BIG_TABLES, ByProcess
from nsysmoe.model import Trace
from tests.conftest import require_shared
from tests.fixtures.generate import (
    edge_case_scenario,
    graph_scenario,
    straggler_scenario,
    write_export,
)
from tests.fixtures.hostile import KERNELS, copy_rows, digest, edited, kineto, relax, reorder

EXAMPLES = sorted((Path(nsys_db.__file__).parents[1] / "examples").glob("*.sqlite"))
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
BAD_UTF8 = "CAST(X'626164ff6e616d65' AS TEXT)"  # b"bad\xffname"


def assert_same_trace(a: Trace, b: Trace) -> None:
    for field in dataclasses.fields(Trace):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pl.DataFrame):
            try:
                assert_frame_equal(x, y)
            except AssertionError as exc:
                raise AssertionError(f"{field.name}: {exc}") from None
        else:
            assert x == y, field.name
    assert list(a.dropped.items()) == list(b.dropped.items())  # the order warnings are said in
    assert list(a.not_captured.items()) == list(b.not_captured.items())


def assert_same_split(got: ByProcess, ref: ByProcess) -> None:
    assert_same_trace(got.shared, ref.shared)
    assert got.pids == ref.pids
    assert got.rows == ref.rows
    for pid in ref.pids:
        a, b = got.load(pid), ref.load(pid)
        assert a.pid == b.pid == pid
        assert_same_trace(a.trace, b.trace)
        for table in BIG_TABLES:
            assert a.order[table].dtype == np.int64, table
            assert np.array_equal(a.order[table], b.order[table]), (pid, table)


def split(path: Path, spill: Path, monkeypatch: pytest.MonkeyPatch, rows: int) -> ByProcess:
    monkeypatch.setattr(nsys_split, "CHUNK_ROWS", rows)
    return read_by_process(path, spill)


def ranges(spill: Path) -> dict[tuple[str, int], set[int]]:
    """The spilled ranges, ``(table, index)``, with the pids each holds rows of."""
    held: dict[tuple[str, int], set[int]] = {}
    for f in spill.rglob("*.arrow"):
        table, index, pid = re.fullmatch(r"(\w+)\.(\d+)\.(-?\d+)\.arrow", f.name).groups()
        held.setdefault((table, int(index)), set()).add(int(pid))
    return held


def assert_split_is_whole(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int = 1000
) -> ByProcess:
    """The split read against the reference; the input file untouched (bytes and mtime)."""
    ref = ByProcess.of(read_nsys_sqlite(path))
    before = (digest(path), path.stat().st_mtime_ns)
    spill = tmp_path / f"spill-{path.stem}"
    got = split(path, spill, monkeypatch, rows)
    assert (digest(path), path.stat().st_mtime_ns) == before
    assert_same_split(got, ref)
    return got


def test_shared_traces_split_while_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted((require_shared() / "nsys").rglob("*.sqlite"))
    assert paths
    for path in paths:
        assert_split_is_whole(path, tmp_path, monkeypatch)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_split_while_read(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_split_is_whole(path, tmp_path, monkeypatch)


def _straggler() -> object:
    (spec,), _ = straggler_scenario(n_ranks=4, steps=2, layout="multi")
    return spec


SCENARIOS = {
    "4-rank": _straggler,
    "graph-3-ranks": lambda: graph_scenario(mode="graph", steps=2, n_processes=3)[0],
    "node-2-ranks": lambda: graph_scenario(mode="node", steps=2, n_processes=2)[0],
    "edge-2-processes": lambda: edge_case_scenario()[0],
}


@pytest.mark.parametrize("ddl", ["2.9.1", "3.13.2", "3.28.1"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_multi_process_fixtures_split_while_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, ddl: str
) -> None:
    spec = SCENARIOS[name]()
    if ddl == "2.9.1" and spec.graph_traces:
        pytest.skip("schema 2.9.1 has no graph-trace table")
    path = write_export(tmp_path / f"{name}.sqlite", spec, ddl, shuffle=True, seed=3)
    got = assert_split_is_whole(path, tmp_path, monkeypatch, rows=20)
    assert len(got.pids) >= 2
    held = ranges(next(tmp_path.glob("spill-*")))
    for table in BIG_TABLES:
        if got.rows[table] > 100:
            mine = [pids for (t, _), pids in held.items() if t == table]
            assert len(mine) > 2 and any(len(pids) > 1 for pids in mine), table


def _damaged(tmp_path: Path) -> Path:
    """A 3-rank export (CUDA-graph replays, NVTX domains) with damage in some ranges only."""
    spec = SCENARIOS["graph-3-ranks"]()
    path = write_export(tmp_path / "damaged.sqlite", spec, "3.13.2", shuffle=True)
    with edited(path) as conn:
        for table in (KERNELS, RUNTIME, NVTX):
            relax(conn, table)
        copy_rows(conn, KERNELS, 3, start="'soon'")
        copy_rows(conn, KERNELS, 2, start="1.5")
        copy_rows(conn, KERNELS, 1, deviceId="'gpu0'")
        copy_rows(conn, KERNELS, 2, globalPid="NULL")
        copy_rows(conn, RUNTIME, 4, start="NULL")
        copy_rows(conn, RUNTIME, 5, globalTid="NULL")  # kept, in no process
        copy_rows(conn, NVTX, 3, "eventType = 59", globalTid="NULL")
        copy_rows(conn, NVTX, 4, "eventType = 59", end="NULL")  # unended: end at the last time
        # left out: in the first ranges only (ranges of nothing but invalid rows included)
        conn.execute(f"UPDATE {KERNELS} SET start = NULL WHERE rowid <= 150")
        conn.execute(f'UPDATE {KERNELS} SET "end" = start - 1 WHERE rowid BETWEEN 400 AND 410')
        # one kernel name's string, used in every range, and two NVTX texts: invalid UTF-8
        (name_id,) = conn.execute(f"SELECT demangledName FROM {KERNELS} LIMIT 1").fetchone()
        conn.execute(f"UPDATE StringIds SET value = {BAD_UTF8} WHERE id = ?", (name_id,))
        conn.execute(f"UPDATE {NVTX} SET text = {BAD_UTF8} WHERE rowid IN "
                     f"(SELECT rowid FROM {NVTX} WHERE eventType = 59 LIMIT 2)")  # fmt: skip
        # another name missing from StringIds
        (gone,) = conn.execute(f"SELECT demangledName FROM {KERNELS} WHERE demangledName <> ? "
                               "LIMIT 1", (name_id,)).fetchone()  # fmt: skip
        conn.execute("DELETE FROM StringIds WHERE id = ?", (gone,))
        # a domain created after the ranges that name it, at the table's end
        (tid,) = conn.execute(f"SELECT globalTid FROM {NVTX} WHERE globalTid IS NOT NULL "
                              "LIMIT 1").fetchone()  # fmt: skip
        conn.execute(f"UPDATE {NVTX} SET domainId = 7 WHERE globalTid = ? AND rowid < 100",
                     (tid,))  # fmt: skip
        conn.execute(f'INSERT INTO {NVTX} (start, "end", eventType, text, globalTid, domainId) '
                     "VALUES (5, NULL, 75, 'Late', ?, 7)", (tid,))  # fmt: skip
    return path


def test_damaged_export_split_while_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _damaged(tmp_path)
    got = assert_split_is_whole(path, tmp_path, monkeypatch, rows=30)
    warnings = got.shared.warnings
    for said in ("kernel rows with a missing or non-integer start/end left out",
                 "kernel rows with end < start left out",
                 "kernel rows without a device or process left out",
                 "CUDA API rows with a missing or non-integer start/end left out",
                 "kernel names not found in StringIds", "read as missing",
                 "strings with invalid UTF-8 bytes shown with U+FFFD"):  # fmt: skip
        assert any(said in w for w in warnings), said
    held = ranges(next(tmp_path.glob("spill-*")))
    assert sum(t == "nvtx" for t, _ in held) > 2
    nvtx = pl.concat([got.load(pid).trace.nvtx for pid in got.pids])
    assert nvtx.filter(pl.col("domain") == "Late").height > 0
    # CUDA calls of no process are left out, and counted, by the whole read as by the split
    assert got.shared.dropped["CUDA API rows without a process"] > 0
    assert got.rows["runtime"] == sum(len(got.load(p).trace.runtime) for p in got.pids)


def test_damage_read_through_sqlite3_split_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the Arrow driver (row tuples, values checked in SQL) as with it."""
    path = _damaged(tmp_path)
    monkeypatch.setattr(bulk, "adbc_driver_manager", None)
    assert_split_is_whole(path, tmp_path, monkeypatch, rows=200)


def test_string_ids_read_whole_past_the_id_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_ID_LIST distinct ids the whole read reads all of StringIds (and counts every
    invalid string in it): so does the split read, once its ranges' ids pass it together."""
    path = _damaged(tmp_path)
    with edited(path) as conn:  # an invalid string no row refers to
        conn.execute(f"INSERT INTO StringIds (id, value) VALUES (99999999, {BAD_UTF8})")
    monkeypatch.setattr(export_tables, "MAX_ID_LIST", 12)
    assert_split_is_whole(path, tmp_path, monkeypatch, rows=50)


def test_export_without_optional_tables_splits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_export(tmp_path / "bare.sqlite", _straggler(), "3.13.2")
    with edited(path) as conn:
        for table in (RUNTIME, NVTX, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                      "TARGET_INFO_GPU"):  # fmt: skip
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    got = assert_split_is_whole(path, tmp_path, monkeypatch, rows=100)
    assert got.rows["runtime"] == got.rows["nvtx"] == 0


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    exported = write_export(tmp_path / "base.sqlite", _straggler(), "3.13.2", shuffle=True)
    made = {}
    not_export = tmp_path / "other.sqlite"
    with sqlite3.connect(not_export) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    made["not an export"] = not_export
    for name, edit in {
        "no kernels": f"DROP TABLE {KERNELS}",
        "all invalid": f'UPDATE {KERNELS} SET "end" = start - 1',
        "no start column": f"ALTER TABLE {KERNELS} RENAME COLUMN start TO begin",
    }.items():
        path = tmp_path / f"{name.replace(' ', '-')}.sqlite"
        path.write_bytes(exported.read_bytes())
        with edited(path) as conn:
            conn.execute(edit)
        made[name] = path
    text = tmp_path / "text.sqlite"
    text.write_text("not a database\n")
    made["not sqlite"] = text
    data = exported.read_bytes()
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(data[: len(data) // 2 // 4096 * 4096])
    made["truncated"] = truncated
    return made


def test_bad_input_fails_with_the_whole_reads_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, path in _bad_inputs(tmp_path).items():
        with pytest.raises(NsysmoeError) as whole:
            read_nsys_sqlite(path)
        spill = tmp_path / f"spill-{path.stem}"
        with pytest.raises(NsysmoeError) as parted:
            split(path, spill, monkeypatch, 100)
        assert str(parted.value) == str(whole.value), name
        assert not list(spill.rglob("*")), name  # nothing left behind


def test_all_invalid_counts_the_whole_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges of nothing but invalid kernel rows, then one with six valid rows: read, as the
    whole table is (only a table whose every row is invalid is refused)."""
    path = write_export(tmp_path / "late.sqlite", _straggler(), "3.13.2")
    with edited(path) as conn:
        relax(conn, KERNELS)
        (n,) = conn.execute(f"SELECT max(rowid) FROM {KERNELS}").fetchone()
        conn.execute(f"UPDATE {KERNELS} SET start = NULL WHERE rowid < ?", (n - 5,))
    got = assert_split_is_whole(path, tmp_path, monkeypatch, rows=100)
    assert got.rows["kernels"] == 6


def test_load_by_process_is_load_trace_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's split: redacted as load_trace redacts (a GPU name holding a token), and a
    Kineto trace split in memory."""
    path = write_export(tmp_path / "gate.sqlite", _straggler(), "3.13.2", shuffle=True)
    with edited(path) as conn:
        conn.execute("UPDATE TARGET_INFO_GPU SET name = 'H100 hf_abcdefghijklmnopqrstuvwxyz0123'")
    monkeypatch.setattr(nsys_split, "CHUNK_ROWS", 100)
    got = load_by_process(path, tmp_path / "spill")
    ref = ByProcess.of(load_trace(path))
    assert_same_split(got, ref)
    assert "hf_" not in str(got.shared.gpus["gpu_name"].to_list())
    trace_json, _ = kineto(tmp_path / "trace.json")
    assert_same_split(load_by_process(trace_json, tmp_path / "spill"),
                      ByProcess.of(load_trace(trace_json)))  # fmt: skip


def test_rows_first_in_range_of_text_split_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range whose first rows hold text in integer columns (the driver guesses a column's type
    from its first rows) reads as the whole table does."""
    path = write_export(tmp_path / "first.sqlite", _straggler(), "3.13.2", shuffle=True)
    with edited(path) as conn:
        copy_rows(conn, KERNELS, 3, start="'soon'")
        reorder(conn, KERNELS, "typeof(start) = 'integer', rowid")
    assert_split_is_whole(path, tmp_path, monkeypatch, rows=100)
