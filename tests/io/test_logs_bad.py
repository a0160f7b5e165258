"""Bad inputs to read_log: one line each (path first), never a traceback; inputs unchanged."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nsysmoe.io.logs import read_log
from tests.io.log_errors import one_line

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
NONE_FOUND = "no training iterations found: expected Megatron 'iteration N/ M |' lines"




def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in one_line(tmp_path / "absent.log")


def test_directory(tmp_path: Path) -> None:
    assert "is a directory" in one_line(tmp_path)


@pytest.mark.parametrize("content", [b"", b"\n\n   \n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(content)
    assert "empty" in one_line(path)


def test_binary_garbage(tmp_path: Path) -> None:
    path = tmp_path / "garbage.log"
    path.write_bytes(bytes(range(256)) * 64)
    assert "binary data" in one_line(path)


def test_non_utf8_without_iterations(tmp_path: Path) -> None:
    path = tmp_path / "latin1.log"
    path.write_bytes("données d'entraînement\n".encode("latin-1") * 100)
    assert NONE_FOUND in one_line(path)


def test_text_without_iterations(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    message = one_line(path)
    assert message == (f"{path}: {NONE_FOUND}, a Megatron metrics JSON, torchtitan 'step: N' "
                       "lines or a CSV/JSONL with step and step_time_s")  # fmt: skip


def test_fifo_is_refused_without_opening(tmp_path: Path) -> None:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    assert "named pipe" in one_line(path)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir() if p.is_file()
                                        and p.suffix in {".log", ".csv", ".jsonl"}))  # fmt: skip
def test_inputs_are_unchanged(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    shutil.copy2(DATA / name, path)
    path.chmod(0o444)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    read_log(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
