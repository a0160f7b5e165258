"""The speed benchmark (issues 4 and 16): generate the inputs, measure in interleaved rounds, print
one table with the targets marked PASS/FAIL.

    python bench/run.py            # full: 1M kernels / 3M NVTX rows, A/B pair, 64 rank files,
                                   # scaling exports up to 2M kernels; 3 rounds
    python bench/run.py --quick    # smoke test: the same rows on small exports, 2 rounds

Every command runs as a fresh subprocess (``procs.measure``: wall time, CPU time and peak RSS
from ``os.wait4``), after the inputs were read once (warm page cache). Each round runs every
measure once, in a fixed order, each next to its reference; ratios are taken per round. See
bench/README.md for exactly what each row runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import floor
import kineto_vs_hta as kineto
from exports import FULL, KERNELS, LIGHT_OP_EVERY, QUICK, Exports, make_exports
from installs import nsysai_venv, pip_target, sqlite3_cli, version_of
from procs import measure, warm
from rounds import Measure, Outcome, Ratio, Step, failure, fill_ratio, fit_exponent, run_rounds

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
#: the cores this process may run on (what the measured commands share); nsysmoe.env.cores()
#: counts them the same way, but the bench never imports the package it measures
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
GB = 1e9  # targets in decimal GB (the stricter reading)
RSS_PER_M_LIMIT = 1.0 * GB
REPEAT_LIMIT_S = 0.5
HELP_LIMIT_S = 0.3
COMPILE_LIMIT_S = 3.0
LINEAR_EXPONENT = 1.15
#: issue 35: the 8-GPU scale export's peak RSS, and its time per kernel over LIGHT's (same
#: generator and NVTX density on 2 GPUs)
GPUS_RSS_LIMIT = 2.5 * GB
GPUS_PER_KERNEL_LIMIT = 1.15
#: issue 34 point 5: what the dependency graph (critical path, what-if replay) may add to an
#: analysis of the big export, as analyze / analyze --no-critical-path
CP_TIME_LIMIT = 1.30
CP_RSS_LIMIT = 1.20
NO_CP = "--no-critical-path"
#: the reader alone: imports + ``load_trace`` of ``sys.argv[1]``
LOAD = "import sys; from nsysmoe.io import load_trace; load_trace(sys.argv[1])"
#: every table read through SQL (ADBC), not decoded from the file's pages (nsysmoe.io.pages)
SQL_ONLY = {**os.environ, "NSYSMOE_READER": "sql"}


def nsysmoe_cmd(*args: str, out: str = os.devnull) -> list[str]:
    return [PY, "-m", "nsysmoe", "analyze", *args, "--format", "json", "-o", out]


def cmd_step(key: str, cmd: list[str], **kw: Any) -> Step:
    """A step running ``cmd`` once; a non-zero exit is an error, not a sample."""

    def step(_: int) -> dict[str, Outcome]:
        run = measure(cmd, **kw)
        return {key: run if run.rc == 0 else failure(run)}

    return step


def failures_in(doc: object) -> list[object]:
    """Every entry of every ``failures`` list in a JSON report."""
    found: list[object] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += v if k == "failures" and isinstance(v, list) else failures_in(v)
    elif isinstance(doc, list):
        for v in doc:
            found += failures_in(v)
    return found


@dataclass
class Plan:
    measures: dict[str, Measure] = field(default_factory=dict)
    steps: list[tuple[str, Step]] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # printed under the table
    cache_mismatch: list[int] | None = None  # rounds whose repeat-run JSON differed

    def add(self, key: str, label: str, what: str) -> None:
        self.measures[key] = Measure(key, label, what)


# --------------------------------------------------------------------------------------------
# the steps


def help_steps(plan: Plan) -> None:
    plan.add("help.main", "python -m nsysmoe --help", "import + help text")
    plan.add("help.analyze", "python -m nsysmoe analyze --help", "import + help text")
    main = cmd_step("help.main", [PY, "-m", "nsysmoe", "--help"])
    sub = cmd_step("help.analyze", [PY, "-m", "nsysmoe", "analyze", "--help"])
    plan.steps.append(("--help", lambda r: {**main(r), **sub(r)}))


def no_cp_step(plan: Plan, key: str, label: str, export: Path, on: bool) -> None:
    """``analyze EXPORT --no-critical-path``, the baseline of the critical path's cost; run right
    after the default analyze of the same export (``on``: analyze has the flag)."""
    if on:
        plan.add(key, label, f"{NO_CP}: no dependency graph; json -o /dev/null")
        name = f"{'LIGHT ' if 'light' in key else ''}analyze {NO_CP}"
        plan.steps.append((name, cmd_step(key, nsysmoe_cmd(str(export), NO_CP))))


def no_sm_step(plan: Plan, key: str, label: str, export: Path) -> None:
    """``analyze EXPORT`` without the SM budget (``bench/without_sm_budget.py``), the baseline
    of its cost (issue 38)."""
    plan.add(key, label, "SM budget and inflation left out; json -o /dev/null")
    name = f"{'LIGHT ' if 'light' in key else ''}analyze without the SM budget"
    cmd = [PY, str(BENCH / "without_sm_budget.py"), "analyze", str(export), "--format", "json",
           "-o", os.devnull]  # fmt: skip
    plan.steps.append((name, cmd_step(key, cmd)))


def sm_budget_ratios(plan: Plan) -> None:
    """Issue 38's cost of the SM budget and the inflation table: analyze over the same
    analyze without them, in wall time (target) and peak RSS (info)."""
    for tag, num, den in (("", "analyze", "analyze.nosm"),
                          ("LIGHT: ", "analyze.light", "analyze.nosm.light")):  # fmt: skip
        plan.ratios += [
            Ratio(f"{tag}SM budget: analyze / without it, s", num, den, "≤ 1.10", 1.10),
            Ratio(f"  {tag}SM budget: analyze / without it, peak RSS", num, den,
                  attr="rss_bytes"),
        ]


def critical_path_ratios(plan: Plan, on: bool) -> None:
    """Issue 34's cost of the dependency graph: the default analyze over the same command with
    ``--no-critical-path``, per round, in wall time and peak RSS (targets) and CPU (info)."""
    if not on:
        plan.notes.append(f"no critical-path cost rows: analyze has no {NO_CP}")
        return
    plan.notes.append(
        f"analyze rows (and A/B, --cache, ranks, scaling) run the default, which builds the"
        f" dependency graph (critical path, what-if replay); the {NO_CP} rows are the same"
        f" analyze without it: the baseline of the 'critical path:' ratios"
    )
    for tag, num, den in (("", "analyze", "analyze.nocp"),
                          ("LIGHT: ", "analyze.light", "analyze.nocp.light")):  # fmt: skip
        head = f"{tag}critical path: analyze / {NO_CP}"
        plan.ratios += [
            Ratio(f"{head}, s", num, den, f"≤ {CP_TIME_LIMIT:.2f}", CP_TIME_LIMIT),
            Ratio(f"  {head}, cpu s", num, den, attr="cpu_seconds"),
            Ratio(
                f"{head}, peak RSS",
                num,
                den,
                f"≤ {CP_RSS_LIMIT:.2f}",
                CP_RSS_LIMIT,
                attr="rss_bytes",
            ),
        ]


def analyze_steps(plan: Plan, ex: Exports, cli: str | None, why: str, cp: bool) -> None:
    k = ex.counts["CUPTI_ACTIVITY_KIND_KERNEL"]
    size = f"{k / 1e6:.2f}M kernels" if k >= 100_000 else f"{k / 1e3:.0f}k kernels"
    if cli:
        plan.add("floor", "decode floor: sqlite3, needed columns", "total() per column, 1 process")
        plan.steps.append(("floor", cmd_step("floor", floor.command(cli, ex.off))))
    else:
        plan.notes.append(f"no decode floor: {why}")
    plan.add("analyze", f"nsysmoe analyze OFF ({size})", "--format json -o /dev/null")
    plan.steps.append(("analyze", cmd_step("analyze", nsysmoe_cmd(str(ex.off)))))
    no_cp_step(plan, "analyze.nocp", f"  nsysmoe analyze OFF {NO_CP}", ex.off, cp)
    no_sm_step(plan, "analyze.nosm", "  nsysmoe analyze OFF without the SM budget", ex.off)
    if cli:
        plan.add(
            "floor2", "  decode floor, 2 sqlite3 at once", "NVTX ∥ the rest, as nsysmoe's reader"
        )
        plan.steps.append(("floor2", cmd_step("floor2", floor.command_split(cli, ex.off))))
    plan.add("load", "  nsysmoe reader alone (load_trace)", "imports + read into polars frames")
    plan.steps.append(("load", cmd_step("load", [PY, "-c", LOAD, str(ex.off)])))
    plan.add("load.sql", "  the same through SQL only", "NSYSMOE_READER=sql: no page decoder")
    plan.steps.append(
        ("load.sql", cmd_step("load.sql", [PY, "-c", LOAD, str(ex.off)], env=SQL_ONLY))
    )
    plan.ratios += [
        Ratio("analyze / decode floor", "analyze", "floor", "≤ 2.5", 2.5),
        # the bound of the row above: analyze's CPU time spread over every core, none idle
        Ratio(f"  analyze CPU / {CORES} cores / floor (bound)", "analyze", "floor",
              cpu_over_cores=CORES),
        Ratio("analyze / 2-process floor", "analyze", "floor2"),
        Ratio("reader alone / decode floor", "load", "floor"),
        Ratio("  reader alone / the same through SQL only", "load", "load.sql"),
    ]


def nsysai_step(py: Path, key: str, export: Path) -> Step:
    """nsys-ai's SQLite path on ``export``; a run that analysed no GPU is an error."""
    cmd = [str(py), str(BENCH / "nsysai_sqlite_path.py"), str(export)]

    def step(_: int) -> dict[str, Outcome]:
        run = measure(cmd, capture=True)
        if run.rc != 0:
            return {key: failure(run)}
        devices = json.loads(run.stdout)["devices"]
        return {key: run if devices else "no GPU analysed"}

    return step


