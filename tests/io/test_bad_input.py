"""Bad input: one line on stderr, a non-zero exit, no traceback, and the file stays unchanged."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.api import example_paths
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.bulk import BulkReader
from nsysmoe.io.nsys_db import connect_readonly

DDL = Path(__file__).parents[1] / "fixtures" / "ddl" / "real-nsys-2024.5.1-schema3.13.2.sql"


def create_statement(table: str, ddl: Path = DDL) -> str:
    """The real exporter's CREATE TABLE statement for ``table``."""
    m = re.search(rf"CREATE TABLE {table} \(.*?\n\);", ddl.read_text(), re.S)
    assert m, f"{table} not in {ddl.name}"
    return m.group(0)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nsysmoe: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


def _truncated(tmp: Path) -> Path:
    src = example_paths()[0].read_bytes()
    out = tmp / "truncated.sqlite"
    out.write_bytes(src[: len(src) // 3])
    return out


def _corrupt(tmp: Path) -> Path:
    data = bytearray(example_paths()[0].read_bytes())
    for offset in range(4096, len(data), 4096):  # wreck every page header after the first
        data[offset : offset + 16] = b"\xff" * 16
    out = tmp / "corrupt.sqlite"
    out.write_bytes(bytes(data))
    return out


def _not_sqlite(tmp: Path) -> Path:
    out = tmp / "report.sqlite"
    out.write_text("this is a CSV, not an export\n1,2,3\n")
    return out


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _not_nsys(tmp: Path) -> Path:
    out = tmp / "other.sqlite"
    with sqlite3.connect(out) as conn:
        conn.execute("CREATE TABLE people (name TEXT, age INTEGER)")
        conn.execute("INSERT INTO people VALUES ('ada', 36)")
    return out


def _no_kernels(tmp: Path) -> Path:
    """A real-schema export with NVTX only (captured with --trace=nvtx, no CUDA)."""
    out = tmp / "nvtx_only.sqlite"
    with sqlite3.connect(out) as conn:
        conn.execute(create_statement("StringIds"))
        conn.execute(create_statement("META_DATA_EXPORT"))
        conn.execute("INSERT INTO StringIds VALUES (0, '[Unknown]')")
        conn.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.13.2')")
    return out


BAD_FILES = {
    "truncated": (_truncated, "corrupt"),
    "corrupt": (_corrupt, "corrupt"),
    "not-sqlite": (_not_sqlite, "neither an SQLite export nor a profiler JSON trace"),
    "empty": (lambda tmp: _write(tmp / "empty.json", b""), "file is empty"),
    "not-nsys": (_not_nsys, "not an Nsight Systems export"),
    "no-kernels": (_no_kernels, "no CUDA kernel data"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_one_line_error_and_unchanged(tmp_path: Path, case: str) -> None:
    make, needle = BAD_FILES[case]
    path = make(tmp_path)
    before = digest(path)
    proc = run_cli("analyze", str(path))
    assert_one_line_error(proc, str(path), needle)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no journal/WAL left


def test_missing_path() -> None:
    proc = run_cli("analyze", "/nonexistent/trace.sqlite")
    assert_one_line_error(proc, "no such file")


def test_ab_says_the_unreadable_file_before_any_work_on_the_other() -> None:
    """Both sides of an A/B are read before either is classified: a missing ON file is the
    error even where OFF would fail later (no rank 7 in it)."""
    off, _ = example_paths()
    proc = run_cli("analyze", off, "/nonexistent/on.sqlite", "--rank", "7")
    assert_one_line_error(proc, "/nonexistent/on.sqlite", "no such file")


@pytest.mark.parametrize("name", [b"bad\xff\xfe.sqlite", b"q?h#p%25 s.sqlite",
                                  "ünï ☃.sqlite".encode()], ids=["not-utf8", "uri-chars", "utf8"])
def test_any_file_name_opens_that_file(name: bytes, tmp_path: Path) -> None:
    """The URI holds the name's own bytes, percent-encoded (issue 31: a name that is not UTF-8,
    a surrogate-escaped str, was a UnicodeEncodeError), and both readers open that very file."""
    path = tmp_path / os.fsdecode(name)
    shutil.copy(example_paths()[0], path)
    sql = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    original, _ = connect_readonly(example_paths()[0])
    want = original.execute(sql).fetchone()[0]
    original.close()
    conn, uri = connect_readonly(path)
    try:
        assert uri.isascii()
        bulk = BulkReader(uri, conn)  # ADBC where installed
        try:
            got = bulk.frame(sql, {"n": pl.Int64})["n"][0]
        finally:
            bulk.close()
        assert conn.execute(sql).fetchone()[0] == got == want > 0
    finally:
        conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing written beside
    with pytest.raises(NsysmoeError, match="no such file; check the path"):
        connect_readonly(tmp_path / os.fsdecode(b"gone" + name))


def test_directory_is_not_a_trace(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("analyze", str(tmp_path)), "directory")


def test_empty_window(tmp_path: Path) -> None:
    path = tmp_path / "example.sqlite"
    shutil.copy(example_paths()[0], path)
    before = digest(path)
    proc = run_cli("analyze", str(path), "--window", "1000s:1001s")
    assert_one_line_error(proc, "no GPU work in the window", "widen --window")
    assert digest(path) == before


def test_inverted_window_is_a_usage_error() -> None:
    proc = run_cli("analyze", str(example_paths()[0]), "--window", "5s:1s")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "END must be after START" in proc.stderr


def test_bad_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nclass = "comm"\nsubclass = "x"\npattern = "("\n')
    proc = run_cli("analyze", str(example_paths()[0]), "--rules", str(rules))
    assert_one_line_error(proc, str(rules))


def test_nsys_rep_without_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    env_path = str(tmp_path)  # a PATH without nsys
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", "analyze", str(rep)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": env_path})
    assert_one_line_error(proc, "nsys export --type sqlite")
