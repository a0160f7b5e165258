"""Run nsysmoe on one hostile case and hold it to the promises: a known exit code, exactly one
stderr line for a user error, never a traceback or an internal error, no hang, inputs unchanged.

Cases run in-process through ``nsysmoe.cli.main`` (fast: hundreds fit in the suite's budget),
with a SIGALRM deadline; cases that may block inside the OS (FIFOs, sockets, endless files) run
in a subprocess with a timeout instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEADLINE_S = 20  # one case; the slowest legitimate case takes well under a second


class Hang(Exception):
    """The case ran past its deadline."""


@dataclass(frozen=True)
class Case:
    """One hostile input: nsysmoe's arguments, the files it must not change, what may happen
    (``codes``), and where a result is produced, a check of it."""

    name: str
    args: tuple[str, ...]
    inputs: tuple[Path, ...] = ()
    codes: frozenset[int] = frozenset({0, 2})
    env: tuple[tuple[str, str], ...] = ()
    subprocess: bool = False
    expect_error: str | None = None  # a regex the one error line must match
    check: object = field(default=None, compare=False)  # callable(stdout) -> None, for rc 0


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def digests(paths: Iterable[Path]) -> dict[Path, str]:
    out = {}
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file() and not f.is_fifo():
                out[f] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def _alarm(signum: int, frame: object) -> None:
    raise Hang(f"past {DEADLINE_S} s")


def run_inprocess(args: Sequence[str], env: Iterable[tuple[str, str]] = ()) -> Outcome:
    from nsysmoe.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_env = sys.argv, dict(os.environ)
    sys.argv = ["nsysmoe", *args]
    os.environ.update(dict(env))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(DEADLINE_S)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang:
        code = -1
    except BaseException as exc:  # noqa: BLE001 - an escape from main() is the defect we report
        err.write(f"Traceback (escaped main): {type(exc).__name__}: {exc}\n")
        code = -2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return Outcome(code, out.getvalue(), err.getvalue())


def run_subprocess(args: Sequence[str], env: Iterable[tuple[str, str]] = ()) -> Outcome:
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S,
                           stdin=subprocess.DEVNULL, env={**os.environ, **dict(env)})  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome(-1, "", "")
    return Outcome(p.returncode, p.stdout, p.stderr)


def hold(case: Case) -> Outcome:
    """Run ``case`` and assert every promise; returns the outcome for further checks."""
    before = digests(case.inputs)
    got = (run_subprocess if case.subprocess else run_inprocess)(case.args, case.env)
    assert got.code != -1, f"{case.name}: hung (no answer in {DEADLINE_S} s)"
    text = got.out + got.err
    assert "Traceback" not in text, f"{case.name}: traceback\n{got.err[-2000:]}"
    assert got.code != 3, f"{case.name}: internal error: {got.err.strip()}"
    assert got.code in case.codes, f"{case.name}: exit {got.code}, expected {sorted(case.codes)}" \
        f"\n{got.err.strip()}"
    if got.code == 2:
        lines = [ln for ln in got.err.splitlines() if ln.strip()]
        assert len(lines) == 1, f"{case.name}: {len(lines)} stderr lines for a user error:\n" \
            + got.err
        if case.expect_error:
            import re

            assert re.search(case.expect_error, lines[0]), f"{case.name}: {lines[0]}"
    elif got.code == 0 and callable(case.check):
        case.check(got.out)
    assert digests(case.inputs) == before, f"{case.name}: an input file changed"
    return got
