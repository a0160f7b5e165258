"""Golden outputs: every figure nsysmoe prints for every shared trace and bench export, written
once per checkout so a speed change can be shown to change no number (issue 35).

    python bench/golden.py write DIR            # JSON + Markdown of each input into DIR
    python bench/golden.py compare DIR_A DIR_B  # every file byte-identical, or what differs

The inputs: each ``*.sqlite`` under ``shared/traces/nsys`` (a folder of rank files as one
input), each Kineto folder, A/B pairs the shared docs compare, and the bench's generated
exports where ``bench/.work/full`` holds them (OFF, ON, LIGHT, their A/B, the 8-GPU export).
Each runs as ``python -m nsysmoe analyze … --format json|markdown`` in a fresh process (the
checkout ``python -m nsysmoe`` imports: from a worktree, set ``PYTHONPATH``). Generated
timestamps are the only lines that may differ; they are blanked before comparing.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared" / "traces"
WORK = BENCH / ".work" / "full"
#: output fields that hold the time of the run, not a figure of the trace
VOLATILE = re.compile(r'("generated(_at)?"\s*:\s*)"[^"]*"|(generated (at|on) )\S+ \S+')


def inputs() -> dict[str, list[str]]:
    """name -> analyze arguments."""
    out: dict[str, list[str]] = {}
    nsys = SHARED / "nsys"
    for path in sorted(nsys.glob("*.sqlite")):
        out[path.stem] = [str(path)]
    for folder in sorted(p for p in nsys.iterdir() if p.is_dir()):
        out[folder.name] = [str(folder)]
    for folder in sorted(p for p in (SHARED / "kineto").iterdir() if p.is_dir()):
        out[f"kineto-{folder.name}"] = [str(folder)]
    pairs = {
        "ab-nersc": ("nersc-ddp-4gpu-baseline.sqlite", "nersc-ddp-4gpu-bucketcap100mb.sqlite"),
        "ab-nsysai": ("nsysai-2gpu-before.sqlite", "nsysai-2gpu-after.sqlite"),
    }
    for name, (a, b) in pairs.items():
        if (nsys / a).exists() and (nsys / b).exists():
            out[name] = [str(nsys / a), str(nsys / b)]
    bench = {
        "bench-off": ["moe-off.sqlite"],
        "bench-on": ["moe-on.sqlite"],
        "bench-light": ["moe-light.sqlite"],
        "bench-ab": ["moe-off.sqlite", "moe-on.sqlite"],
        "bench-8gpu": ["gpus/moe-8gpu.sqlite"],
    }
    for name, files in bench.items():
        if all((WORK / f).exists() for f in files):
            out[name] = [str(WORK / f) for f in files]
    return out


def write(target: Path, jobs: int, only: str | None = None) -> None:
    target.mkdir(parents=True, exist_ok=True)
    runs = [(name, args, fmt) for name, args in inputs().items() for fmt in ("json", "markdown")
            if only is None or re.search(only, name)]  # fmt: skip

    def one(run: tuple[str, list[str], str]) -> str:
        name, args, fmt = run
        out = target / f"{name}.{'json' if fmt == 'json' else 'md'}"
        cmd = [sys.executable, "-m", "nsysmoe", "analyze", *args, "--format", fmt, "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        err = done.stderr.replace(str(target), "DIR")  # the same run into another folder: same text
        (target / f"{name}.{fmt}.stderr").write_text(f"exit {done.returncode}\n{err}")
        return f"{name} {fmt}: exit {done.returncode}"

    with ThreadPoolExecutor(jobs) as pool:
        for line in pool.map(one, runs):
            print(line, flush=True)


def compare(a: Path, b: Path) -> int:
    """Files of ``b`` against the same names in ``a`` (``a`` may hold more: a partial run)."""
    names = sorted(p.name for p in b.iterdir())
    differ = 0
    for name in names:
        left, right = a / name, b / name
        if not left.exists() or not right.exists():
            print(f"{name}: only in {a if left.exists() else b}")
            differ += 1
            continue
        x = VOLATILE.sub(r"\1\3", left.read_text()).splitlines()
        y = VOLATILE.sub(r"\1\3", right.read_text()).splitlines()
        if x != y:
            differ += 1
            diff = list(difflib.unified_diff(x, y, str(left), str(right), lineterm="", n=1))
            print("\n".join(diff[:40]))
    print(f"{len(names) - differ} of {len(names)} files identical")
    return 1 if differ else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir", type=Path)
    w.add_argument("--jobs", type=int, default=2)
    w.add_argument("--only", metavar="REGEX", help="only the inputs whose name matches")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.cmd == "write":
        write(args.dir, args.jobs, args.only)
    else:
        sys.exit(compare(args.a, args.b))


if __name__ == "__main__":
    main()
