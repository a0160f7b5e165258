"""What the benchmark installs for itself, never into nsysmoe's venv: the sqlite3 CLI (apt, as
root), nsys-ai in a venv of its own, ``intervaltree`` into a ``pip --target`` folder. Each
returns None plus a one-line reason when it cannot (no PyPI), so the rest of the bench runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PY = sys.executable


def sqlite3_cli() -> tuple[str | None, str]:
    """(path of the sqlite3 command-line tool, note)."""
    found = shutil.which("sqlite3")
    if found:
        return found, ""
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("sqlite3 CLI missing: apt-get install -y sqlite3", file=sys.stderr)
        for step in (["update", "-qq"], ["install", "-y", "-qq", "sqlite3"]):
            subprocess.run(["apt-get", *step], check=False, capture_output=True)
        found = shutil.which("sqlite3")
        if found:
            return found, "installed with apt-get"
    return None, "sqlite3 command-line tool missing (apt-get install sqlite3)"


def pip_target(tools: Path, package: str) -> Path | None:
    """Install ``package`` into tools/pydeps (not into the nsysmoe venv); the dir or None."""
    target = tools / "pydeps"
    if (target / package).exists():
        return target
    r = subprocess.run(
        [
            PY,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(target),
            package,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        print(f"pip install {package} failed: {r.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return target


def nsysai_venv(tools: Path) -> tuple[Path | None, str]:
    """A separate venv with nsys-ai; (its python, note)."""
    tools.mkdir(parents=True, exist_ok=True)
    venv = tools / "nsys-ai-venv"
    py = venv / "bin" / "python"
    check = [str(py), "-c", "import nsys_ai"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return py, ""
    base = getattr(sys, "_base_executable", sys.executable)
    r = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"cannot create a venv for nsys-ai: {r.stderr.strip()[-200:]}"
    print("installing nsys-ai into its own venv (pip install nsys-ai)", file=sys.stderr)
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "nsys-ai"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        return None, f"pip install nsys-ai failed: {r.stderr.strip().splitlines()[-1:]}"
    return py, ""


def version_of(py: Path, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
    return r.stdout.strip() or "?"