def nsysai_steps(plan: Plan, ex: Exports, tools: Path) -> Path | None:
    """The nsys-ai rows; returns its venv's python (None where it could not be installed)."""
    py, why = nsysai_venv(tools)
    if py is None:
        plan.notes.append(f"no nsys-ai rows: {why}")
        return None
    version = version_of(py, "nsys-ai")
    plan.add("nsysai", f"nsys-ai {version} overlap, SQLite path", "bench/nsysai_sqlite_path.py OFF")
    plan.steps.append(("nsys-ai", nsysai_step(py, "nsysai", ex.off)))
    plan.ratios.append(Ratio("nsys-ai SQLite path / analyze", "nsysai", "analyze", "≥ 3", 3, True))
    # the bound of the row above: analyze's CPU time spread over every core, none idle
    plan.ratios.append(Ratio(f"  nsys-ai / (analyze CPU / {CORES} cores) (bound)", "nsysai",
                             "analyze", cpu_over_cores=CORES, cpu_side="den"))  # fmt: skip
    # the ceiling of the row above: the ratio if the analysis after the read cost nothing
    plan.ratios.append(Ratio("  nsys-ai / reader alone (ceiling)", "nsysai", "load"))
    return py


def light_steps(plan: Plan, ex: Exports, cli: str | None, nsysai: Path | None, cp: bool) -> None:
    """The same targets on LIGHT: ``off``'s kernels with the NVTX density of the issue's export
    (one PyTorch op range in ``LIGHT_OP_EVERY``), so a reader sees which verdicts hang on the
    NVTX rows."""
    n = ex.light_counts["NVTX_EVENTS"]
    head = f"LIGHT ({n / 1e6:.2f}M NVTX rows):"
    if cli:
        plan.add("floor.light", f"{head} decode floor", "total() per column, 1 process")
        plan.steps.append(("LIGHT floor", cmd_step("floor.light", floor.command(cli, ex.light))))
    plan.add("analyze.light", f"{head} nsysmoe analyze", "--format json -o /dev/null")
    plan.steps.append(("LIGHT analyze", cmd_step("analyze.light", nsysmoe_cmd(str(ex.light)))))
    no_cp_step(plan, "analyze.nocp.light", f"{head} nsysmoe analyze {NO_CP}", ex.light, cp)
    no_sm_step(plan, "analyze.nosm.light", f"{head} nsysmoe analyze without the SM budget",
               ex.light)  # fmt: skip
    plan.add("load.light", f"{head} reader alone", "imports + read into polars frames")
    plan.steps.append(("LIGHT load", cmd_step("load.light", [PY, "-c", LOAD, str(ex.light)])))
    if nsysai is not None:
        plan.add("nsysai.light", f"{head} nsys-ai SQLite path", "bench/nsysai_sqlite_path.py")
        plan.steps.append(("LIGHT nsys-ai", nsysai_step(nsysai, "nsysai.light", ex.light)))
    plan.ratios += [
        Ratio("LIGHT: analyze / decode floor", "analyze.light", "floor.light", "≤ 2.5", 2.5),
        Ratio(f"  LIGHT: analyze CPU / {CORES} cores / floor (bound)", "analyze.light",
              "floor.light", cpu_over_cores=CORES),
        Ratio("LIGHT: nsys-ai / analyze", "nsysai.light", "analyze.light", "≥ 3", 3, True),
        Ratio(f"  LIGHT: nsys-ai / (analyze CPU / {CORES} cores) (bound)", "nsysai.light",
              "analyze.light", cpu_over_cores=CORES, cpu_side="den"),
        Ratio("  LIGHT: nsys-ai / reader alone (ceiling)", "nsysai.light", "load.light"),
    ]


