"""The trace cache against hostile conditions: an in-place edit that keeps size and mtime, a
damaged entry, a cache folder that is a file or cannot be written, a store that fails, a shared
folder (the umask); the cache never stops an analysis and never changes an input."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import api, fingerprint
from nsysmoe.io import cache
from nsysmoe.model import WHOLE
from nsysmoe.parallel import Executor, map_files
from nsysmoe.renderers import render

EXAMPLE = api.example_paths()[0]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def trace_copy(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "trace.sqlite"
    path.parent.mkdir()
    shutil.copyfile(EXAMPLE, path)
    return path


def numbers(result: object) -> str:
    """The measured GPUs of an analysis as JSON (the path it was read from left out)."""
    return json.dumps([t["gpus"] for t in json.loads(render(result, "json"))["traces"]])


@pytest.fixture(scope="module")
def uncached() -> str:
    return numbers(api.analyze(EXAMPLE, scope=WHOLE))


def _entry(cache_dir: Path) -> Path:
    (entry,) = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    return entry


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env})  # fmt: skip


# --- what the key covers ------------------------------------------------------------------


def _edit_in_place_keeping_stat(path: Path, offset: int, data: bytes) -> None:
    st = path.stat()
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size,
                                                                st.st_mtime_ns)  # fmt: skip


def test_key_sees_a_same_size_in_place_edit_with_the_mtime_restored(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(5 << 20))  # past the old key's first and last MiB
    before = cache.key(path)
    _edit_in_place_keeping_stat(path, (5 << 20) // 2, b"edited")
    assert cache.key(path) != before


def test_key_of_a_large_file_samples_its_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above FULL_HASH_BYTES only the sampled blocks are hashed, as the docstring says."""
    monkeypatch.setattr(fingerprint, "FULL_HASH_BYTES", 1 << 20)
    path = tmp_path / "big.bin"
    size = 16 << 20
    path.write_bytes(os.urandom(size))
    before = cache.key(path)
    last = size - fingerprint.SAMPLE_BYTES
    sampled = last * 17 // (fingerprint.SAMPLES - 1)
    _edit_in_place_keeping_stat(path, sampled + 10, b"seen")
    seen = cache.key(path)
    assert seen != before
    gap = sampled + fingerprint.SAMPLE_BYTES + 10  # between two sampled blocks (each 64 KiB)
    assert gap < last * 18 // (fingerprint.SAMPLES - 1)
    _edit_in_place_keeping_stat(path, gap, b"missed")
    assert cache.key(path) == seen  # documented: not seen


