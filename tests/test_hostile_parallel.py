"""Many files against hostile inputs: every per-file failure is that file's Failure — a Rust
panic in polars (a BaseException), a worker process that dies — under worker processes and
under Dask; a many-file run with one file of each bad kind reports each on one line and analyses
the rest; a Dask address that never answers fails after a timeout with one line."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.model import STEADY
from nsysmoe.parallel import Executor, check_dask_address, expand, map_files
from nsysmoe.results import Failure
from tests.io.test_bad_input import _no_kernels, _not_nsys

GOOD = api.example_paths()  # two ranks: overlap off, overlap on


def work(path: str) -> str:
    """A per-file function that panics like polars on one path and kills its worker on another."""
    if path == "panic":
        raise pl.exceptions.PanicException("index out of bounds")
    if path == "die":
        os._exit(3)
    return path.upper()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """In-process code that must not hang: SIGALRM fails the test after ``seconds``."""

    def fail(signum: int, frame: object) -> None:
        raise AssertionError(f"hung for {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_panic_exception_is_a_base_exception() -> None:
    """Why ``except Exception`` was not enough."""
    assert issubclass(pl.exceptions.PanicException, BaseException)
    assert not issubclass(pl.exceptions.PanicException, Exception)


def test_panic_and_dead_worker_are_that_files_failure_with_jobs() -> None:
    items = ["a", "panic", "b", "die", "c"]
    with deadline(120):
        out = map_files(work, items, Executor(jobs=2), "x")
    assert out[0::2] == ["A", "B", "C"]
    panic, died = out[1], out[3]
    assert isinstance(panic, Failure) and panic.path == "panic"
    assert "polars panicked: index out of bounds" in panic.error and "\n" not in panic.error
    assert isinstance(died, Failure) and died.path == "die" and "worker process" in died.error


def test_panic_is_that_files_failure_in_process() -> None:
    out = map_files(work, ["a", "panic"], Executor(jobs=1), "x")
    assert out[0] == "A" and isinstance(out[1], Failure)


def test_panic_is_that_files_failure_with_dask_local() -> None:
    pytest.importorskip("dask.distributed")
    with deadline(120):
        out = map_files(work, ["a", "panic", "b"], Executor(dask="local"), "x")
    assert out[0] == "A" and out[2] == "B"
    assert isinstance(out[1], Failure) and "polars panicked" in out[1].error


# --- one file of each bad kind among good ranks --------------------------------------------


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[Path]]:
    d = tmp_path_factory.mktemp("mixed")
    good = [d / "rank0.sqlite", d / "rank1.sqlite"]
    for src, dst in zip(GOOD, good, strict=True):
        shutil.copyfile(src, dst)
    bad = [d / "empty.sqlite", d / "text.sqlite", d / "truncated.sqlite", d / "other.sqlite",
           d / "nvtx_only.sqlite", d / "bad.json", d / "corrupt.json.gz"]  # fmt: skip
    bad[0].write_bytes(b"")
    bad[1].write_text("this is a CSV, not an export\n1,2,3\n")
    bad[2].write_bytes(GOOD[0].read_bytes()[:20000])
    _not_nsys(d)
    _no_kernels(d)
    bad[5].write_text('{"traceEvents": [ {"ph": "X", ')
    blob = gzip.compress(b'{"traceEvents": []}' * 200)
    bad[6].write_bytes(blob[:30] + b"\x00" * 20 + blob[50:])
    assert sorted(expand(str(d))) == sorted(map(str, good + bad))
    return d, good, bad


def run_cli(*args: str, env: dict[str, str] | None = None,
            timeout: int = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})  # fmt: skip


def _one_warning(proc: subprocess.CompletedProcess[str], bad: list[Path]) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    (warning,) = proc.stderr.strip().splitlines()  # one line: the count and the first
    assert warning.startswith(f"nsysmoe: warning: {len(bad)} input(s) could not be analysed")


def test_one_bad_file_of_each_kind_with_jobs(mixed_dir) -> None:  # noqa: ANN001
    d, good, bad = mixed_dir
    before = {p: sha(p) for p in good + bad}
    proc = run_cli("analyze", str(d), "--jobs", "2", "--format", "json")
    _one_warning(proc, bad)
    doc = json.loads(proc.stdout)
    assert sorted(f["path"] for f in doc["failures"]) == sorted(map(str, bad))
    assert all("\n" not in f["error"] and f["error"] for f in doc["failures"])
    assert [t["path"] for t in doc["traces"]] == list(map(str, good))
    for trace, path in zip(doc["traces"], good, strict=True):  # the good ranks, right
        want = api.analyze(path, scope=STEADY).gpus  # the CLI's default scope
        assert [g["comm_ns"] for g in trace["gpus"]] == want["comm_ns"].to_list()
        assert [g["hidden_ns"] for g in trace["gpus"]] == want["hidden_ns"].to_list()
    assert {p: sha(p) for p in good + bad} == before
    assert sorted(p.name for p in d.iterdir()) == sorted(p.name for p in good + bad)


def test_one_bad_file_of_each_kind_with_dask_local(mixed_dir) -> None:  # noqa: ANN001
    pytest.importorskip("dask.distributed")
    d, good, bad = mixed_dir
    before = {p: sha(p) for p in good + bad}
    proc = run_cli("analyze", str(d), "--dask", "local", env={"COLUMNS": "1000"})  # whole lines
    _one_warning(proc, bad)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("2 ranks, ")  # the headline, then the run's line
    assert any(ln.startswith("2 traces, 2 ranks") for ln in lines)
    assert sum(ln.startswith(("rank0.sqlite:", "rank1.sqlite:")) for ln in lines) >= 2
    failed = sorted(ln.removeprefix("FAILED ").split(": ")[0] for ln in lines
                    if ln.startswith("FAILED "))  # fmt: skip
    assert failed == sorted(map(str, bad))  # one line per bad file
    assert {p: sha(p) for p in good + bad} == before


# --- Dask addresses -----------------------------------------------------------------------


@pytest.mark.parametrize("address", ["", "::::", "tcp://", "tcp://host:notaport", "http://x:80",
                                     "tcp://h:99999", "local:", "h:0"])  # fmt: skip
def test_malformed_dask_address_is_a_usage_error(address: str) -> None:
    with pytest.raises(UsageError, match="not a scheduler address"):
        check_dask_address(address)
    with pytest.raises(UsageError):
        map_files(work, ["a", "b"], Executor(dask=address), "x")


@pytest.mark.parametrize("address", ["local", "10.0.0.5:8786", "tcp://h:1", "tls://[::1]:8786",
                                     "ws://sched.example:80"])  # fmt: skip
def test_well_formed_dask_address(address: str) -> None:
    assert check_dask_address(address) == address


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


@pytest.fixture
def http_port() -> Iterator[int]:
    """A loopback port that answers anything with an HTTP response, as a web server would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn = server.accept()[0]
                with conn:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the with-block ends: nobody listens