def parquet_steps(plan: Plan, ex: Exports, work: Path, nsysai: Path | None) -> None:
    """Issue 37: OFF as a Parquet export (``parquet_copy``, laid out as nsys writes one) read
    and analysed beside the SQLite of the same export, against the Parquet floor and nsys-ai's
    own Parquet path on the same folder."""
    folder = work / "parquet" / f"{ex.off.stem}_pqtdir"
    # in a process of its own: the driver's peak RSS is where every child it forks starts from
    subprocess.run([PY, str(BENCH / "parquet_copy.py"), str(ex.off), str(folder)], check=True)
    plan.add("pq.floor", "Parquet floor: polars, needed columns", "bench/parquet_floor.py")
    plan.add("pq.named", "  the same and the names as text (bound)", "parquet_floor.py --named")
    plan.add("pq.load", "  nsysmoe reader alone, Parquet (load_trace)", "OFF as parquetdir")
    plan.add("pq.analyze", "nsysmoe analyze OFF from Parquet", "--format json -o /dev/null")
    plan.steps += [
        ("Parquet floor", cmd_step("pq.floor", [PY, str(BENCH / "parquet_floor.py"), str(folder)])),
        ("Parquet floor named", cmd_step("pq.named", [PY, str(BENCH / "parquet_floor.py"),
                                                      str(folder), "--named"])),
        ("Parquet load", cmd_step("pq.load", [PY, "-c", LOAD, str(folder)])),
        ("Parquet analyze", cmd_step("pq.analyze", nsysmoe_cmd(str(folder)))),
    ]
    plan.ratios += [
        Ratio("Parquet: reader alone / Parquet floor", "pq.load", "pq.floor", "≤ 1.5", 1.5),
        Ratio("  Parquet: floor with names / floor (bound of the row above)", "pq.named",
              "pq.floor"),
        Ratio("Parquet: analyze saved / the floors' difference", "analyze", "floor", "≥ 0.8",
              0.8, True, num_minus="pq.analyze", den_minus="pq.floor"),
        Ratio("  Parquet: analyze / analyze from SQLite", "pq.analyze", "analyze"),
    ]
    if nsysai is None:
        return
    script = [str(nsysai), str(BENCH / "nsysai_parquet_path.py"), str(folder)]
    first = measure(script, capture=True)  # nsys-ai repairs the folder once, into the folder
    plan.notes.append(
        f"nsys-ai's Parquet path writes .nsys_ai_parquetdir_repaired/ into the export folder on "
        f"first use ({first.seconds:.1f} s here, untimed); its rows are the runs after that")
    plan.add("pq.nsysai", "nsys-ai overlap, Parquet path", "bench/nsysai_parquet_path.py OFF")

    def step(_: int) -> dict[str, Outcome]:
        run = measure(script, capture=True)
        if run.rc != 0:
            return {"pq.nsysai": failure(run)}
        return {"pq.nsysai": run if json.loads(run.stdout)["devices"] else "no GPU analysed"}

    plan.steps.append(("Parquet nsys-ai", step))
    plan.ratios += [
        Ratio("Parquet: analyze / nsys-ai Parquet path", "pq.analyze", "pq.nsysai", "≤ 1.0", 1.0),
        Ratio(f"  Parquet: analyze CPU / {CORES} cores / nsys-ai (bound)", "pq.analyze",
              "pq.nsysai", cpu_over_cores=CORES),
        Ratio("  Parquet: reader alone / nsys-ai (floor of the row above)", "pq.load",
              "pq.nsysai"),
    ]


