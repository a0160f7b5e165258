"""Reports through the fastest export (issue 37 point 2): a usable ``<report>_pqtdir/`` beside
the report is read as it is; else the user's nsys exports only the tables nsysmoe reads, to
Parquet where it can. Held against the real reports of ``shared/traces/nsys-2023`` with nsys
2023.4 (``shared/tools/get-nsys``; under CI=true these run, they do not skip) and against fake
``nsys`` scripts for what a real one cannot be made to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nsysmoe.io import nsys_db
from nsysmoe.io.nsys_columnar import Columnar
from nsysmoe.io.nsys_rep import BESIDE_NEEDS, Caps, probe
from nsysmoe.io.nsys_sqlite import TABLES_READ
from tests.conftest import REPO, SHARED, require_shared
from tests.fixtures.columnar import to_columnar
from tests.io.test_columnar import SOURCE_FIELDS, SQLITE_ONLY_WARNING, differences

EXAMPLES = sorted((Path(nsys_db.__file__).parents[1] / "examples").glob("*.sqlite"))
REPORT = "nersc-ddp-4gpu-baseline"


@pytest.fixture(scope="module")
def nsys_bin() -> Path:
    """The folder holding nsys 2023.4 (fetched once by shared/tools/get-nsys)."""
    tool = require_shared().parent / "tools" / "get-nsys"
    got = subprocess.run(["bash", str(tool)], capture_output=True, text=True, timeout=900)
    if got.returncode != 0:
        reason = f"get-nsys failed: {got.stderr.strip()[-300:]}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + "; under CI=true nsys must be fetched")
        pytest.skip(reason)
    return Path(got.stdout.strip()).parent


def run(*args: str, path: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run([sys.executable, "-m", "nsysmoe", *args], capture_output=True,
                          text=True, env=env, cwd=cwd)  # fmt: skip


def analysis(report: Path, path: str) -> dict[str, Any]:
    got = run("analyze", str(report), "--format", "json", path=path)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def no_nsys_path(tmp_path: Path) -> str:
    empty = tmp_path / "no-nsys-bin"
    empty.mkdir(exist_ok=True)
    return str(empty)


def test_report_takes_the_tables_parquet_path_and_gives_the_sqlite_numbers(
    nsys_bin: Path, tmp_path: Path
) -> None:
    report = tmp_path / f"{REPORT}.qdrep"
    shutil.copy(SHARED / "traces" / "nsys-2023" / "reports" / report.name, report)
    before = report.read_bytes()
    got = analysis(report, f"{nsys_bin}{os.pathsep}{os.environ['PATH']}")
    want = analysis(SHARED / "traces" / "nsys" / f"{REPORT}.sqlite", os.environ["PATH"])
    trace = got["traces"][0]
    assert trace["format"] == "nsys-parquet"
    assert trace["via"].startswith("exported to Parquet by ")
    assert f"the {len(TABLES_READ)} tables nsysmoe reads" in trace["via"]
    diff = differences(got, want)
    rest = {k: v for k, v in diff.items()
            if k.rsplit(".", 1)[-1] not in SOURCE_FIELDS | {"via"}}  # fmt: skip
    assert rest == {".traces[0].warnings[0]": (None, SQLITE_ONLY_WARNING)}
    assert report.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [report.name]  # nothing left beside it


def test_parquet_export_beside_the_report_is_read_without_nsys(tmp_path: Path) -> None:
    """The recipe cache beside its report (newer than it, holding the measured tables) is read
    as it is: no nsys on PATH, every GPU figure of the SQLite export."""
    name = "nersc-ddp-4gpu-bucketcap100mb"
    report = tmp_path / f"{name}.qdrep"
    shutil.copy(require_shared() / "nsys-2023" / "reports" / report.name, report)
    shutil.copytree(SHARED / "traces" / "nsys-2023" / "recipe-cache" / f"{name}_pqtdir",
                    tmp_path / f"{name}_pqtdir")  # fmt: skip
    made = min(p.stat().st_mtime_ns for p in (tmp_path / f"{name}_pqtdir").iterdir())
    os.utime(report, ns=(made - 10**9, made - 10**9))  # recorded before the recipe ran
    got = analysis(report, no_nsys_path(tmp_path))["traces"][0]
    assert got["path"] == str(report)
    assert got["via"].startswith(f"read from {name}_pqtdir/ beside it")
    want = analysis(SHARED / "traces" / "nsys" / f"{name}.sqlite", os.environ["PATH"])
    assert [g["comm_ns"] for g in got["gpus"]] == [g["comm_ns"] for g in want["traces"][0]["gpus"]]
    assert "table:META_DATA_EXPORT" in got["not_captured"]


def test_parquet_beside_an_older_or_newer_report(tmp_path: Path) -> None:
    """Older than the report (the report was recorded again) or missing a measured table: not
    used, so without nsys the report cannot be read and says so."""
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"report")
    folder = to_columnar(EXAMPLES[0], tmp_path / "run_pqtdir")
    os.utime(report, ns=(0, max(p.stat().st_mtime_ns for p in folder.iterdir()) + 10**9))
    stale = run("analyze", str(report), path=no_nsys_path(tmp_path))
    assert stale.returncode == 2 and "needs `nsys` on PATH" in stale.stderr
    os.utime(report, ns=(0, 0))
    fresh = run("analyze", str(report), "--format", "json", path=no_nsys_path(tmp_path))
    assert fresh.returncode == 0, fresh.stderr
    (folder / f"{BESIDE_NEEDS[-1]}.parquet").unlink()
    partial = run("analyze", str(report), path=no_nsys_path(tmp_path))
    assert partial.returncode == 2 and "needs `nsys` on PATH" in partial.stderr


def _fake_nsys(tmp_path: Path, help_text: str) -> tuple[str, Path]:
    """An ``nsys`` whose ``export --help`` prints ``help_text`` and whose export copies the
    first example's Parquet or SQLite form to --output; it logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv.log"
    pq = to_columnar(EXAMPLES[0], tmp_path / "src_pqtdir")
    script = f"""#!/bin/sh
echo "$@" >> {log}
if [ "$2" = --help ]; then printf '%s\\n' '{help_text}'; exit 0; fi
type=""; out=""
while [ $# -gt 1 ]; do
  [ "$1" = --type ] && type="$2"; [ "$1" = --output ] && out="$2"; shift
done
if [ "$type" = parquetdir ]; then cp -r {pq} "$out"; else cp {EXAMPLES[0]} "$out"; fi
"""
    nsys = bin_dir / "nsys"
    nsys.write_text(script)
    nsys.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}", log


