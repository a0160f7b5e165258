"""Prove a reader change changes no table: every field of ``load_trace`` (all frames with
``frame.equals`` and their schemas, warnings, dropped, not_captured, ...) from this checkout
against the ``nsysmoe`` of an older commit, on the given traces.

    python dev/reader_equal.py REV TRACE...   (e.g. 7b9e7c8 moe-off.sqlite shared/traces/*/*.sqlite)

Each side reads in its own process (the old package is unpacked with ``git archive``) and
writes a pickle of the Trace fields; exits 1 and names each difference.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DUMP = """
import dataclasses, pickle, sys
from nsysmoe.io import load_trace
out = {}
for p in sys.argv[2:]:
    t = load_trace(p)
    out[p] = {f.name: getattr(t, f.name) for f in dataclasses.fields(t)}
pickle.dump(out, open(sys.argv[1], "wb"))
"""


def dump(package_root: Path, out: Path, traces: list[str]) -> dict:
    script = out.with_suffix(".py")
    script.write_text(DUMP)
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    subprocess.run([sys.executable, str(script), str(out), *traces], check=True, env=env,
                   cwd=package_root)  # fmt: skip
    with out.open("rb") as fh:
        return pickle.load(fh)


def main(rev: str, traces: list[str]) -> int:
    import polars as pl

    traces = [str(Path(t).resolve()) for t in traces]
    with tempfile.TemporaryDirectory() as tmp:
        old_root = Path(tmp) / "old"
        old_root.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "nsysmoe"],
                                 check=True, capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(old_root)], input=archive, check=True)
        old = dump(old_root, Path(tmp) / "old.pkl", traces)
        new = dump(REPO, Path(tmp) / "new.pkl", traces)
    bad = 0
    for path, fields in old.items():
        for name, a in fields.items():
            b = new[path][name]
            same = a.schema == b.schema and a.equals(b) if isinstance(a, pl.DataFrame) else a == b
            if not same:
                bad += 1
                print(f"DIFFERENT: {path}: {name}")
    print(f"{len(old)} traces, {bad} differences (against {rev})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