#: a real report and its SQLite export (shared/traces: the NERSC DDP baseline), for the report rows
SHARED_TRACES = BENCH.parents[1] / "shared" / "traces"
REPORT = SHARED_TRACES / "nsys-2023" / "reports" / "nersc-ddp-4gpu-baseline.qdrep"


def find_nsys() -> str | None:
    """An ``nsys`` that exports Parquet: the one on PATH, else shared/tools/get-nsys's."""
    if found := shutil.which("nsys"):
        return found
    tool = BENCH.parents[1] / "shared" / "tools" / "get-nsys"
    if not tool.is_file():
        return None
    got = subprocess.run(["bash", str(tool)], capture_output=True, text=True)
    return got.stdout.strip() or None if got.returncode == 0 else None


def report_steps(plan: Plan, scratch: Path) -> None:
    """Report → result through each export path (issue 37 point 2), on a real report: nsysmoe's
    path (only the tables it reads, to Parquet) beside the SQLite path it replaced (every table
    exported to SQLite, then analysed), and each export alone."""
    nsys = find_nsys()
    if nsys is None or not REPORT.is_file():
        plan.notes.append("no report rows: " + ("no nsys (PATH or shared/tools/get-nsys)"
                                                if nsys is None else f"no {REPORT}"))
        return
    env = {**os.environ, "PATH": f"{Path(nsys).parent}{os.pathsep}{os.environ['PATH']}"}
    out = scratch / "report-export"
    sqlite = f"{out}.sqlite"
    read = subprocess.run([PY, "-c", "from nsysmoe.io.nsys_sqlite import TABLES_READ as t; "
                           "print(','.join(f'^{x}$' for x in t))"], capture_output=True,
                          text=True, check=True)  # not imported here: the driver stays small
    tables = read.stdout.strip()
    export_sqlite = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
                     "--output", sqlite, str(REPORT)]  # fmt: skip
    export_parquet = [nsys, "export", "--type", "parquetdir", "--tables", tables,
                      "--force-overwrite", "true", "--output", f"{out}_pqtdir", str(REPORT)]
    old_path = ["sh", "-c", f'"$@" > /dev/null && "$0" -m nsysmoe analyze {shlex.quote(sqlite)} '
                "--format json -o /dev/null", PY, *export_sqlite]  # fmt: skip
    what = f"{REPORT.name}, {REPORT.stat().st_size / 1e6:.1f} MB"
    plan.add("rep.analyze", "report: nsysmoe analyze REPORT", f"{what}: --tables Parquet path")
    plan.add("rep.old", "  the SQLite path: export all, analyze", f"{what}: before issue 37")
    plan.add("rep.export.sqlite", "  nsys export: SQLite, every table", what)
    plan.add("rep.export.parquet", "  nsys export: Parquet, --tables", what)
    plan.steps += [
        ("report analyze", cmd_step("rep.analyze", nsysmoe_cmd(str(REPORT)), env=env)),
        ("report SQLite path", cmd_step("rep.old", old_path, env=env)),
        ("report export SQLite", cmd_step("rep.export.sqlite", export_sqlite)),
        ("report export Parquet", cmd_step("rep.export.parquet", export_parquet)),
    ]
    plan.ratios += [
        Ratio("report: nsysmoe's path / the SQLite path", "rep.analyze", "rep.old"),
        Ratio("  report: Parquet --tables export / SQLite export", "rep.export.parquet",
              "rep.export.sqlite"),
    ]


def ab_steps(plan: Plan, ex: Exports) -> None:
    plan.add("ab", "nsysmoe analyze OFF ON (A/B)", "--format json -o /dev/null")
    plan.steps.append(("A/B", cmd_step("ab", nsysmoe_cmd(str(ex.off), str(ex.on)))))
    plan.ratios.append(Ratio("A/B / analyze", "ab", "analyze", "≤ 2.0", 2.0))
    # the bound of the row above: the A/B's CPU time spread over every core with none idle
    plan.ratios.append(Ratio(f"  A/B CPU / {CORES} cores / analyze (bound)", "ab", "analyze",
                             cpu_over_cores=CORES))  # fmt: skip


def cache_steps(plan: Plan, ex: Exports, scratch: Path, help_text: str) -> None:
    if "--cache" not in help_text:
        plan.notes.append("no repeat-run rows: analyze has no --cache")
        return
    plan.add("cache.first", "analyze OFF --cache: first run", "fresh NSYSMOE_CACHE_DIR")
    plan.add("cache.repeat", "  same command again: repeat run", "the cache the first run left")
    mismatched: list[int] = []
    plan.cache_mismatch = mismatched

    def step(r: int) -> dict[str, Outcome]:
        cache = scratch / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        env = {**os.environ, "NSYSMOE_CACHE_DIR": str(cache)}
        outs = [scratch / "cache-first.json", scratch / "cache-repeat.json"]
        runs = [measure(nsysmoe_cmd(str(ex.off), "--cache", out=str(o)), env=env) for o in outs]
        shutil.rmtree(cache, ignore_errors=True)
        if all(run.rc == 0 for run in runs) and outs[0].read_bytes() != outs[1].read_bytes():
            mismatched.append(r)
        return {
            key: run if run.rc == 0 else failure(run)
            for key, run in zip(("cache.first", "cache.repeat"), runs, strict=True)
        }

    plan.steps.append(("--cache first, repeat", step))
    plan.ratios += [
        Ratio("repeat run / first run", "cache.repeat", "cache.first"),
        Ratio("first --cache run / analyze", "cache.first", "analyze"),
    ]


#: the compiled loops loaded in a fresh process: prints the seconds ``core.warm()`` (the
#: dependency graph's passes) and ``pages.warm()`` (the reader's page decoder) took together
COMPILE = ("import time; from nsysmoe.depgraph import core; from nsysmoe.io import pages; "
           "t = time.perf_counter(); core.warm(); pages.warm(); "
           "print(time.perf_counter() - t)")  # fmt: skip


