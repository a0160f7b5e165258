"""Running one command as a fresh subprocess and measuring it: wall time, CPU time, peak RSS.

Wall time is ``time.perf_counter`` around the child; CPU time and peak RSS come from
``os.wait4`` (the kernel's accounting of that child and the children it reaped: ``ru_maxrss`` is
the high-water mark of the largest single process). Where a command forks workers, a thread can
also poll the summed VmRSS of the whole process tree. Shared by ``run.py`` and
``kineto_vs_hta.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    seconds: float
    rc: int
    max_rss_bytes: int  # largest single process (wait4 high-water mark)
    tree_rss_bytes: int = 0  # polled sum over the process tree (0 when not polled)
    stdout: str = ""
    stderr: str = ""
    cpu_seconds: float = 0.0  # user + system time of the child and its reaped children


def tree_rss(root: int) -> int:
    """Sum of VmRSS over ``root`` and its descendants (Linux /proc)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def measure(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
    poll_tree: bool = False,
    capture: bool = False,
) -> Run:
    """Run ``cmd`` once in its own session; stdout is kept only with ``capture`` (else
    /dev/null), stderr always (for error messages). A run past ``timeout`` is killed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=out if capture else subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
        )
        peak = [0]
        done = threading.Event()

        def poll() -> None:
            while not done.wait(0.05):
                peak[0] = max(peak[0], tree_rss(proc.pid))

        def kill() -> None:
            os.killpg(proc.pid, signal.SIGKILL)

        if poll_tree:
            threading.Thread(target=poll, daemon=True).start()
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): take the child's group along
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            timer.cancel()
            raise
        seconds = time.perf_counter() - t0
        timer.cancel()
        done.set()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(
            seconds,
            proc.returncode,
            usage.ru_maxrss * 1024,
            peak[0],
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            usage.ru_utime + usage.ru_stime,
        )


def warm(paths: list[Path]) -> None:
    """Read every file once so all commands meet the same (warm) page cache."""
    for path in paths:
        with path.open("rb") as fh:
            while fh.read(1 << 24):
                pass
