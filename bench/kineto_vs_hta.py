"""Kineto JSON parsing (issue 6): nsysmoe's reader against HTA's loader, one table.

    python bench/kineto_vs_hta.py            # full: shared traces + a ~800k-event synthetic trace
    python bench/kineto_vs_hta.py --quick    # smoke test: a 2x synthetic trace, one run each

Inputs: the largest shared Kineto trace (nccl_data, ~40k events), the 8 dlrm rank files as one
8-rank run, and a synthetic large trace (nccl_data's traceEvents replicated with shifted
timestamps, correlation ids and step numbers; cached under bench/.work/kineto). Each reader runs
in a fresh subprocess (interpreter start and imports included), best of ``--repeat``, with the
child's peak RSS from ``os.wait4``. HolisticTraceAnalysis 0.5.0 is installed into its own venv,
``bench/.work/tools/hta-venv``, never into nsysmoe's. See bench/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from procs import Run, measure, warm

BENCH = Path(__file__).resolve().parent
PY = sys.executable
HTA_VERSION = "0.5.0"
GENERATOR_VERSION = 1  # bump when the synthetic trace's layout changes
FULL_COPIES = 20
QUICK_COPIES = 2
STEP = re.compile(r"^ProfilerStep#(\d+)$")
ID_ARGS = ("correlation", "External id")  # args that hold correlation ids
FLOW_PHASES = {"s", "t", "f"}  # flow events: their "id" is the correlation id (ac2g) or a link

# Each child prints one JSON line: its import and load seconds (inside the process).
NSYSMOE_CHILD = """\
import json, sys, time
t0 = time.perf_counter()
from nsysmoe.io.kineto import read_kineto
t1 = time.perf_counter()
kernels = sum(read_kineto(p).kernels.height for p in sys.argv[1:])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "kernels": kernels}))
"""
HTA_CHILD = """\
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
traces = analysis.t.traces
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "ranks": sorted(traces),
                  "rows": sum(len(df) for df in traces.values())}))
"""


def shared_dir() -> Path:
    env = os.environ.get("NSYSMOE_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared"


# --------------------------------------------------------------------------------------------
# inputs


@dataclass(frozen=True)
class Input:
    name: str
    files: list[Path]  # what nsysmoe reads, one read_kineto per file, in one process
    hta_dir: Path  # the same files as HTA wants them: a directory of rank files
    events: int  # len(traceEvents), summed over the files


def load_doc(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as fh:
        doc: dict[str, Any] = json.loads(fh.read())
    return doc


def link_dir(directory: Path, files: list[Path]) -> Path:
    """``directory`` holding a symlink to each file, under its own name (HTA lists the directory
    for names ending in .gz/.json and takes each file's rank from its distributedInfo)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for f in files:
        (directory / f.name).symlink_to(f)
    return directory


@dataclass(frozen=True)
class Shift:
    """What copy ``k`` of an event adds: ``k`` times each stride."""

    dt_us: int  # timestamps (> the source's span)
    ids: int  # correlation ids and flow ids (> the largest id)
    steps: int  # N of ProfilerStep#N (the number of steps)

    def apply(self, e: dict[str, Any], k: int) -> dict[str, Any]:
        """A shifted copy of event ``e``; integer µs added to a float that stays in one binade
        keep the ns digits of its text exact."""
        e = dict(e)
        if isinstance(e.get("ts"), int | float):
            e["ts"] += k * self.dt_us
        if e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int):
            e["id"] += k * self.ids
        args = e.get("args")
        if isinstance(args, dict) and any(isinstance(args.get(a), int) for a in ID_ARGS):
            e["args"] = args = dict(args)
            for a in ID_ARGS:
                if isinstance(args.get(a), int) and args[a] > 0:
                    args[a] += k * self.ids
        m = STEP.match(e.get("name") or "")
        if m:
            e["name"] = f"ProfilerStep#{int(m.group(1)) + k * self.steps}"
        return e


def shift_of(events: list[dict[str, Any]]) -> Shift:
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)
    ids = [e["id"] for e in events if e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int)]
    for e in events:
        args = e.get("args")
        if isinstance(args, dict):
            ids += [args[a] for a in ID_ARGS if isinstance(args.get(a), int)]
    steps = [int(m.group(1)) for e in events if (m := STEP.match(e.get("name") or ""))]
    return Shift(
        dt_us=math.ceil(span) + 1000,
        ids=max(ids, default=0) + 1,
        steps=max(steps) - min(steps) + 1 if steps else 1,
    )


def replicated(events: list[dict[str, Any]], copies: int) -> Iterator[dict[str, Any]]:
    """Metadata events once, every other event ``copies`` times, copy ``k`` shifted by ``k``
    strides: each copy is a run of its own later steps."""
    shift = shift_of(events)
    yield from (e for e in events if e.get("ph") == "M")
    body = [e for e in events if e.get("ph") != "M"]
    yield from body
    for k in range(1, copies):
        for e in body:
            yield shift.apply(e, k)