def compile_steps(plan: Plan, scratch: Path, help_text: str, off: Path) -> None:
    """The first run's compile (issue 35: ≤ 3 s, reported) of the dependency graph's passes
    and the reader's page decoder: ``core.warm()`` and ``pages.warm()`` with an empty numba
    cache (a fresh ``NUMBA_CACHE_DIR`` every round), then again with the cache they left (what
    every later run pays). A first run waits for neither (the decoder compiles while SQL
    reads the tables, the passes while the trace is classified): what it costs is the row
    after, analyze OFF with an empty cache, against analyze OFF."""
    if NO_CP not in help_text:
        plan.notes.append("no compile rows: analyze has no dependency graph")
        return
    what = "core.warm() + pages.warm() alone"
    plan.add("compile.first", "first-run compile (numba, empty cache)", what)
    plan.add("compile.cached", "  the same from the cache it left", what)
    plan.add("analyze.cold", "  analyze OFF with an empty numba cache", "a first run's compile")
    plan.ratios.append(Ratio("first analyze (empty numba cache) / analyze", "analyze.cold",
                             "analyze"))  # fmt: skip

    def step(_: int) -> dict[str, Outcome]:
        cache = scratch / "numba-cache"
        shutil.rmtree(cache, ignore_errors=True)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
        out: dict[str, Outcome] = {}
        for key in ("compile.first", "compile.cached"):
            run = measure([PY, "-c", COMPILE], env=env, capture=True)
            try:  # the warm-up's own seconds, not the interpreter's start and imports
                if run.rc != 0:
                    raise ValueError(run.rc)
                out[key] = replace(run, seconds=float(run.stdout.split()[-1]))
            except (ValueError, IndexError):
                out[key] = failure(run)
        shutil.rmtree(cache, ignore_errors=True)
        run = measure(nsysmoe_cmd(str(off)), env=env)
        out["analyze.cold"] = run if run.rc == 0 else failure(run)
        shutil.rmtree(cache, ignore_errors=True)
        return out

    plan.steps.append(("compile", step))


def rank_steps(plan: Plan, ex: Exports, scratch: Path) -> None:
    n = len(ex.ranks)
    for jobs in (1, 2):
        key = f"ranks.j{jobs}"
        plan.add(
            key,
            f"analyze {ex.rank_dir.name}/ --jobs {jobs}" if jobs == 1 else f"  same, --jobs {jobs}",
            f"{n} rank files of {ex.rank_kernels / 1e3:.0f}k kernels; JSON to a file",
        )
    outs = {j: scratch / f"ranks-j{j}.json" for j in (1, 2)}

    def one(jobs: int) -> Outcome:
        out = outs[jobs]
        out.unlink(missing_ok=True)
        run = measure(
            [*nsysmoe_cmd(str(ex.rank_dir), out=str(out)), "--jobs", str(jobs)], poll_tree=True
        )
        if run.rc != 0:
            return failure(run)
        doc = json.loads(out.read_text())
        failed = failures_in(doc)
        if failed:
            return f"{len(failed)} failures: {str(failed[0])[:200]}"
        read = len(doc.get("traces", [])) if isinstance(doc, dict) else 0
        return run if read == n else f"{read} traces in the report, {n} rank files"

    plan.steps.append(
        (f"{n} ranks --jobs 1, 2", lambda r: {"ranks.j1": one(1), "ranks.j2": one(2)})
    )
    plan.ratios.append(Ratio(f"{n} ranks: --jobs 2 / --jobs 1", "ranks.j2", "ranks.j1"))


def kineto_steps(plan: Plan, work: Path, tools: Path, skip_peer: bool) -> None:
    trace = kineto.shared_dir() / "traces/kineto/nccl-ns-resolution/nccl_data.json.gz"
    if not trace.exists():
        plan.notes.append(f"no Kineto rows: {trace} missing (set NSYSMOE_SHARED)")
        return
    warm([trace])
    plan.add("kineto.nsysmoe", "Kineto: nsysmoe read_kineto", f"{trace.name}, imports included")
    steps = {"kineto.nsysmoe": [PY, "-c", kineto.NSYSMOE_CHILD, str(trace)]}
    py, why = (None, "--skip-peer") if skip_peer else kineto.hta_venv(tools)
    if py is None:
        plan.notes.append(f"no HTA row: {why}")
    else:
        hta_dir = kineto.link_dir(work / "kineto-hta" / "nccl_data", [trace])
        version = version_of(py, "HolisticTraceAnalysis")
        plan.add("kineto.hta", f"  HTA {version} loader", "TraceAnalysis(trace_dir=…)")
        steps["kineto.hta"] = [str(py), "-c", kineto.HTA_CHILD, str(hta_dir)]
        plan.ratios.append(Ratio("Kineto: nsysmoe / HTA loader", "kineto.nsysmoe", "kineto.hta"))

    def step(_: int) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        for key, cmd in steps.items():
            run = measure(cmd, capture=True)
            out[key] = run if run.rc == 0 else failure(run)
        return out

    plan.steps.append(("Kineto", step))


def scaling_steps(plan: Plan, ex: Exports) -> list[tuple[int, str]]:
    """(kernels, measure key) per scaling point; the big export's point is ``analyze``."""
    points = []
    for path, kernels in sorted(ex.scaling.items(), key=lambda kv: kv[1]):
        if path == ex.off:
            points.append((kernels, "analyze"))
            continue
        key = f"scale.{kernels}"
        plan.add(key, f"analyze {path.name}", "scaling point, json -o /dev/null")
        plan.steps.append((f"scaling {kernels / 1e6:.2f}M", cmd_step(key, nsysmoe_cmd(str(path)))))
        points.append((kernels, key))
    return points


