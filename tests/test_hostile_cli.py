"""The command line against hostile arguments: every user error is one stderr line and exit 2
(usage errors too), never a traceback or a hang; no input is ever overwritten (``-o`` that is an
input by any path); outputs are written whole; FIFOs, devices and sockets are refused before
they are opened; ``nsys export`` runs under a time limit; a bad file in ``--compat`` is one line
and the rest is measured; a library's panic is one internal-error line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.errors import NsysmoeError
from nsysmoe.io import load_trace
from nsysmoe.model import STEADY, WHOLE

OFF, ON = api.example_paths()
MP, Cap = pytest.MonkeyPatch, pytest.CaptureFixture[str]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: int = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The real entry point in a subprocess: real exit codes; a hang fails after ``timeout``."""
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})  # fmt: skip


def run_main(monkeypatch: MP, capsys: Cap,
             *args: str) -> tuple[int, str, str]:  # fmt: skip
    """``main()`` in this process (fast), as the user's shell would run it."""
    from nsysmoe.cli import main

    monkeypatch.setattr(sys, "argv", ["nsysmoe", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str, *needles: str) -> str:
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("nsysmoe: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "trace.sqlite"
    path.parent.mkdir()
    shutil.copyfile(OFF, path)
    return path


def gpus(report_json: str) -> list:
    return [t["gpus"] for t in json.loads(report_json)["traces"]]


@pytest.fixture(scope="module")
def off_gpus() -> list:
    from nsysmoe.renderers import render

    return gpus(render(api.analyze(OFF, scope=STEADY), "json"))  # the CLI default


@pytest.fixture(scope="module")
def whole_gpus() -> list:
    from nsysmoe.renderers import render

    return gpus(render(api.analyze(OFF, scope=WHOLE), "json"))


# --- -o is never an input; outputs are written whole ------------------------------------


def _aliases(trace: Path, tmp_path: Path) -> dict[str, Path]:
    link = tmp_path / "link.sqlite"
    link.symlink_to(trace)
    hard = tmp_path / "hard.sqlite"
    os.link(trace, hard)
    return {"same": trace, "dotdot": trace.parent / ".." / trace.parent.name / trace.name,
            "symlink": link, "hardlink": hard}  # fmt: skip


@pytest.mark.parametrize("alias", ["same", "dotdot", "symlink", "hardlink"])
def test_output_that_is_an_input_is_refused(alias: str, trace: Path, tmp_path: Path,
                                            monkeypatch: MP,
                                            capsys: Cap) -> None:  # fmt: skip
    before = sha(trace)
    out = _aliases(trace, tmp_path)[alias]
    code, stdout, err = run_main(monkeypatch, capsys, "analyze", str(trace), "-o", str(out))
    assert code == 2 and not stdout
    one_error(err, "is the input", "inputs are never overwritten")
    assert sha(trace) == before


def test_output_that_is_a_file_of_an_input_folder_or_the_rules_is_refused(
    trace: Path, tmp_path: Path, monkeypatch: MP,
    capsys: Cap,
) -> None:  # fmt: skip
    second = trace.with_name("rank1.sqlite")
    shutil.copyfile(ON, second)
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nclass = "comm"\nsubclass = "x"\npattern = "nccl"\n')
    before = {p: sha(p) for p in (trace, second, rules)}
    for args in ([str(trace.parent), "-o", str(second)],  # a rank inside a folder argument
                 [str(trace.parent / "*.sqlite"), "-o", str(trace)],  # a glob's match
                 [str(OFF), str(ON), "--compat", "hta", "-o", str(ON)],
                 [str(trace), "--rules", str(rules), "-o", str(rules)]):  # fmt: skip
        code, _, err = run_main(monkeypatch, capsys, "analyze", *args)
        assert code == 2, err
        one_error(err, "is the input")
    assert {p: sha(p) for p in before} == before


def test_plot_folder_holding_an_input_figure_name_is_refused(
    tmp_path: Path, monkeypatch: MP, capsys: Cap
) -> None:
    figs = tmp_path / "figs"
    figs.mkdir()
    odd = figs / "breakdown.png"  # an export someone named like a figure
    shutil.copyfile(OFF, odd)
    before = sha(odd)
    code, _, err = run_main(monkeypatch, capsys, "analyze", str(odd), str(ON), "--plot",
                            str(figs))  # fmt: skip
    assert code == 2
    one_error(err, "--plot", "holds the input")
    assert sha(odd) == before


def test_output_is_written_whole_keeping_its_mode(trace: Path, tmp_path: Path, off_gpus: list,
                                                  monkeypatch: MP,
                                                  capsys: Cap) -> None:  # fmt: skip
    out = tmp_path / "report.json"
    out.write_text("old report")
    out.chmod(0o640)
    code, _, err = run_main(monkeypatch, capsys, "analyze", str(trace), "--format", "json",
                            "-o", str(out))  # fmt: skip
    assert code == 0 and err.strip() == f"wrote {out}"
    assert gpus(out.read_text()) == off_gpus
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "report.json"]  # no temp left


def test_output_through_a_link_replaces_the_file_it_names(trace: Path, tmp_path: Path,
                                                          monkeypatch: MP,
                                                          capsys: Cap) -> None:  # fmt: skip
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "latest.md"
    link.symlink_to(real)
    code, _, _ = run_main(monkeypatch, capsys, "analyze", str(trace), "--format", "markdown",
                          "-o", str(link))  # fmt: skip
    assert code == 0 and link.is_symlink() and real.read_text().startswith("#")


def test_output_to_a_full_device_is_one_line_and_the_device_stays(trace: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    proc = run_cli("analyze", str(trace), "-o", "/dev/full")
    assert proc.returncode == 2
    one_error(proc.stderr, "-o /dev/full", "No space left")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written to, never replaced by a file


@pytest.mark.parametrize("case", ["missing-folder", "under-a-file", "plot-under-a-file"])
def test_unwritable_output_is_one_line_before_any_work(case: str, trace: Path, tmp_path: Path,
                                                       monkeypatch: MP,
                                                       capsys: Cap) -> None:  # fmt: skip
    blocker = tmp_path / "blocker.txt"
    blocker.write_text("a file")
    opt, target, needle = {
        "missing-folder": ("-o", tmp_path / "no" / "such" / "r.txt", "does not exist"),
        "under-a-file": ("-o", blocker / "r.txt", "is a file, not a folder"),
        "plot-under-a-file": ("--plot", blocker / "figs", "is a file, not a folder"),
    }[case]
    calls: list[object] = []
    monkeypatch.setattr(api, "analyze", lambda *a, **k: calls.append(a))
    code, stdout, err = run_main(monkeypatch, capsys, "analyze", str(trace), opt, str(target))
    assert code == 2 and not stdout and not calls  # refused before reading anything
    one_error(err, opt, needle)
    assert blocker.read_text() == "a file"


def test_figures_that_cannot_be_written_are_one_line(trace: Path, tmp_path: Path,
                                                     monkeypatch: MP,
                                                     capsys: Cap) -> None:  # fmt: skip
    def denied(result: object, outdir: object) -> list[Path]:
        raise PermissionError(13, "Permission denied", str(outdir))

    monkeypatch.setattr(api, "plot", denied)
    code, _, err = run_main(monkeypatch, capsys, "analyze", str(trace), "--plot",
                            str(tmp_path / "figs"))  # fmt: skip
    assert code == 2
    one_error(err, "--plot", "Permission denied")


# --- inputs that are not regular files, unreadable files ---------------------------------


def _fifo(tmp: Path) -> Path:
    path = tmp / "rank.sqlite"
    os.mkfifo(path)
    return path


def _socket(tmp: Path) -> Path:
    path = tmp / "s.sqlite"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return path  # the socket file stays while the process lives


NOT_FILES = {"fifo": (_fifo, "named pipe"), "socket": (_socket, "a socket"),
             "dev-zero": (lambda tmp: Path("/dev/zero"), "character device")}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(NOT_FILES))
def test_input_that_is_not_a_regular_file_is_refused_unopened(kind: str, tmp_path: Path) -> None:
    make, needle = NOT_FILES[kind]
    path = make(tmp_path)
    start = time.monotonic()
    proc = run_cli("analyze", str(path), timeout=60)
    assert proc.returncode == 2 and time.monotonic() - start < 30
    one_error(proc.stderr, str(path), needle)


def test_fifo_among_ranks_is_that_ranks_failure(tmp_path: Path) -> None:
    shutil.copyfile(OFF, tmp_path / "rank0.sqlite")
    shutil.copyfile(ON, tmp_path / "rank1.sqlite")
    fifo = _fifo(tmp_path)
    proc = run_cli("analyze", str(tmp_path), "--jobs", "1", "--format", "json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [f["path"] for f in doc["failures"]] == [str(fifo)] and len(doc["traces"]) == 2


def test_unreadable_file_is_one_line(trace: Path, monkeypatch: MP) -> None:
    real_open = Path.open

    def denied(self: Path, *args: object, **kwargs: object):  # noqa: ANN202
        if self == trace:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(NsysmoeError, match="cannot read it \\(Permission denied\\)"):
        load_trace(trace)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_really(trace: Path) -> None:
    trace.chmod(0)
    proc = run_cli("analyze", str(trace))
    assert proc.returncode == 2
    one_error(proc.stderr, str(trace))


# --- --rules that is not a rule file ---------------------------------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder", "huge", "missing"])
def test_rules_that_are_not_a_rule_file_are_refused_unread(kind: str, tmp_path: Path) -> None:
    rules = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "r.toml",
             "folder": tmp_path, "huge": tmp_path / "huge.toml",
             "missing": tmp_path / "missing.toml"}[kind]  # fmt: skip
    if kind == "fifo":
        os.mkfifo(rules)
    if kind == "huge":
        rules.write_bytes(b"# " + b"x" * (3 << 20) + b"\n")
    for command in ("analyze", "kernels"):
        proc = run_cli(command, str(OFF), "--rules", str(rules), timeout=60)
        assert proc.returncode == 2, proc.stderr
        one_error(proc.stderr, str(rules))


# --- out-of-range values and usage errors: one line -----------------------------------------

USAGE = [
    ("kernels", str(OFF), "--top", "-1"),
    ("analyze", str(OFF), "--window", "0:99999999999999999999s"),
    ("analyze", str(OFF), "--window", "0:" + "9" * 400),
    ("analyze", str(OFF), "--window", "1-" + "9" * 5000),
    ("analyze", str(OFF), "--window", "1-99999999999999999999"),
    ("analyze", str(OFF), "--format", "xml"),
    ("analyze", str(OFF), "--jobs", "0"),
    ("analyze", str(OFF), "--frobnicate"),
    ("analyze",),
    ("analyze", str(OFF), str(ON), str(OFF), "--dask", "tcp://host:notaport"),
    ("analyze", str(OFF), "--dask", "http://[::1"),
    ("analyze", str(OFF), "--rules-replace"),
]


@pytest.mark.parametrize("args", USAGE, ids=[" ".join(a[2:])[:40] or a[0] for a in USAGE])
def test_usage_errors_are_one_line(args: tuple[str, ...], monkeypatch: MP,
                                   capsys: Cap) -> None:  # fmt: skip
    before = sha(OFF)
    code, stdout, err = run_main(monkeypatch, capsys, *args)
    assert code == 2 and not stdout
    line = one_error(err)
    assert "internal error" not in line
    assert sha(OFF) == before


def test_top_beyond_the_table_shows_every_row(monkeypatch: MP,
                                              capsys: Cap) -> None:  # fmt: skip
    code, out, err = run_main(monkeypatch, capsys, "kernels", str(OFF), "--top",
                              "999999999999999999999", "--format", "csv")  # fmt: skip
    assert code == 0, err
    assert len(out.strip().splitlines()) - 1 == api.kernel_summary(OFF).height


def test_window_at_the_int64_edge_is_accepted(monkeypatch: MP,
                                              capsys: Cap,
                                              whole_gpus: list) -> None:  # fmt: skip
    code, out, err = run_main(monkeypatch, capsys, "analyze", str(OFF), "--window",
                              f"0:{2**63 - 1}", "--format", "json")  # fmt: skip
    assert code == 0, err
    assert gpus(out) == whole_gpus


# --- a library's panic; --compat with a bad file ----------------------------------------


def test_a_panic_in_one_trace_is_one_internal_error_line(monkeypatch: MP,
                                                         capsys: Cap) -> None:  # fmt: skip
    def panic(*args: object, **kwargs: object) -> None:
        raise pl.exceptions.PanicException("called `Option::unwrap()` on a `None` value\nat x.rs")

    monkeypatch.setattr(api, "analyze", panic)
    monkeypatch.delenv("NSYSMOE_DEBUG", raising=False)
    code, _, err = run_main(monkeypatch, capsys, "analyze", str(OFF))
    assert code == 3 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("nsysmoe: internal error: PanicException: called `Option::unwrap()`")


def test_compat_with_a_bad_file_says_it_on_one_line_and_measures_the_rest(
    tmp_path: Path, monkeypatch: MP, capsys: Cap
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    code, out, err = run_main(monkeypatch, capsys, "analyze", str(OFF), str(bad), str(empty),
                              "--compat", "hta", "--format", "json")  # fmt: skip
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err
    assert lines[0].startswith(f"nsysmoe: warning: left out of --compat hta: {bad}: ")
    assert lines[1].startswith(f"nsysmoe: warning: left out of --compat hta: {empty}: ")
    doc = json.loads(out)
    assert [t["path"] for t in doc["traces"]] == [str(OFF)]
    want = api.compat([str(OFF)]).to_dict()["traces"]
    assert json.loads(json.dumps(want)) == doc["traces"]
    code, _, err = run_main(monkeypatch, capsys, "analyze", str(bad), str(empty), "--compat",
                            "hta")  # fmt: skip
    assert code == 2
    one_error(err, "no file could be read for --compat", str(bad))


# --- nsys export: a time limit, never an option --------------------------------------------


def _fake_nsys(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nsys = bin_dir / "nsys"
    nsys.write_text("#!/bin/sh\n" + body)
    nsys.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_nsys_export_that_never_ends_is_killed_after_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "helper.pid"
    env = _fake_nsys(tmp_path, f"sleep 120 &\necho $! > {pidfile}\nwait\n")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    start = time.monotonic()
    proc = run_cli("analyze", str(rep), env={**env, "NSYSMOE_NSYS_TIMEOUT": "1"}, timeout=60)
    assert proc.returncode == 2 and time.monotonic() - start < 30
    one_error(proc.stderr, str(rep), "did not finish in 1 s", "NSYSMOE_NSYS_TIMEOUT")
    helper = Path(f"/proc/{pidfile.read_text().strip()}/status")
    deadline = time.monotonic() + 10
    while helper.exists() and "zombie" not in helper.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not helper.exists() or "zombie" in helper.read_text()  # nsys's helpers killed too
    assert rep.read_bytes() == b"\x00" * 64


def test_report_named_like_an_option_reaches_nsys_as_a_path(tmp_path: Path,
                                                            off_gpus: list) -> None:  # fmt: skip
    argv = tmp_path / "argv.txt"
    env = _fake_nsys(tmp_path, f'printf "%s\\n" "$@" > {argv}\n'
                     'while [ $# -gt 1 ]; do [ "$1" = --output ] && out="$2"; shift; done\n'
                     f'cp "{OFF}" "$out"\n')  # fmt: skip
    rep = tmp_path / "-x.nsys-rep"
    rep.write_bytes(b"report bytes")
    proc = run_cli("analyze", "--format", "json", "--", rep.name, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert argv.read_text().splitlines()[-1] == str(rep)  # absolute: never an option to nsys
    assert gpus(proc.stdout) == off_gpus
    assert json.loads(proc.stdout)["traces"][0]["path"] == rep.name  # not the temporary export
    assert rep.read_bytes() == b"report bytes"


def test_bad_nsys_timeout_setting_is_one_line(tmp_path: Path) -> None:
    env = _fake_nsys(tmp_path, "exit 1\n")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    proc = run_cli("analyze", str(rep), env={**env, "NSYSMOE_NSYS_TIMEOUT": "-5"})
    assert proc.returncode == 2
    one_error(proc.stderr, "NSYSMOE_NSYS_TIMEOUT='-5'")