def synthetic(source: Path, copies: int, out: Path) -> int:
    """Write (or reuse) ``out``: ``source`` with its events replicated; returns len(traceEvents).

    The layout is Kineto's: top-level keys one per line, in the source's order, and one event per
    line, so HTA's line-by-line search for ``"rank": N`` stops before the events.
    """
    params = {"source": str(source), "size": source.stat().st_size, "copies": copies}
    params["generator"] = GENERATOR_VERSION
    sidecar = out.with_name(out.name + ".meta.json")
    if out.exists() and sidecar.exists():
        meta = json.loads(sidecar.read_text())
        if meta.get("params") == params:
            return int(meta["events"])
    t0 = time.perf_counter()
    doc = load_doc(source)
    events: list[dict[str, Any]] = doc["traceEvents"]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as fh:
        fh.write("{\n")
        keys, count = list(doc), 0
        for i, key in enumerate(keys):
            sep = ",\n" if i < len(keys) - 1 else "\n"
            if key == "traceEvents":
                fh.write('  "traceEvents": [')
                for n, e in enumerate(replicated(events, copies)):
                    fh.write(("\n  " if n == 0 else ",\n  ") + json.dumps(e))
                    count = n + 1
                fh.write("\n  ]" + sep)
            else:
                fh.write(f"  {json.dumps(key)}: {json.dumps(doc[key])}{sep}")
        fh.write("}\n")
    tmp.replace(out)
    sidecar.write_text(json.dumps({"params": params, "events": count}))
    mb = out.stat().st_size / 1e6
    print(
        f"synthetic trace: {count:,} events, {mb:.0f} MB gzip "
        f"({time.perf_counter() - t0:.1f} s) -> {out}",
        file=sys.stderr,
    )
    return count


def make_inputs(shared: Path, work: Path, copies: int) -> list[Input]:
    kineto = shared / "traces" / "kineto"
    nccl = kineto / "nccl-ns-resolution" / "nccl_data.json.gz"
    ranks = sorted((kineto / "dlrm-8ranks").glob("*.json.gz"))
    if not nccl.exists() or len(ranks) != 8:
        sys.exit(f"shared Kineto traces not found under {kineto} (set NSYSMOE_SHARED)")
    big = work / f"nccl_data_x{copies}.json.gz"
    big_events = synthetic(nccl, copies, big)
    hta = work / "hta"
    return [
        Input(
            "nccl_data (1 rank)",
            [nccl],
            link_dir(hta / "nccl_data", [nccl]),
            len(load_doc(nccl)["traceEvents"]),
        ),
        Input(
            "dlrm-8ranks (8 files)",
            ranks,
            link_dir(hta / "dlrm-8ranks", ranks),
            sum(len(load_doc(p)["traceEvents"]) for p in ranks),
        ),
        Input(
            f"nccl_data x{copies} (synthetic)",
            [big],
            link_dir(hta / big.name.removesuffix(".json.gz"), [big]),
            big_events,
        ),
    ]


# --------------------------------------------------------------------------------------------
# HTA


