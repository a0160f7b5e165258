"""Time ``nsysmoe analyze`` on exports beside the floor: sqlite3 decoding the same columns.

    python bench/time_analyze.py [FILES...]   (default: the largest shared export)

Each command runs ``--repeat`` times in a fresh process; the table shows the best wall time, so
both columns pay the same start-up and cache state. Compare the ratio, not absolute seconds.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from floor import command as floor_command

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces" / "nsys"


def best_of(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = args.files or [max(SHARED.rglob("*.sqlite"), key=lambda p: p.stat().st_size)]
    sqlite3_cli = shutil.which("sqlite3")
    print(f"{'file':<40} {'MB':>7} {'nsysmoe analyze s':>18} {'sqlite3 read s':>15} {'ratio':>6}")
    for path in files:
        analyze = best_of([sys.executable, "-m", "nsysmoe", "analyze", str(path)], args.repeat)
        floor = None
        if sqlite3_cli:
            floor = best_of(floor_command(sqlite3_cli, path), args.repeat)
        ratio = f"{analyze / floor:6.1f}" if floor else "   n/a"
        floor_text = f"{floor:15.3f}" if floor else f"{'no sqlite3':>15}"
        mb = path.stat().st_size / 1e6
        print(f"{path.name:<40} {mb:7.1f} {analyze:18.3f} {floor_text} {ratio}")


if __name__ == "__main__":
    main()