def test_stale_entry_is_not_served_after_an_in_place_edit(trace_copy: Path, tmp_path: Path,
                                                          uncached: str) -> None:  # fmt: skip
    cache_dir = tmp_path / "cache"
    assert numbers(api.analyze(trace_copy, cache_dir=cache_dir, scope=WHOLE)) == uncached
    import sqlite3

    st = trace_copy.stat()
    with sqlite3.connect(trace_copy) as conn:  # same size: pages rewritten in place
        conn.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1000')
    conn.close()
    os.utime(trace_copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert trace_copy.stat().st_size == st.st_size and trace_copy.stat().st_ino == st.st_ino
    fresh = numbers(api.analyze(trace_copy, scope=WHOLE))
    assert fresh != uncached
    assert numbers(api.analyze(trace_copy, cache_dir=cache_dir, scope=WHOLE)) == fresh


# --- damaged entries are rebuilt ------------------------------------------------------------

DAMAGE = {
    "meta-not-json": lambda e: (e / "meta.json").write_text("{not json"),
    "meta-a-list": lambda e: (e / "meta.json").write_text("[]"),
    "meta-wrong-keys": lambda e: (e / "meta.json").write_text('{"path": 1}'),
    "meta-wrong-types": lambda e: (e / "meta.json").write_text(json.dumps(
        {**json.loads((e / "meta.json").read_text()), "warnings": 5})),  # fmt: skip
    "meta-missing": lambda e: (e / "meta.json").unlink(),
    "table-garbage": lambda e: (e / "kernels.arrow").write_bytes(b"\x00garbage" * 10),
    "table-missing": lambda e: (e / "nvtx.arrow").unlink(),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_rebuilt(damage: str, trace_copy: Path, tmp_path: Path,
                                  uncached: str) -> None:  # fmt: skip
    cache_dir = tmp_path / "cache"
    before = sha(trace_copy)
    api.analyze(trace_copy, cache_dir=cache_dir, scope=WHOLE)
    DAMAGE[damage](_entry(cache_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rebuild is silent: no warning, no error
        assert numbers(api.analyze(trace_copy, cache_dir=cache_dir, scope=WHOLE)) == uncached
    entry = _entry(cache_dir)
    assert set(json.loads((entry / "meta.json").read_text())) == set(cache.META)  # rebuilt
    assert cache.load(cache_dir, trace_copy) is not None
    assert sha(trace_copy) == before


# --- a cache that cannot be used is a warning, never an error -----------------------------


@pytest.mark.parametrize("where", ["a-file", "under-a-file"])
def test_cache_dir_unusable_falls_back_with_one_warning(
    where: str, trace_copy: Path, tmp_path: Path, uncached: str
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    cache_dir = blocker if where == "a-file" else blocker / "cache"
    before = sha(trace_copy)
    proc = run_cli("analyze", str(trace_copy), "--cache", "--whole-trace", "--format", "json",
                   env={"NSYSMOE_CACHE_DIR": str(cache_dir)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"nsysmoe: warning: --cache: {cache_dir} ") and "without" in line
    assert json.dumps([t["gpus"] for t in json.loads(proc.stdout)["traces"]]) == uncached
    assert blocker.read_text() == "not a folder" and sha(trace_copy) == before


def _full_disk(self: pl.DataFrame, *args: object, **kwargs: object) -> None:
    raise OSError(28, "No space left on device")


def test_store_failure_is_a_warning_and_the_read_goes_on(trace_copy: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         uncached: str) -> None:  # fmt: skip
    monkeypatch.setattr(pl.DataFrame, "write_ipc", _full_disk)
    cache_dir = tmp_path / "cache"
    with pytest.warns(cache.CacheWarning, match="No space left on device"):
        result = api.analyze(trace_copy, cache_dir=cache_dir, scope=WHOLE)
    assert numbers(result) == uncached
    assert not list(cache_dir.iterdir())  # no half-written entry, no temporary folder left


def test_store_failure_reaches_the_cli_user_as_one_line(
    trace_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from nsysmoe.cli import main

    monkeypatch.setattr(pl.DataFrame, "write_ipc", _full_disk)
    monkeypatch.setenv("NSYSMOE_CACHE_DIR", str(tmp_path / "cache"))
    other = trace_copy.with_name("other.sqlite")
    shutil.copyfile(api.example_paths()[1], other)
    for args in ([str(trace_copy)], [str(trace_copy), str(other), str(trace_copy), "--jobs", "1"]):
        monkeypatch.setattr(sys, "argv", ["nsysmoe", "analyze", *args, "--cache"])
        try:
            main()
        except SystemExit as exited:
            assert exited.code in (0, None)
        out, err = capsys.readouterr()
        (line,) = err.strip().splitlines()
        assert line.startswith("nsysmoe: warning: --cache: ") and "No space left" in line, err
        assert "GPU" in out or "rank" in out


def warn_like_a_failed_store(path: str) -> str:
    """Module level, for worker processes: what api.load does when the cache is full."""
    warnings.warn(f"--cache: could not store {path}", cache.CacheWarning, stacklevel=1)
    return path


def test_cache_warnings_travel_back_from_worker_processes() -> None:
    with pytest.warns(cache.CacheWarning) as caught:
        assert map_files(warn_like_a_failed_store, ["a", "b", "c"], Executor(jobs=2), "x") == [
            "a", "b", "c"]  # fmt: skip
    messages = sorted(str(w.message) for w in caught if w.category is cache.CacheWarning)
    assert messages == [f"--cache: could not store {p}" for p in "abc"]


# --- a shared cache folder stays shared ----------------------------------------------------


@pytest.fixture
def umask_002() -> Iterator[None]:
    old = os.umask(0o002)
    yield
    os.umask(old)


def test_entries_honour_the_umask(trace_copy: Path, tmp_path: Path, umask_002: None) -> None:
    cache_dir = tmp_path / "shared"
    api.load(trace_copy, cache_dir=cache_dir)
    entry = _entry(cache_dir)
    assert entry.stat().st_mode & 0o777 == 0o775  # tempfile.mkdtemp made it 0700
    assert {p.stat().st_mode & 0o777 for p in entry.iterdir()} == {0o664}


def test_cache_never_writes_next_to_the_input(trace_copy: Path, tmp_path: Path) -> None:
    before = sha(trace_copy)
    api.load(trace_copy, cache_dir=tmp_path / "cache")
    api.load(trace_copy, cache_dir=tmp_path / "cache")
    assert sha(trace_copy) == before and [p.name for p in trace_copy.parent.iterdir()] == [
        trace_copy.name]  # fmt: skip
