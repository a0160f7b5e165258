"""``.nsys-rep`` input: export to a temporary SQLite with the user's own ``nsys``, under a time
limit (``NSYSMOE_NSYS_TIMEOUT`` seconds, default 600)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from nsysmoe import env
from nsysmoe.errors import NsysmoeError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
NSYS_TIMEOUT_S = 600.0


def nsys_timeout() -> float:
    return env.seconds("NSYSMOE_NSYS_TIMEOUT", NSYS_TIMEOUT_S, upper=1e7, example="1200")


@contextmanager
def export_report(path: Path) -> Iterator[Path]:
    """Yield a temporary SQLite export of ``path``; the report itself is only read."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise NsysmoeError(
            f"{path}: reading a report needs `nsys` on PATH; or export it yourself: "
            f"nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}"
        )
    timeout = nsys_timeout()
    with tempfile.TemporaryDirectory(prefix="nsysmoe-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        # an absolute path: a report named "-x.nsys-rep" is a file to nsys, never an option
        cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
               "--output", str(out), os.path.abspath(path)]  # fmt: skip
        returncode, output = _run(cmd, timeout, path)
        if returncode != 0 or not out.is_file():
            last = output.strip().splitlines()[-1:] or ["no output"]
            raise NsysmoeError(f"{path}: `nsys export` failed: {' '.join(last[0].split())}")
        yield out


def _run(cmd: list[str], timeout: float, path: Path) -> tuple[int, str]:
    """Run ``cmd`` in its own process group (nsys starts helpers) with no stdin: its exit code
    and its stderr (else stdout). Past ``timeout`` the whole group is killed and the user told
    how to go on."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)  # fmt: skip
    except OSError as exc:
        raise NsysmoeError(f"{path}: cannot run `nsys` ({exc.strerror or exc}); check the "
                           "nsys on PATH") from None  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise NsysmoeError(
            f"{path}: `nsys export` did not finish in {timeout:g} s; export it yourself (nsys "
            f"export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}) and pass "
            "the .sqlite, or raise NSYSMOE_NSYS_TIMEOUT"
        ) from None
    except BaseException:  # an interrupt: no nsys left behind
        _kill_group(proc)
        raise
    return proc.returncode, stderr or stdout or ""


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(OSError, subprocess.TimeoutExpired):
        proc.communicate(timeout=5)