def test_dask_silent_port_times_out_with_one_line(silent_port: int, tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    paths = [str(p) for p in GOOD] + [str(GOOD[0])]
    before = [sha(Path(p)) for p in paths]
    address = f"tcp://127.0.0.1:{silent_port}"
    proc = run_cli("analyze", *paths, "--dask", address, env={"NSYSMOE_DASK_TIMEOUT": "2"},
                   timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"nsysmoe: error: --dask {address}: no Dask scheduler answered "
                           "within 2 s")  # fmt: skip
    assert [sha(Path(p)) for p in paths] == before


def test_dask_closed_port_and_http_server_fail_fast(
    http_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dask.distributed")
    monkeypatch.setenv("NSYSMOE_DASK_TIMEOUT", "2")
    with deadline(30), pytest.raises(NsysmoeError, match=r"within 2 s") as closed:
        map_files(work, ["a", "b"], Executor(dask=f"127.0.0.1:{_closed_port()}"), "x")
    assert "\n" not in str(closed.value)
    with deadline(30), pytest.raises(NsysmoeError, match=r"not a Dask scheduler"):
        map_files(work, ["a", "b"], Executor(dask=f"tcp://127.0.0.1:{http_port}"), "x")


def test_bad_dask_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSYSMOE_DASK_TIMEOUT", "soon")
    pytest.importorskip("dask.distributed")
    with pytest.raises(NsysmoeError, match="NSYSMOE_DASK_TIMEOUT='soon'"):
        map_files(work, ["a", "b"], Executor(dask="127.0.0.1:1"), "x")


# --- expand ---------------------------------------------------------------------------------


def test_literal_name_with_glob_characters_is_a_file(tmp_path: Path) -> None:
    literal = tmp_path / "x[1].sqlite"
    shutil.copyfile(GOOD[0], literal)
    shutil.copyfile(GOOD[1], tmp_path / "x1.sqlite")  # what the pattern x[1].sqlite matches
    assert expand(str(literal)) == [str(literal)]
    assert expand(str(tmp_path / "x[0-9].sqlite")) == [str(tmp_path / "x1.sqlite")]


def test_unlistable_folder_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(self: Path) -> Iterator[Path]:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied)
    with pytest.raises(NsysmoeError, match="Permission denied"):
        expand(str(tmp_path))


def test_dask_local_beside_a_busy_dashboard_port_says_nothing_of_it(mixed_dir) -> None:  # noqa: ANN001
    """Two runs at once (or anything else on Dask's default dashboard port 8787): no "port in
    use" warning among the one-line report of the bad files."""
    pytest.importorskip("dask.distributed")
    d, _, bad = mixed_dir
    with socket.socket() as busy:
        try:
            busy.bind(("", 8787))
            busy.listen()
        except OSError:
            pass  # already taken: the same condition
        proc = run_cli("analyze", str(d), "--dask", "local", env={"COLUMNS": "1000"})
    _one_warning(proc, bad)
