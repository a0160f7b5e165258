"""What the critical path does where it cannot run as usual: numba with no disk cache it can
write, and a --what-if on a trace with no path to replay (review round 2 of issue 34)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from nsysmoe.api import analyze, example_paths
from nsysmoe.model import STEADY
from tests.conftest import require_shared


def test_no_writable_numba_cache_still_analyzes(tmp_path) -> None:
    # a read-only install with no writable user cache: numba cannot cache; the passes compile
    # in the process instead (before: 'internal error: RuntimeError: cannot cache function',
    # exit 3, and a traceback from the warm-up thread)
    env = dict(os.environ, NUMBA_CACHE_DIR="/proc/nope",
               NUMBA_CACHE_LOCATOR_CLASSES="numba.core.caching.UserProvidedCacheLocator")
    off = str(example_paths()[0])
    done = subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", off], env=env,
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Step bound by:" in done.stdout
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr


def test_what_if_without_a_path_says_why() -> None:
    # a trace without iterations has no path: the replay asked for is not dropped silently
    path = require_shared() / "nsys" / "nvfuser-h100-schema3.16.sqlite"
    a = analyze(path, scope=replace(STEADY, what_if=("gemm*0.5",)))
    assert a.critical_path is None
    said = [w for w in a.warnings if w.startswith("--what-if gemm*0.5: not replayed")]
    assert said == ["--what-if gemm*0.5: not replayed: the trace has no iterations to walk"]