def gpus_steps(plan: Plan, ex: Exports) -> None:
    """The 8-GPU scale export: its analyze time and peak RSS beside LIGHT's (issue 35)."""
    if ex.gpus is None:
        return
    c = ex.gpus_counts
    plan.add("gpus", f"SCALE ({c[KERNELS] / 1e6:.2f}M kernels, {ex.gpus.name}): nsysmoe analyze",
             "--format json -o /dev/null")  # fmt: skip
    plan.steps.append(("SCALE analyze", cmd_step("gpus", nsysmoe_cmd(str(ex.gpus)))))
    plan.ratios.append(
        Ratio("SCALE: analyze s per kernel / LIGHT's", "gpus", "analyze.light",
              f"≤ {GPUS_PER_KERNEL_LIMIT}", GPUS_PER_KERNEL_LIMIT,
              scale=ex.light_counts[KERNELS] / c[KERNELS])  # fmt: skip
    )
    plan.ratios.append(
        Ratio("  SCALE: analyze peak RSS per kernel / LIGHT's", "gpus", "analyze.light",
              attr="rss_bytes", scale=ex.light_counts[KERNELS] / c[KERNELS])  # fmt: skip
    )


# --------------------------------------------------------------------------------------------
# the header


def machine() -> dict[str, Any]:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    code = (
        "import nsysmoe, polars, numpy; from nsysmoe._version import __version__ as v; "
        "print(v, nsysmoe.__file__, polars.__version__, numpy.__version__)"
    )
    version, where, polars, numpy = subprocess.run(
        [PY, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    checkout = Path(where).resolve().parents[1]

    def git(*args: str) -> str:
        r = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True)
        return r.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "?"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "nsysmoe"))
    cli = shutil.which("sqlite3")
    sqlite_version = (
        subprocess.run([cli, "--version"], capture_output=True, text=True).stdout.split()[:1]
        if cli
        else []
    )
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(mem / 2**30, 1),
        "load_start": os.getloadavg()[0],
        "python": platform.python_version(),
        "nsysmoe": version,
        "nsysmoe_checkout": str(checkout),
        "nsysmoe_commit": commit + ("+dirty" if dirty else ""),
        "polars": polars,
        "numpy": numpy,
        "sqlite3_cli": sqlite_version[0] if sqlite_version else "missing",
    }


# --------------------------------------------------------------------------------------------
# output


def s_(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "–"


def gb(n: float | None) -> str:
    return f"{n / GB:.2f}" if n else "–"


def table(headers: tuple[str, ...], lines: list[tuple[str, ...]], right: set[int]) -> str:
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths), *map(fmt, lines)])


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "PASS" if ok else "FAIL"


