"""``.nsys-rep`` input: export to a temporary SQLite with the user's own ``nsys``."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nsysmoe.errors import NsysmoeError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


@contextmanager
def export_report(path: Path) -> Iterator[Path]:
    """Yield a temporary SQLite export of ``path``; the report itself is only read."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise NsysmoeError(
            f"{path}: reading a report needs `nsys` on PATH; or export it yourself: "
            f"nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}"
        )
    with tempfile.TemporaryDirectory(prefix="nsysmoe-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        cmd = [
            nsys,
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
            str(out),
            str(path),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise NsysmoeError(f"{path}: `nsys export` failed: {last[0]}")
        yield out
