"""Record or check golden outputs: every report of every shared trace, byte for byte.

A refactor that must change no number runs ``python dev/golden.py record DIR`` before it moves
anything and ``python dev/golden.py check DIR`` after; ``check`` lists every output that differs.
Outputs hold absolute paths, so record and check from the same checkout location (from a
worktree, with ``NSYSMOE_SHARED`` and ``NSYSMOE_BENCH_WORK`` pointing at the same folders, the
outputs that show the checkout's own paths, the packaged examples' and those shown relative to
it, differ by those paths alone).
Where the speed bench has generated its exports (``bench/.work/full``), their reports are cases
too (OFF, ON, LIGHT, their A/B and the 8-GPU SCALE export: a speed change must not move a
number of a million-kernel trace either). A last argument REGEX keeps only the cases it matches.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NSYSMOE_SHARED", ROOT.parent / "shared"))
T = SHARED / "traces"
BENCH = Path(os.environ.get("NSYSMOE_BENCH_WORK", ROOT / "bench" / ".work" / "full"))
FORMATS = ("json", "markdown", "terminal")


def _examples(kind: str = "") -> list[str]:
    out = subprocess.run([sys.executable, "-m", "nsysmoe", "examples", *([kind] if kind else [])],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.split()


def cases() -> dict[str, list[str]]:
    """name → nsysmoe arguments."""
    c: dict[str, list[str]] = {}
    singles = sorted(T.glob("nsys/*.sqlite")) + sorted(T.glob("kineto/*/*.json.gz"))
    singles += sorted(T.glob("nsys/nccl-allreduce-6ranks/*.sqlite"))[:1]
    for p in singles:
        for f in FORMATS:
            c[f"one-{p.parent.name}-{p.name}-{f}"] = ["analyze", str(p), "--format", f]
    pairs = {
        "examples": _examples(),
        "examples-kineto": _examples("--kineto"),
        "nersc": [str(T / "nsys/nersc-ddp-4gpu-baseline.sqlite"),
                  str(T / "nsys/nersc-ddp-4gpu-bucketcap100mb.sqlite")],
        "nsysai": [str(T / "nsys/nsysai-2gpu-before.sqlite"),
                   str(T / "nsys/nsysai-2gpu-after.sqlite")],
    }  # fmt: skip
    for name, (a, b) in pairs.items():
        for f in FORMATS:
            c[f"ab-{name}-{f}"] = ["analyze", a, b, "--format", f]
    ex = pairs["examples"]
    c["ab-examples-window-iters"] = ["analyze", *ex, "--window", "3-6", "--format", "json"]
    c["ab-examples-whole"] = ["analyze", *ex, "--whole-trace", "--format", "json"]
    c["ab-examples-failif"] = ["analyze", *ex, "--fail-if", "hidden_pct<50", "--format", "json"]
    c["one-examples-window-time"] = ["analyze", ex[0], "--window", "+100ms:+400ms",
                                     "--format", "json"]  # fmt: skip
    c["one-examples-skip"] = ["analyze", ex[1], "--skip", "2", "--format", "markdown"]
    c["one-examples-failif"] = ["analyze", ex[1], "--fail-if", "hidden_pct>=30"]
    for d in ("nsys/nccl-allreduce-6ranks", "kineto/dlrm-8ranks", "kineto/trace-filter-2ranks"):
        for f in FORMATS:
            c[f"many-{Path(d).name}-{f}"] = ["analyze", str(T / d), "--jobs", "1", "--format", f]
    for f in FORMATS:
        c[f"many-ab-{f}"] = ["analyze", str(T / "kineto/trace-filter-2ranks"),
                             str(T / "kineto/trace-filter-2ranks"), "--jobs", "1", "--format", f]
        c[f"compat-dlrm-{f}"] = ["analyze", str(T / "kineto/dlrm-8ranks"), "--compat", "hta",
                                 "--format", f]  # fmt: skip
        c[f"compat-nersc-{f}"] = ["analyze", str(T / "nsys/nersc-ddp-4gpu-baseline.sqlite"),
                                  "--compat", "hta", "--format", f]  # fmt: skip
    for f in ("terminal", "markdown", "json", "csv"):
        deepseek = str(T / "kineto/deepseek-v3-ep64-train/rank0.json.gz")
        c[f"kernels-deepseek-{f}"] = ["kernels", deepseek, "--format", f]
    c["kernels-examples-comm"] = ["kernels", ex[1], "--class", "comm", "--top", "0"]
    for name, args in (("ab", ex), ("many", [str(T / "nsys/nccl-allreduce-6ranks"), "--jobs", "1"]),
                       ("one", [str(T / "nsys/nersc-ddp-4gpu-baseline.sqlite")])):
        c[f"plot-{name}"] = ["analyze", *args, "--format", "markdown", "--plot", PLOTS + name]
    bench = {"off": ["moe-off.sqlite"], "on": ["moe-on.sqlite"], "light": ["moe-light.sqlite"],
             "ab": ["moe-off.sqlite", "moe-on.sqlite"], "scale": ["gpus/moe-8gpu.sqlite"]}
    for name, files in bench.items():
        if all((BENCH / f).exists() for f in files):
            for f in ("json", "markdown"):
                c[f"bench-{name}-{f}"] = ["analyze", *(str(BENCH / x) for x in files),
                                          "--format", f]  # fmt: skip
    c["api"] = ["@api", API]
    c["err-missing"] = ["analyze", "/nonexistent.sqlite"]
    c["err-window"] = ["analyze", ex[0], "--window", "5s:1s"]
    c["err-failif"] = ["analyze", ex[0], "--fail-if", "bogus<3"]
    return c


PLOTS = "/tmp/nsysmoe-golden-plots/"  # fixed, so the reports' figure links are the same
#: the Python API's renderings (recorded before the refactor with result.to_markdown()/to_json(),
#: which are nsysmoe.render(result, fmt) since; HTML is built from the document model)
API = """
import nsysmoe
off, on = nsysmoe.example_paths()
r = nsysmoe.analyze(nsysmoe.load(off), scope=nsysmoe.Scope(window=nsysmoe.Iterations(skip=1)))
print(nsysmoe.render(r, "markdown")); print(nsysmoe.render(r, "json")); print(r.to_polars())
c = nsysmoe.compare(off, on)
print(nsysmoe.render(c, "markdown")); print(nsysmoe.render(c, "json")); print(c.to_polars())
print(nsysmoe.kernel_summary(on))
"""


def run(args: list[str]) -> bytes:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    cmd = [sys.executable, "-c", args[1]] if args[0] == "@api" else [
        sys.executable, "-m", "nsysmoe", *args]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    out = b"rc=%d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)
    if "--plot" in args:  # the figures' pixels (SVG ids are random; PNGs are deterministic)
        pngs = sorted(Path(args[args.index("--plot") + 1]).glob("*.png"))
        out += b"".join(b"%s %s\n" % (f.name.encode(), hashlib.sha256(f.read_bytes())
                                        .hexdigest().encode()) for f in pngs)  # fmt: skip
    return out


def main() -> int:
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("record", "check"):
        print("usage: python dev/golden.py record|check DIR [REGEX]", file=sys.stderr)
        return 2
    mode, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    chosen = {n: a for n, a in cases().items()
              if len(sys.argv) == 3 or re.search(sys.argv[3], n)}  # fmt: skip
    for name, args in chosen.items():
        got = run(args)
        path = out / f"{name}.txt"
        if mode == "record":
            path.write_bytes(got)
            continue
        want = path.read_bytes() if path.exists() else b"(not recorded)"
        if got != want:
            bad += 1
            digest = hashlib.sha256(got).hexdigest()[:12]
            path.with_suffix(".new").write_bytes(got)
            print(f"DIFFERS {name} (new output: {path.with_suffix('.new')}, {digest})")
    if mode == "check" and len(sys.argv) == 3:  # a case recorded but gone is not a pass
        for path in sorted(out.glob("*.txt")):
            if path.stem not in chosen:
                bad += 1
                print(f"NOT CHECKED {path.stem} (recorded, no such case here: the bench "
                      "exports missing? set NSYSMOE_BENCH_WORK)")  # fmt: skip
    total = len(chosen)
    print(f"{mode}: {total} outputs" + (f", {bad} differ" if mode == "check" else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