def report(
    plan: Plan,
    ex: Exports,
    info: dict[str, Any],
    rounds: int,
    points: list[tuple[int, str]],
) -> dict[str, Any]:
    """Print the tables; return everything as one JSON-able dict."""
    m = plan.measures
    c = ex.counts
    print(f"nsysmoe speed benchmark, {info['date']}, {rounds} rounds")
    print(
        f"machine: {info['host']}, {info['cores']} cores ({info['cpu']}), {info['ram_gib']} GiB "
        f"RAM; load average {info['load_start']:.1f} at start, {info['load_end']:.1f} at end"
    )
    print(
        f"python {info['python']}, polars {info['polars']}, numpy {info['numpy']}, sqlite3 CLI "
        f"{info['sqlite3_cli']}; nsysmoe {info['nsysmoe']} from {info['nsysmoe_checkout']} "
        f"(commit {info['nsysmoe_commit']})"
    )
    print(
        f"OFF = {ex.off.name}: {c['CUPTI_ACTIVITY_KIND_KERNEL']:,} kernels, "
        f"{c['CUPTI_ACTIVITY_KIND_RUNTIME']:,} CUDA API rows, {c['NVTX_EVENTS']:,} NVTX rows, "
        f"{ex.off.stat().st_size / 1e6:.0f} MB; ON = {ex.on.name} (overlap on)"
    )
    lc = ex.light_counts
    print(
        f"LIGHT = {ex.light.name}: OFF's kernels and CUDA API rows with {lc['NVTX_EVENTS']:,} "
        f"NVTX rows (one PyTorch op range in {LIGHT_OP_EVERY}), "
        f"{ex.light.stat().st_size / 1e6:.0f} MB"
    )
    if ex.gpus is not None:
        g = ex.gpus_counts
        print(
            f"SCALE = {ex.gpus.relative_to(ex.gpus.parent.parent)}: LIGHT's generator and NVTX "
            f"density on {ex.gpu_count} GPUs ({ex.gpu_count} processes): {g[KERNELS]:,} kernels, "
            f"{g['CUPTI_ACTIVITY_KIND_RUNTIME']:,} CUDA API rows, {g['NVTX_EVENTS']:,} NVTX rows, "
            f"{ex.gpus.stat().st_size / 1e9:.2f} GB"
        )
    print(
        "each round runs every row once, in this order; s = subprocess wall seconds, cpu = user"
        " + sys of the child (and its reaped children), RSS = largest ru_maxrss of the rounds\n"
    )
    lines = []
    for x in m.values():
        tree = x.peak_tree_rss()
        note = x.what + (f"; tree peak {gb(tree)} GB" if tree > 1.2 * (x.peak_rss() or 0) else "")
        if x.errors:
            note += f"; {len(x.errors)} FAILED: {x.errors[0]}"
        lines.append(
            (
                x.label,
                str(len(x.samples)),
                s_(x.min()),
                s_(x.median()),
                s_(x.median("cpu_seconds")),
                gb(x.peak_rss()),
                note,
            )
        )
    heads = ("measure", "N", "min s", "median s", "median cpu s", "peak RSS GB", "what")
    print(table(heads, lines, {1, 2, 3, 4, 5}))

    ratios = [fill_ratio(r, m) for r in plan.ratios if r.num in m and r.den in m]
    lines = [
        (
            r.label,
            str(len(r.values)),
            f"{min(r.values):.2f}×" if r.values else "–",
            f"{statistics.median(r.values):.2f}×" if r.values else "–",
            r.target or "–",
            r.verdict(),
        )
        for r in ratios
    ]
    targets: list[dict[str, Any]] = []

    def target(label: str, value: float | None, shown: str, limit: str, ok: bool | None) -> None:
        lines.append((label, "", "", shown, limit, verdict(ok)))
        targets.append({"label": label, "value": value, "target": limit, "verdict": verdict(ok)})

    for key, limit, label in (
        ("cache.repeat", REPEAT_LIMIT_S, "repeat run (--cache), median"),
        ("help.main", HELP_LIMIT_S, "python -m nsysmoe --help, median"),
        ("help.analyze", HELP_LIMIT_S, "nsysmoe analyze --help, median"),
        ("compile.first", COMPILE_LIMIT_S, "first-run compile (empty numba cache), median"),
    ):
        med = m[key].median() if key in m else None
        ok = None if med is None else med <= limit
        target(label, med, f"{s_(med)} s", f"≤ {limit} s", ok)
    for tag, counts, analyze, load in (
        ("", c, "analyze", "load"),
        ("LIGHT: ", ex.light_counts, "analyze.light", "load.light"),
    ):
        per_m = {k: rss_per_million(m, k, counts) for k in (analyze, load)}
        ok = None if per_m[analyze] is None else per_m[analyze] <= RSS_PER_M_LIMIT
        shown = f"{gb(per_m[analyze])} GB"
        target(f"{tag}analyze peak RSS per 1M kernels", per_m[analyze], shown, "≤ 1 GB", ok)
        if per_m[load] is not None:  # the floor of the row above
            label = f"  {tag}reader alone, peak RSS per 1M kernels"
            lines.append((label, "", "", f"{gb(per_m[load])} GB", "–", "info"))
            targets.append({"label": label.strip(), "value": per_m[load], "target": "",
                            "verdict": "info"})  # fmt: skip
    if "gpus" in m:
        rss = m["gpus"].peak_rss()
        ok = None if rss is None else rss <= GPUS_RSS_LIMIT
        target("SCALE: analyze peak RSS", rss, f"{gb(rss)} GB", f"≤ {GPUS_RSS_LIMIT / GB} GB", ok)
    scaling = scaling_table(m, points)
    exp, local = scaling["exponent"], scaling["exponent_last_doubling"]
    ok = None if exp is None else max(exp, local or exp) <= LINEAR_EXPONENT
    shown = f"{exp:.2f} (last step {local:.2f})" if exp is not None and local else "–"
    target("scaling exponent of analyze s", exp, shown, f"≤ {LINEAR_EXPONENT}", ok)
    print()
    heads = ("ratio / target (per-round pairs)", "N", "min", "median", "target", "result")
    print(table(heads, lines, {1, 2, 3}))
    mismatch = plan.cache_mismatch
    if mismatch is not None and m["cache.repeat"].samples:
        said = f"DIFFERS in rounds {mismatch}" if mismatch else "byte-identical in every round"
        plan.notes.append(f"repeat-run JSON vs the first run's: {said}")
    print()
    print(scaling["text"])
    for note in plan.notes:
        print(f"note: {note}")
    return {
        "header": info,
        "measures": {
            k: {**asdict(x), "min": x.min(), "median": x.median(), "peak_rss": x.peak_rss()}
            for k, x in m.items()
        },
        "ratios": [
            {
                **asdict(r),
                "median": statistics.median(r.values) if r.values else None,
                "verdict": r.verdict(),
            }
            for r in ratios
        ],
        "targets": targets,
        "scaling": {k: v for k, v in scaling.items() if k != "text"},
        "notes": plan.notes,
    }


def rss_per_million(m: dict[str, Measure], key: str, counts: dict[str, int]) -> float | None:
    """Peak RSS of a measure per 1M kernels of its export (None where it has no sample)."""
    rss = m[key].peak_rss() if key in m else None
    return rss / (counts["CUPTI_ACTIVITY_KIND_KERNEL"] / 1e6) if rss else None


def scaling_table(m: dict[str, Measure], points: list[tuple[int, str]]) -> dict[str, Any]:
    """Time and RSS per size (min of the rounds), the fitted exponent, a verdict."""
    rows = [(k, m[key].min(), m[key].peak_rss()) for k, key in points if key in m]
    rows = [(k, t, r) for k, t, r in rows if t is not None]
    exp = fit_exponent([k for k, _, _ in rows], [t for _, t, _ in rows])
    rss_exp = fit_exponent([k for k, _, _ in rows], [r for _, _, r in rows])
    local = None
    if len(rows) >= 2:
        (k1, t1, _), (k2, t2, _) = rows[-2], rows[-1]
        local = fit_exponent([k1, k2], [t1, t2])
    lines = [
        (f"{k:,}", s_(t), f"{t / (k / 1e6):.2f}", gb(r), gb(r / (k / 1e6)) if r else "–")
        for k, t, r in rows
    ]
    heads = ("kernels", "min s", "s per 1M kernels", "peak RSS GB", "RSS GB per 1M kernels")
    text = "scaling: nsysmoe analyze FILE --format json -o /dev/null, same generator and shape\n"
    text += table(heads, lines, {0, 1, 2, 3, 4}) if lines else "(no scaling points)"
    if exp is not None:
        ok = max(exp, local or exp) <= LINEAR_EXPONENT
        text += (
            f"\nfitted exponent (least squares of log s on log kernels): {exp:.2f}; between the"
            f" two largest: {local:.2f}; RSS exponent {rss_exp:.2f} -> "
            f"{'linear' if ok else 'NOT linear'} (limit {LINEAR_EXPONENT}, both time exponents)"
        )
    return {
        "points": [{"kernels": k, "min_s": t, "peak_rss": r} for k, t, r in rows],
        "exponent": exp,
        "exponent_last_doubling": local,
        "rss_exponent": rss_exp,
        "text": text,
    }


