"""Directory and glob expansion takes trace files only: JSON that is no profiler trace (a run's
sidecar metadata) is skipped with one note, a broken trace stays a failure; checked against what
each file holds, written here."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.errors import NsysmoeError
from nsysmoe.parallel import SNIFF_BYTES, expand, is_trace, skipped_note

OFF, ON = api.example_paths()
KINETO = api.example_paths("kineto")[0]
SIDECAR = {"params": {"generator": 3, "seed": 100}, "counts": {"kernels": 20165}}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """Two rank exports, each with a JSON sidecar (plain and gzip), as a benchmark writes them."""
    for i, src in enumerate((OFF, ON)):
        shutil.copyfile(src, tmp_path / f"rank{i:02d}.sqlite")
    (tmp_path / "rank00.json").write_text(json.dumps(SIDECAR, indent=1))
    (tmp_path / "rank01.json.gz").write_bytes(gzip.compress(json.dumps(SIDECAR).encode()))
    return tmp_path


def test_sidecars_are_not_traces_and_traces_are(tmp_path: Path) -> None:
    cases = {
        "sidecar.json": (json.dumps(SIDECAR).encode(), False),
        "bom.json": (b"\xef\xbb\xbf  " + json.dumps(SIDECAR).encode(), False),
        "sidecar.json.gz": (gzip.compress(json.dumps(SIDECAR).encode()), False),
        "trace.json.gz": (KINETO.read_bytes(), True),
        "empty-trace.json": (b'{"traceEvents": []}', True),
        "truncated-trace.json": (b'{"traceEvents": [ {"ph": "X", ', True),
        "truncated.json": (b'{"params": {', True),  # broken: the reader says so
        "array.json": (b'[{"ph": "X"}]', True),  # a Chrome trace's array form: the reader says
        "text.json": (b"not json at all", True),
        "corrupt.json.gz": (gzip.compress(b"{}" * 100)[:12] + b"\0" * 30, True),
        "escaped-key.json": (b'{"trace\\u0045vents": []}', True),
        "big.json": (b'{"pad": "' + b"x" * SNIFF_BYTES + b'"}', True),  # too big to read whole
        "rank.sqlite": (b"anything", True),  # only JSON is looked into
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    assert {n: is_trace(tmp_path / n) for n in cases} == {n: t for n, (_, t) in cases.items()}


def test_unreadable_json_is_kept_for_the_reader_to_report(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    path = tmp_path / "locked.json"
    path.write_text(json.dumps(SIDECAR))
    path.chmod(0)
    assert is_trace(path)


def test_directory_and_glob_skip_sidecars(run_dir: Path) -> None:
    traces = [str(run_dir / "rank00.sqlite"), str(run_dir / "rank01.sqlite")]
    for arg in (str(run_dir), str(run_dir / "rank*")):
        skipped: list[str] = []
        assert expand(arg, skipped) == traces
        assert sorted(skipped) == [str(run_dir / "rank00.json"), str(run_dir / "rank01.json.gz")]
    assert expand(str(run_dir / "rank00.json")) == [str(run_dir / "rank00.json")]  # named: kept


def test_a_directory_of_sidecars_only_says_so(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(SIDECAR))
    with pytest.raises(NsysmoeError, match="holds no trace files.*skipped 1 file that is not a "
                                           "trace: meta.json"):  # fmt: skip
        expand(str(tmp_path))


def test_note_names_the_first_files() -> None:
    names = [f"/r/rank{i:02d}.json" for i in range(64)]
    assert skipped_note(names) == ("skipped 64 files that are not traces: rank00.json, "
                                   "rank01.json, rank02.json, …")  # fmt: skip
    assert skipped_note(names[:1]) == "skipped 1 file that is not a trace: rank00.json"


def test_cli_skips_sidecars_with_one_note_and_reports_broken_traces(run_dir: Path) -> None:
    proc = run_cli("analyze", str(run_dir), "--jobs", "1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == ("nsysmoe: note: skipped 2 files that are not traces: rank00.json, "
                    "rank01.json.gz")  # fmt: skip
    doc = json.loads(proc.stdout)
    assert len(doc["traces"]) == 2 and doc["failures"] == []
    (run_dir / "rank02.json").write_text('{"traceEvents": [ {"ph": "X", ')  # a broken trace
    proc = run_cli("analyze", str(run_dir), "--jobs", "1", "--format", "json")
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("nsysmoe: note: skipped 2 files that are not traces")
    assert lines[1].startswith("nsysmoe: warning: 1 input(s) could not be analysed")
    assert [f["path"] for f in json.loads(proc.stdout)["failures"]] == [
        str(run_dir / "rank02.json")]  # fmt: skip


def test_cli_skips_sidecars_among_shell_expanded_arguments(run_dir: Path) -> None:
    """``nsysmoe analyze run/*``: the shell names every file; sidecars are skipped the same."""
    names = sorted(str(p) for p in run_dir.iterdir())
    proc = run_cli("analyze", *names, "--jobs", "1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "nsysmoe: note: skipped 2 files that are not traces: rank00.json, rank01.json.gz"]
    assert len(json.loads(proc.stdout)["traces"]) == 2
    sidecars = [n for n in names if ".json" in n] + [str(run_dir / "rank00.json")]
    proc = run_cli("analyze", *sidecars)
    assert proc.returncode == 2
    assert proc.stderr.startswith("nsysmoe: error: no trace file among the arguments; skipped 3")


def test_a_sidecar_named_alone_is_read_and_refused(run_dir: Path) -> None:
    proc = run_cli("analyze", str(run_dir / "rank00.json"))
    assert proc.returncode == 2 and "traceEvents" in proc.stderr