def hta_venv(tools: Path) -> tuple[Path | None, str]:
    """A venv of its own with HolisticTraceAnalysis; (its python or None, note)."""
    venv = tools / "hta-venv"
    py = venv / "bin" / "python"
    code = "import hta, importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"
    if py.exists():
        r = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == HTA_VERSION:
            return py, ""
    tools.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    r = subprocess.run([base, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"cannot create a venv for HTA: {r.stderr.strip()[-200:]}"
    package = f"HolisticTraceAnalysis=={HTA_VERSION}"
    print(f"installing HTA into its own venv (pip install {package}) …", file=sys.stderr)
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", package],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"pip install {package} failed (PyPI unreachable?): {last}"
    return py, ""


def versions(py: Path) -> str:
    code = (
        "import importlib.metadata as m; "
        "print(' '.join(f'{p} {m.version(p)}' for p in "
        "('HolisticTraceAnalysis', 'pandas', 'numpy')))"
    )
    return subprocess.run([str(py), "-c", code], capture_output=True, text=True).stdout.strip()


# --------------------------------------------------------------------------------------------
# measuring


@dataclass
class Side:
    seconds: float | None = None  # subprocess wall time, fastest run
    rss_bytes: int | None = None  # largest ru_maxrss seen (a process and its reaped children)
    tree_rss_bytes: int | None = None  # polled sum of VmRSS over the process tree
    child: dict[str, Any] = field(default_factory=dict)  # the fastest run's own JSON line
    error: str = ""


@dataclass
class Row:
    input: str
    events: int
    nsysmoe: Side
    hta: Side


def best(cmd: list[str], repeat: int) -> Side:
    """Fastest of ``repeat`` fresh-subprocess runs; a failing run is reported, not raised."""
    runs: list[Run] = []
    for _ in range(repeat):
        run = measure(cmd, poll_tree=True, capture=True)
        if run.rc != 0:
            tail = run.stderr.strip().splitlines()[-1:] or [f"exit {run.rc}"]
            return Side(error=f"exit {run.rc}: {tail[0][:200]}")
        runs.append(run)
    fastest = min(runs, key=lambda r: r.seconds)
    return Side(
        fastest.seconds,
        max(r.max_rss_bytes for r in runs),
        max(r.tree_rss_bytes for r in runs),
        json.loads(fastest.stdout.strip().splitlines()[-1]),
    )


def run_bench(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    copies = QUICK_COPIES if args.quick else FULL_COPIES
    work: Path = args.work / "kineto"
    inputs = make_inputs(shared_dir(), work, copies)
    py, note = hta_venv(args.work / "tools")
    details: dict[str, Any] = {"copies": copies, "repeat": args.repeat}
    if py is None:
        print(f"HTA rows skipped: {note}", file=sys.stderr)
        details["hta"] = note
    else:
        details["hta"] = versions(py)
        print(f"peer: {details['hta']}", file=sys.stderr)
    rows = []
    for inp in inputs:
        warm(inp.files)
        print(f"measuring {inp.name} ({inp.events:,} events) …", file=sys.stderr)
        ours = best([PY, "-c", NSYSMOE_CHILD, *map(str, inp.files)], args.repeat)
        peer = Side()  # not installed: the header line says why
        if py is not None:
            peer = best([str(py), "-c", HTA_CHILD, str(inp.hta_dir)], args.repeat)
            ranks = peer.child.get("ranks")
            if ranks is not None and len(ranks) != len(inp.files):
                peer.error = f"HTA loaded ranks {ranks} of {len(inp.files)} files"
        rows.append(Row(inp.name, inp.events, ours, peer))
    return rows, details


# --------------------------------------------------------------------------------------------
# output


def fmt_s(s: float | None) -> str:
    return f"{s:.2f}" if s is not None else "–"


def fmt_rate(events: int, s: float | None) -> str:
    return f"{events / s / 1e3:,.0f}k" if s else "–"


def fmt_mb(n: int | None) -> str:
    return f"{n / 1e6:,.0f} MB" if n else "–"


def ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.1f}×" if num and den else "–"


def table(headers: tuple[str, ...], lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths), *map(fmt, lines)])


def print_tables(rows: list[Row], details: dict[str, Any]) -> None:
    headers = (
        "input",
        "events",
        "nsysmoe s",
        "nsysmoe ev/s",
        "nsysmoe RSS",
        "HTA s",
        "HTA ev/s",
        "HTA RSS",
        "speedup",
    )
    lines = []
    for r in rows:
        a, b = r.nsysmoe, r.hta
        hta_s = None if b.error else b.seconds
        lines.append(
            (
                r.input,
                f"{r.events:,}",
                fmt_s(a.seconds),
                fmt_rate(r.events, a.seconds),
                fmt_mb(a.rss_bytes),
                fmt_s(hta_s),
                fmt_rate(r.events, hta_s),
                fmt_mb(b.rss_bytes if hta_s else None),
                ratio(hta_s, a.seconds),
            )
        )
    print(f"fresh subprocess each, best of {details['repeat']}; peer: {details['hta']}")
    print(table(headers, lines))
    # the same runs, imports excluded: the loader's own time as each child measured it
    load = []
    for r in rows:
        a_load = r.nsysmoe.child.get("load_s")
        b_load = None if r.hta.error else r.hta.child.get("load_s")
        load.append(
            (
                r.input,
                fmt_s(a_load),
                fmt_s(r.nsysmoe.child.get("import_s")),
                fmt_s(b_load),
                fmt_s(None if r.hta.error else r.hta.child.get("import_s")),
                ratio(b_load, a_load),
            )
        )
    print("\nsame runs, inside the child (interpreter start excluded):")
    head = ("input", "nsysmoe load s", "import s", "HTA load s", "import s", "load speedup")
    print(table(head, load))
    for r in rows:
        if r.nsysmoe.error:
            print(f"nsysmoe on {r.input}: {r.nsysmoe.error}")
        if r.hta.error:
            print(f"HTA on {r.input}: {r.hta.error}")
        tree = r.hta.tree_rss_bytes or 0
        if not r.hta.error and tree > 1.2 * (r.hta.rss_bytes or 0):
            print(f"HTA on {r.input}: worker processes, tree peak (polled sum) {fmt_mb(tree)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_COPIES}x synthetic trace")
    parser.add_argument(
        "--repeat",
        type=int,
        help="runs per reader and input, the fastest is shown (default 3, --quick 1)",
    )
    parser.add_argument(
        "--work", type=Path, default=BENCH / ".work", help="cache and tools [bench/.work]"
    )
    args = parser.parse_args()
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    rows, details = run_bench(args)
    print()
    print_tables(rows, details)
    out = args.work / "kineto" / f"{'quick' if args.quick else 'full'}-results.json"
    out.write_text(json.dumps({"rows": [asdict(r) for r in rows], **details}, indent=1))
    print(f"\nresults: {out}")


if __name__ == "__main__":
    main()