# --------------------------------------------------------------------------------------------
# once-only extras


def interval_row(tools: Path, export: Path) -> str:
    """nsysmoe's IntervalSet against PyPI intervaltree on the export's kernels (one run)."""
    deps = pip_target(tools, "intervaltree")
    if deps is None:
        return "intervaltree vs IntervalSet: pip install intervaltree failed"
    path = os.pathsep.join(p for p in (str(deps), os.environ.get("PYTHONPATH", "")) if p)
    run = measure(
        [PY, str(BENCH / "interval_peer.py"), str(export)],
        env={**os.environ, "PYTHONPATH": path},
        capture=True,
    )
    if run.rc != 0:
        return f"intervaltree vs IntervalSet: {failure(run)}"
    s = json.loads(run.stdout)["seconds"]
    return (
        f"interval part (⋃comm, ⋃compute, ‖∩‖ per GPU), one run: IntervalSet "
        f"{s['intervalset']:.2f} s, PyPI intervaltree {s['intervaltree']:.2f} s "
        f"({s['intervaltree'] / s['intervalset']:.0f}× slower, same answers)"
    )


def hotspots(export: Path, top: int) -> None:
    print(f"\nwhere nsysmoe analyze spends its time ({export.name}, json output):", flush=True)
    cmd = [
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
    ]
    subprocess.run(cmd, stderr=sys.stdout, stdout=subprocess.DEVNULL, check=False)


def compiled(plan: Plan) -> None:
    """Byte-compile nsysmoe first, as an installed package is: where ``PYTHONDONTWRITEBYTECODE``
    is set (this workplace sets it) an editable checkout would otherwise compile every module
    from source in every timed run (~0.2 s)."""
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "nsysmoe")], check=False,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        plan.notes.append("nsysmoe byte-compiled before timing (PYTHONDONTWRITEBYTECODE is set)")


# --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small exports, 2 rounds (smoke)")
    parser.add_argument(
        "--work", type=Path, default=BENCH / ".work", help="exports, tools, results [bench/.work]"
    )
    parser.add_argument("--repeat", type=int, help="rounds (default 3, --quick 2)")
    parser.add_argument("--skip-peer", action="store_true", help="no nsys-ai / HTA (needs PyPI)")
    parser.add_argument("--skip-scaling", action="store_true",
                        help="no scaling rows, no 8-GPU SCALE export or row")  # fmt: skip
    parser.add_argument(
        "--intervaltree", action="store_true", help="also time PyPI intervaltree (one run)"
    )
    parser.add_argument("--hotspots", action="store_true", help="print nsysmoe's slowest functions")
    args = parser.parse_args()
    rounds = args.repeat or (2 if args.quick else 3)
    sizes = QUICK if args.quick else FULL
    work: Path = (args.work / ("quick" if args.quick else "full")).resolve()
    tools: Path = (args.work / "tools").resolve()
    scratch = work / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)

    ex = make_exports(sizes, work, scale=not args.skip_scaling)
    print(f"exports: {ex.generated} generated ({ex.seconds:.0f} s) in {work}", file=sys.stderr)
    t_start = time.perf_counter()
    info = machine()
    cli, why = sqlite3_cli()
    help_text = subprocess.run(
        [PY, "-m", "nsysmoe", "analyze", "--help"], capture_output=True, text=True
    ).stdout
    cp = NO_CP in help_text
    plan = Plan()
    help_steps(plan)
    analyze_steps(plan, ex, cli, why, cp)
    nsysai = None if args.skip_peer else nsysai_steps(plan, ex, tools)
    light_steps(plan, ex, cli, nsysai, cp)
    parquet_steps(plan, ex, work, nsysai)
    report_steps(plan, scratch)
    critical_path_ratios(plan, cp)
    sm_budget_ratios(plan)
    ab_steps(plan, ex)
    cache_steps(plan, ex, scratch, help_text)
    compile_steps(plan, scratch, help_text, ex.off)
    rank_steps(plan, ex, scratch)
    kineto_steps(plan, scratch, tools, args.skip_peer)
    points = [] if args.skip_scaling else scaling_steps(plan, ex)
    gpus_steps(plan, ex)
    if args.skip_scaling:
        points = [(ex.counts["CUPTI_ACTIVITY_KIND_KERNEL"], "analyze")]
    warm([ex.off, ex.on, ex.light, *ex.ranks, *ex.scaling, *([ex.gpus] if ex.gpus else [])])
    compiled(plan)
    print(f"measuring: {rounds} rounds of {len(plan.steps)} steps", file=sys.stderr)
    done = run_rounds(plan.measures, plan.steps, rounds)
    if done < rounds or any(len(m.samples) < done for m in plan.measures.values()):
        plan.notes.append(f"rounds: {done} of {rounds} begun (interrupted or a row failed)")
    if args.intervaltree:
        plan.notes.append(interval_row(tools, ex.off))
    info["load_end"] = os.getloadavg()[0]
    took = time.perf_counter() - t_start
    print()
    results = report(plan, ex, info, rounds, points)
    print(f"\nbench took {took:.0f} s (generation {ex.seconds:.0f} s not counted)")
    results["seconds"] = took
    out = work / "results.json"
    out.write_text(json.dumps(results, indent=1, default=str))
    if args.hotspots:
        hotspots(ex.off, top=25)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