@pytest.mark.parametrize(
    ("help_text", "form", "tables"),
    [
        ("-t, --type= sqlite, hdf, arrow, arrowdir, and parquetdir --tables=<pattern>",
         "parquetdir", True),
        ("-t, --type= sqlite, hdf, json --tables=<pattern>", "sqlite", True),
        ("-t, --type= sqlite, hdf", "sqlite", False),  # nsys 2022.4: neither
    ],
)
def test_what_the_probe_finds_chooses_the_export(help_text: str, form: str, tables: bool,
                                                 tmp_path: Path) -> None:  # fmt: skip
    path, log = _fake_nsys(tmp_path, help_text)
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"report")
    got = run("analyze", str(report), "--format", "json", path=path)
    assert got.returncode == 0, got.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "export --help"
    export = calls[1].split()
    assert export[export.index("--type") + 1] == form
    assert ("--tables" in export) == tables
    trace = json.loads(got.stdout)["traces"][0]
    assert trace["format"] == ("nsys-parquet" if form == "parquetdir" else "nsys-sqlite")
    assert trace["via"].startswith("exported to ")


def test_probe_is_cached_per_binary() -> None:
    probe.cache_clear()
    first = probe("/nonexistent/nsys", (1, 2, 3))
    assert first == Caps(False, False)
    assert probe.cache_info().misses == 1
    probe("/nonexistent/nsys", (1, 2, 3))
    assert probe.cache_info().hits == 1


def test_tables_read_holds_every_table_a_reader_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--tables`` of a report asks for TABLES_READ only: every table the readers look for
    must be in it, or an export made that way would lack it."""
    asked: set[str] = set()
    real_has, real_columns = Columnar.has, Columnar.columns

    def has(self: Columnar, table: str) -> bool:
        asked.add(table)
        return real_has(self, table)

    def columns(self: Columnar, table: str) -> set[str]:
        asked.add(table)
        return real_columns(self, table)

    monkeypatch.setattr(Columnar, "has", has)
    monkeypatch.setattr(Columnar, "columns", columns)
    from nsysmoe.io import load_trace

    for p in EXAMPLES:
        load_trace(to_columnar(p, tmp_path / (p.stem + "_pqtdir")))
    assert asked and asked <= set(TABLES_READ), asked - set(TABLES_READ)


# -- nsys export --type arrow: one .arrows file of table streams -----------------------------------


@pytest.fixture(scope="module")
def arrows_export(nsys_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The NERSC baseline report exported by nsys 2023.4 with ``--type arrow``."""
    folder = tmp_path_factory.mktemp("arrows")
    out = folder / f"{REPORT}.arrows"
    subprocess.run([str(nsys_bin / "nsys"), "export", "--type", "arrow", "--output", str(out),
                    str(SHARED / "traces" / "nsys-2023" / "reports" / f"{REPORT}.qdrep")],
                   check=True, capture_output=True)  # fmt: skip
    out.chmod(0o444)
    return out


