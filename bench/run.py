"""The scale benchmark (issue 4): generate large exports, measure, print one table.

    python bench/run.py            # full: 1M kernels / 3M NVTX rows, A/B pair, 64 rank files
    python bench/run.py --quick    # smoke test: the same rows on small exports (~1 minute)

Everything in the table is measured in the same run, each command in a fresh subprocess: wall
time with ``time.perf_counter`` around it, peak RSS from ``os.wait4`` (the kernel's high-water
mark of that process; for a process tree the largest single process, plus a polled sum of the
tree where the command runs several processes). Files are read once first so every command
meets a warm page cache. See bench/README.md for what each row means and how the peer is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from gen_exports import ExportParams, ensure_many

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
RSS_TARGET_BYTES = 2_000_000_000  # "≤ 2 GB", decimal: the stricter reading

KERNEL_COLS = "start, end, deviceId, streamId, correlationId, globalPid, demangledName, shortName"
FLOOR_QUERIES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": KERNEL_COLS,
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start, end, globalTid, correlationId, eventClass",
    "NVTX_EVENTS": "start, end, eventType, text, textId, globalTid, endGlobalTid, domainId",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start, end, deviceId, streamId, correlationId, globalPid, "
    "bytes, copyKind",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start, end, deviceId, streamId, correlationId, globalPid, bytes",
    "StringIds": "id, value",
}


@dataclass(frozen=True)
class Sizes:
    processes: int
    kernels_per_process: int
    layers: int
    ranks: int
    rank_kernels: int
    rank_layers: int


FULL = Sizes(
    processes=2,
    kernels_per_process=500_000,
    layers=24,
    ranks=64,
    rank_kernels=20_000,
    rank_layers=4,
)
QUICK = Sizes(
    processes=2, kernels_per_process=20_000, layers=24, ranks=8, rank_kernels=4_000, rank_layers=4
)


@dataclass
class Run:
    seconds: float
    rc: int
    max_rss_bytes: int  # largest single process (wait4 high-water mark)
    tree_rss_bytes: int = 0  # polled sum over the process tree (0 when not polled)
    stdout: str = ""
    stderr: str = ""


@dataclass
class Row:
    label: str
    seconds: float | None = None
    rss_bytes: int | None = None
    note: str = ""
    target: str = ""
    verdict: str = ""
    value: str = ""  # for ratio rows


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)
    export: Path | None = None  # the 1M-kernel "off" export

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


# --------------------------------------------------------------------------------------------
# measuring


def _tree_rss(root: int) -> int:
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
    """Run ``cmd`` once; wall time, exit code and peak RSS of that child alone."""
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
                peak[0] = max(peak[0], _tree_rss(proc.pid))

        def kill() -> None:
            os.killpg(proc.pid, signal.SIGKILL)

        poller = threading.Thread(target=poll, daemon=True)
        if poll_tree:
            poller.start()
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
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
        )


def best_of(
    cmd: list[str],
    repeat: int,
    *,
    env: dict[str, str] | None = None,
    poll_tree: bool = False,
    capture: bool = False,
) -> Run:
    """Fastest of ``repeat`` runs (all must succeed), with the largest peak RSS seen."""
    runs = [measure(cmd, env=env, poll_tree=poll_tree, capture=capture) for _ in range(repeat)]
    for r in runs:
        if r.rc != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.rc}: {r.stderr.strip()[-800:]}")
    best = min(runs, key=lambda r: r.seconds)
    best.max_rss_bytes = max(r.max_rss_bytes for r in runs)
    best.tree_rss_bytes = max(r.tree_rss_bytes for r in runs)
    return best


def warm(paths: list[Path]) -> None:
    """Read every file once so all commands meet the same (warm) page cache."""
    for path in paths:
        with path.open("rb") as fh:
            while fh.read(1 << 24):
                pass


def nsysmoe_cmd(*args: str) -> list[str]:
    return [PY, "-m", "nsysmoe", "analyze", *args, "--format", "json", "-o", os.devnull]


# --------------------------------------------------------------------------------------------
# tools


def sqlite3_cli() -> tuple[str | None, str]:
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


def floor_sql(path: Path) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    return " ".join(f"SELECT {cols} FROM {t};" for t, cols in FLOOR_QUERIES.items() if t in tables)


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


def devices_of(path: Path) -> list[int]:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    rows = con.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    con.close()
    return sorted(r[0] for r in rows)


# --------------------------------------------------------------------------------------------
# the rows


def gb(n: int | None) -> str:
    return f"{n / 1e9:.2f}" if n else "–"


@dataclass(frozen=True)
class Exports:
    off: Path  # the 1M-kernel export, overlap off
    on: Path  # the same run with overlap on
    rank_dir: Path
    ranks: list[Path]
    counts: dict[str, int]  # rows per table of ``off``
    rank_kernels: int  # kernels in one rank file


def make_exports(sizes: Sizes, work: Path) -> Exports:
    """Generate (or reuse) the A/B pair and the rank files, two files at a time."""
    big = ExportParams(
        processes=sizes.processes,
        kernels_per_process=sizes.kernels_per_process,
        layers=sizes.layers,
        dispatcher="hybridep",
        overlap=False,
        seed=4,
    )
    off, on = work / "moe-off.sqlite", work / "moe-on.sqlite"
    rank_dir = work / f"ranks{sizes.ranks}"
    rank_dir.mkdir(parents=True, exist_ok=True)
    ranks = [rank_dir / f"rank{r:02d}.sqlite" for r in range(sizes.ranks)]
    jobs = [(off, big), (on, replace(big, overlap=True))]
    for r, path in enumerate(ranks):
        rank = ExportParams(
            processes=1,
            kernels_per_process=sizes.rank_kernels,
            layers=sizes.rank_layers,
            dispatcher="deepep",
            overlap=True,
            seed=100 + r,
            first_pid=1_400_000 + 211 * r,
            first_device=r % 8,
        )
        jobs.append((path, rank))
    t0 = time.perf_counter()
    made = ensure_many(jobs, workers=min(2, os.cpu_count() or 1))
    generated = sum(g for g, _ in made)
    print(
        f"exports: {generated} generated, {len(jobs) - generated} cached "
        f"({time.perf_counter() - t0:.1f} s) in {work}",
        file=sys.stderr,
    )
    kernels = made[2][1]["CUPTI_ACTIVITY_KIND_KERNEL"]
    return Exports(off, on, rank_dir, ranks, made[0][1], kernels)


def run_bench(args: argparse.Namespace) -> Report:
    sizes = QUICK if args.quick else FULL
    work: Path = args.work / ("quick" if args.quick else "full")
    tools: Path = args.work / "tools"
    report = Report()
    rep = args.repeat

    ex = make_exports(sizes, work)
    report.export = ex.off
    report.details["exports"] = {
        "off": str(ex.off),
        "on": str(ex.on),
        "ranks": str(ex.rank_dir),
        "rows_off": ex.counts,
        "rank_kernels": ex.rank_kernels,
    }
    warm([ex.off, ex.on, *ex.ranks])
    n_k, n_nvtx = ex.counts["CUPTI_ACTIVITY_KIND_KERNEL"], ex.counts["NVTX_EVENTS"]
    mb = ex.off.stat().st_size / 1e6
    size = f"{n_k / 1e6:.2f}M kernels, {n_nvtx / 1e6:.2f}M NVTX, {mb:.0f} MB"

    print("measuring nsysmoe analyze …", file=sys.stderr)
    analyze = best_of(nsysmoe_cmd(str(ex.off)), rep)
    report.add(
        Row(
            f"nsysmoe analyze ({size}, {sizes.processes} processes)",
            analyze.seconds,
            analyze.max_rss_bytes,
            "--format json -o /dev/null",
        )
    )
    code = "import sys; from nsysmoe.io import load_trace; load_trace(sys.argv[1])"
    load = best_of([PY, "-c", code, str(ex.off)], rep)
    report.add(
        Row(
            "  of which: nsysmoe reader alone (load_trace)",
            load.seconds,
            load.max_rss_bytes,
            "the export read into polars frames",
        )
    )
    terminal = best_of(
        [*nsysmoe_cmd(str(ex.off))[:-4], "--format", "terminal", "-o", os.devnull], rep
    )
    report.add(
        Row(
            "  same, --format terminal",
            terminal.seconds,
            terminal.max_rss_bytes,
            "JSON rendering cost = json row − this row",
        )
    )
    print("measuring nsysmoe A/B …", file=sys.stderr)
    ab = best_of(nsysmoe_cmd(str(ex.off), str(ex.on)), rep)
    report.add(
        Row(
            "nsysmoe analyze OFF ON (A/B of two such exports)",
            ab.seconds,
            ab.max_rss_bytes,
            "--format json -o /dev/null",
        )
    )

    floor = floor_row(report, ex.off, rep)
    peer = None
    if args.skip_peer:
        report.add(Row("peer: nsys-ai", note="skipped (--skip-peer)"))
    else:
        peer = nsysai_rows(report, tools, ex.off, rep)
    interval_rows(report, tools, ex.off)
    rank_rows(report, ex.rank_dir, ex.ranks, ex.rank_kernels, rep)
    target_rows(report, analyze, ab, floor, peer)
    return report


def floor_row(report: Report, export: Path, rep: int) -> Run | None:
    cli, cli_note = sqlite3_cli()
    if not cli:
        report.add(Row("floor: sqlite3 CLI", note=cli_note))
        return None
    uri = f"file:{export}?mode=ro&immutable=1"
    floor = best_of([cli, "-readonly", uri, floor_sql(export)], rep)
    report.add(
        Row(
            "floor: sqlite3 CLI reads the needed columns",
            floor.seconds,
            floor.max_rss_bytes,
            f"output to /dev/null {cli_note}".strip(),
        )
    )
    return floor


def target_rows(
    report: Report,
    analyze: Run,
    ab: Run,
    floor: Run | None,
    peer: Run | None,
) -> None:
    """The issue-4 targets, PASS/FAIL (n/a when a side could not be measured)."""

    def ratio(
        label: str, num: float | None, den: float | None, target: str, limit: float, at_least: bool
    ) -> None:
        if num is None or den is None:
            report.add(Row(label, target=target, verdict="n/a", value="–"))
            return
        value = num / den
        ok = value >= limit if at_least else value <= limit
        report.add(
            Row(label, target=target, value=f"{value:.2f}×", verdict="PASS" if ok else "FAIL")
        )

    ratio(
        "analyze / sqlite3 floor",
        analyze.seconds,
        floor.seconds if floor else None,
        "≤ 2",
        2,
        at_least=False,
    )
    ratio(
        "nsys-ai SQLite path / analyze",
        peer.seconds if peer else None,
        analyze.seconds,
        "≥ 5",
        5,
        at_least=True,
    )
    rss = analyze.max_rss_bytes
    report.add(
        Row(
            "peak RSS of analyze",
            value=f"{gb(rss)} GB",
            target="≤ 2 GB",
            verdict="PASS" if rss <= RSS_TARGET_BYTES else "FAIL",
        )
    )
    ratio("A/B / analyze", ab.seconds, analyze.seconds, "≤ 2.2", 2.2, at_least=False)


def nsysai_rows(report: Report, tools: Path, export: Path, rep: int) -> Run | None:
    py, note = nsysai_venv(tools)
    if py is None:
        report.add(Row("peer: nsys-ai", note=f"not installed: {note}"))
        return None
    version = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(m.version('nsys-ai'))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"measuring nsys-ai {version} …", file=sys.stderr)
    peer = best_of([str(py), str(BENCH / "nsysai_sqlite_path.py"), str(export)], rep, capture=True)
    result = json.loads(peer.stdout)
    report.details["nsys_ai_sqlite_path"] = result
    report.add(
        Row(
            f"peer: nsys-ai {version} overlap, SQLite path, all GPUs",
            peer.seconds,
            peer.max_rss_bytes,
            "overlap_analysis() per GPU on raw sqlite3, see README",
        )
    )
    # the CLI as a user meets it: one command per GPU, DuckDB attempts first
    scratch = tools / "nsys-ai-scratch"
    total, rss, fell_back = 0.0, 0, False
    for device in devices_of(export):
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        link = scratch / export.name
        link.symlink_to(export)
        run = measure(
            [
                str(py.parent / "nsys-ai"),
                "overlap",
                str(link),
                "--gpu",
                str(device),
                "--trim",
                "0",
                "1000000",
            ],
            capture=True,
        )
        if run.rc != 0:
            report.add(Row("peer: nsys-ai CLI", note=f"exit {run.rc}: {run.stderr[-200:]}"))
            return peer
        total += run.seconds
        rss = max(rss, run.max_rss_bytes)
        fell_back |= "falling back to sqlite3" in run.stderr
    shutil.rmtree(scratch, ignore_errors=True)
    how = (
        "DuckDB sqlite_scanner download failed, then raw sqlite3"
        if fell_back
        else "DuckDB path (extension available)"
    )
    report.add(Row("  nsys-ai overlap CLI, cold, one run per GPU", total, rss, how))
    return peer


def interval_rows(report: Report, tools: Path, export: Path) -> None:
    deps = pip_target(tools, "intervaltree")
    if deps is None:
        report.add(Row("intervaltree vs IntervalSet", note="pip install intervaltree failed"))
        return
    print("measuring intervaltree vs IntervalSet …", file=sys.stderr)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(deps), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    }
    run = measure([PY, str(BENCH / "interval_peer.py"), str(export)], env=env, capture=True)
    if run.rc != 0:
        report.add(Row("intervaltree vs IntervalSet", note=f"failed: {run.stderr[-300:]}"))
        return
    result = json.loads(run.stdout)
    report.details["intervals"] = result
    s = result["seconds"]
    gpus = len(result["gpus"])
    report.add(
        Row(
            f"interval part, {gpus} GPUs: nsysmoe IntervalSet (numpy)",
            s["intervalset"],
            note="⋃comm, ⋃compute, |⋃comm ∩ ⋃compute| per GPU",
        )
    )
    report.add(
        Row(
            "  same with PyPI intervaltree",
            s["intervaltree"],
            note=f"same answers (asserted); {s['intervaltree'] / s['intervalset']:.0f}× slower",
        )
    )


def rank_rows(report: Report, rank_dir: Path, ranks: list[Path], kernels: int, rep: int) -> None:
    help_text = subprocess.run(
        [PY, "-m", "nsysmoe", "analyze", "--help"], capture_output=True, text=True
    ).stdout
    n = len(ranks)
    label = f"nsysmoe on {n} rank files ({kernels / 1e3:.0f}k kernels each)"
    if "--jobs" in help_text:
        jobs = str(os.cpu_count() or 1)
        print(f"measuring nsysmoe analyze DIR --jobs {jobs} …", file=sys.stderr)
        try:
            run = best_of([*nsysmoe_cmd(str(rank_dir)), "--jobs", jobs], rep, poll_tree=True)
            report.add(
                Row(
                    label,
                    run.seconds,
                    run.max_rss_bytes,
                    f"analyze DIR --jobs {jobs}; tree peak {gb(run.tree_rss_bytes)} GB",
                )
            )
            return
        except RuntimeError as exc:
            print(f"analyze DIR --jobs failed ({exc}); looping over files", file=sys.stderr)
    print(f"measuring nsysmoe analyze on {n} files, one process each …", file=sys.stderr)
    total, rss = 0.0, 0
    for path in ranks:
        run = best_of(nsysmoe_cmd(str(path)), 1)
        total += run.seconds
        rss = max(rss, run.max_rss_bytes)
    report.add(
        Row(
            label,
            total,
            rss,
            f"CLI has no directory/--jobs mode: a sequential loop, {total / n:.2f} s per file",
        )
    )


# --------------------------------------------------------------------------------------------
# output


def print_table(report: Report) -> None:
    headers = ("measurement", "wall s", "peak RSS GB", "value", "target", "result", "note")
    lines = []
    for r in report.rows:
        lines.append(
            (
                r.label,
                f"{r.seconds:.2f}" if r.seconds is not None else "",
                gb(r.rss_bytes) if r.rss_bytes else "",
                r.value,
                r.target,
                r.verdict,
                r.note,
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    right = {1, 2, 3}

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    print(fmt(headers))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(fmt(line))


def hotspots(export: Path, top: int) -> None:
    print(f"\nwhere nsysmoe analyze spends its time ({export.name}, json output):")
    subprocess.run(
        [
            PY,
            str(BENCH / "stage_times.py"),
            "--top",
            str(top),
            "--",
            "analyze",
            str(export),
            "--format",
            "json",
            "-o",
            os.devnull,
        ],
        stderr=sys.stdout,
        stdout=subprocess.DEVNULL,
        check=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small exports (smoke test)")
    parser.add_argument(
        "--work",
        type=Path,
        default=BENCH / ".work",
        help="cache of generated exports and tools [bench/.work]",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per command; best is shown")
    parser.add_argument("--skip-peer", action="store_true", help="skip nsys-ai (needs PyPI)")
    parser.add_argument(
        "--hotspots",
        choices=("auto", "always", "never"),
        default="auto",
        help="print nsysmoe's slowest functions (auto: when a target fails)",
    )
    args = parser.parse_args()
    report = run_bench(args)
    print()
    print_table(report)
    work = args.work / ("quick" if args.quick else "full")
    (work / "results.json").write_text(
        json.dumps(
            {"rows": [asdict(r) for r in report.rows], **report.details}, indent=1, default=str
        )
    )
    failed = any(r.verdict == "FAIL" for r in report.rows)
    if report.export and (args.hotspots == "always" or (args.hotspots == "auto" and failed)):
        hotspots(report.export, top=20)
    print(f"\nresults: {work / 'results.json'}")


if __name__ == "__main__":
    main()