def test_arrows_file_analyses_as_the_sqlite(arrows_export: Path) -> None:
    got = analysis(arrows_export, os.environ["PATH"])
    want = analysis(SHARED / "traces" / "nsys" / f"{REPORT}.sqlite", os.environ["PATH"])
    assert got["traces"][0]["format"] == "nsys-arrow"
    diff = differences(got, want)
    rest = {k: v for k, v in diff.items() if k.rsplit(".", 1)[-1] not in SOURCE_FIELDS}
    assert rest == {".traces[0].warnings[0]": (None, SQLITE_ONLY_WARNING)}


def test_arrows_streams_are_found_without_reading_their_rows(arrows_export: Path) -> None:
    """Every table nsysmoe reads is found with its span; each span read alone is that table."""
    import polars as pl

    from nsysmoe.io.arrow_streams import read_stream, table_streams

    spans = table_streams(arrows_export)
    pq = SHARED / "traces" / "nsys-2023" / "export" / f"{REPORT}_pqtdir"
    assert {p.stem for p in pq.glob("*.parquet")} <= set(spans)
    import io

    kernels = pl.read_ipc_stream(io.BytesIO(read_stream(arrows_export,
                                                       spans["CUPTI_ACTIVITY_KIND_KERNEL"])))
    assert kernels.height == pl.read_parquet(pq / "CUPTI_ACTIVITY_KIND_KERNEL.parquet").height
    schema = pl.read_ipc_stream(io.BytesIO(read_stream(
        arrows_export, spans["CUPTI_ACTIVITY_KIND_KERNEL"], schema_only=True)))
    assert schema.height == 0 and schema.schema == kernels.schema


@pytest.mark.parametrize("cut", [7, 100, 1000, 0.5, -9, -1])
def test_a_damaged_arrows_file_is_one_line(arrows_export: Path, cut: float, tmp_path: Path) -> None:
    """Cut short anywhere, or a byte of a message header changed: one line, exit 2."""
    data = arrows_export.read_bytes()
    bad = tmp_path / "bad.arrows"
    bad.write_bytes(data[: int(len(data) * cut) if isinstance(cut, float) else cut])
    got = run("analyze", str(bad), path=os.environ["PATH"])
    assert got.returncode == 2, got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and "Traceback" not in got.stderr
    flipped = bytearray(data)
    flipped[5] ^= 0x40  # the first message's metadata length
    bad.write_bytes(bytes(flipped))
    got = run("analyze", str(bad), path=os.environ["PATH"])
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1, got.stderr


def test_arrows_with_a_table_twice_is_refused(arrows_export: Path, tmp_path: Path) -> None:
    """Two exports' streams in one file (or a file appended to): refused, not read as the first
    (review)."""
    twice = tmp_path / "twice.arrows"
    twice.write_bytes(arrows_export.read_bytes() * 2)
    got = run("analyze", str(twice), path=os.environ["PATH"])
    assert got.returncode == 2 and "appears twice" in got.stderr, got.stderr


def test_arrows_cut_between_two_tables_warns(arrows_export: Path, tmp_path: Path) -> None:
    """A cut exactly after a stream's end marker leaves a well-formed file; the reader warns
    that the PROCESSES table every export holds is missing (review: it was silent)."""
    from nsysmoe.io.arrow_streams import table_streams

    spans = table_streams(arrows_export)
    end = spans["CUPTI_ACTIVITY_KIND_KERNEL"][1]
    cut = tmp_path / "cut.arrows"
    cut.write_bytes(arrows_export.read_bytes()[:end])
    got = run("analyze", str(cut), "--format", "json", path=os.environ["PATH"])
    assert got.returncode == 0, got.stderr
    warnings = json.loads(got.stdout)["traces"][0]["warnings"]
    assert any("may be cut short" in w for w in warnings), warnings
