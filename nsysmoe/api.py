"""The Python API; the CLI is a thin layer over these functions."""

from __future__ import annotations

from functools import partial
from importlib import resources
from pathlib import Path

import polars as pl

from nsysmoe import cache
from nsysmoe.analyze import WHOLE, Scope, analyze_trace
from nsysmoe.classify import CLASSES, RuleSet, classify, default_rules
from nsysmoe.compare import Comparison
from nsysmoe.compare import compare as run_compare
from nsysmoe.compare.multi import RunComparison, compare_runs
from nsysmoe.compare.side import STEADY
from nsysmoe.compat import CompatResult, compat_analysis, profiler_step_names
from nsysmoe.errors import NsysmoeError
from nsysmoe.io import load_trace
from nsysmoe.measure.overlap import Window
from nsysmoe.model import Trace
from nsysmoe.multirank import RunAnalysis, run_analysis
from nsysmoe.result import TraceAnalysis
from nsysmoe.runs import Executor, map_files

EXAMPLES = {
    "nsys": ("moe-hybridep-overlap-off.sqlite", "moe-hybridep-overlap-on.sqlite"),
    "kineto": (
        "moe-hybridep-overlap-off.pt.trace.json.gz",
        "moe-hybridep-overlap-on.pt.trace.json.gz",
    ),
}


def load(path: str | Path, *, cache_dir: str | Path | None = None) -> Trace:
    """Read a trace into canonical polars tables (see :mod:`nsysmoe.model`); with ``cache_dir``
    reuse (and fill) the cache of :mod:`nsysmoe.cache`."""
    path = Path(path)
    if cache_dir is None or not path.is_file():
        return load_trace(path)
    hit = cache.load(Path(cache_dir), path)
    if hit is not None:
        return hit
    trace = load_trace(path)
    cache.store(Path(cache_dir), path, trace)
    return trace


def analyze(
    trace: str | Path | Trace,
    *,
    rules: RuleSet | None = None,
    window: Window | None = None,
    scope: Scope = WHOLE,
    cache_dir: str | Path | None = None,
) -> TraceAnalysis:
    """Classify kernels and measure every GPU of one trace (``window`` overrides ``scope``)."""
    if not isinstance(trace, Trace):
        trace = load(trace, cache_dir=cache_dir)
    if window is not None:
        scope = Scope(window=window)
    return analyze_trace(trace, rules=rules, scope=scope)


def analysis_values(result: TraceAnalysis) -> dict[str, float | None]:
    """Flat values of one analysis for ``--fail-if`` (all GPUs together)."""
    return _gpu_values(result.gpus)


def _gpu_values(g: pl.DataFrame) -> dict[str, float | None]:
    comm, span = int(g["comm_ns"].sum()), int(g["span_ns"].sum())
    return {
        "hidden_pct": 100.0 * int(g["hidden_ns"].sum()) / comm if comm else None,
        "min_gpu_hidden_pct": g["hidden_pct"].min(),
        "exposed_ns": float(g["exposed_ns"].sum()),
        "exposed_pct_of_span": 100.0 * int(g["exposed_ns"].sum()) / span if span else None,
        "idle_pct_of_span": 100.0 * int(g["idle_ns"].sum()) / span if span else None,
        "comm_gemm_attn_ns": float(g["comm_gemm_attn_ns"].sum()),
        "kernels": float(g["kernels"].sum()),
    }


def compare(
    off: str | Path | Trace,
    on: str | Path | Trace,
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    cache_dir: str | Path | None = None,
) -> Comparison:
    """A/B of two traces over the steady window common to both (see :mod:`nsysmoe.compare`)."""
    off = off if isinstance(off, Trace) else load(off, cache_dir=cache_dir)
    on = on if isinstance(on, Trace) else load(on, cache_dir=cache_dir)
    return run_compare(off, on, rules=rules, scope=scope)


def analyze_many(
    paths: list[str],
    *,
    rules: RuleSet | None = None,
    scope: Scope = WHOLE,
    executor: Executor | None = None,
    cache_dir: str | Path | None = None,
) -> RunAnalysis:
    """Analyse per-rank files in parallel (processes or Dask); bad files are reported, not
    fatal."""
    fn = partial(_analyze_path, rules=rules or default_rules(), scope=scope, cache_dir=cache_dir)
    results = map_files(fn, paths, executor or Executor(), "reading traces")
    return run_analysis(results)


def analysis_values_many(run: RunAnalysis) -> dict[str, float | None]:
    """``--fail-if`` values of a run: every rank's GPUs taken together (sums and the worst GPU's
    hidden %), as :func:`analysis_values` does for one trace's GPUs."""
    return _gpu_values(run.ranks)


def compare_many(
    off: list[str],
    on: list[str],
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    executor: Executor | None = None,
    cache_dir: str | Path | None = None,
) -> RunComparison:
    """A/B of two runs, rank files paired by sorted order, pairs compared in parallel."""
    fn = partial(_compare_paths, rules=rules or default_rules(), scope=scope, cache_dir=cache_dir)
    pairs = list(zip(sorted(off), sorted(on), strict=False))
    results = map_files(fn, pairs, executor or Executor(), "comparing rank pairs")
    return compare_runs(results, len(off), len(on))


def _analyze_path(
    path: str, *, rules: RuleSet, scope: Scope, cache_dir: str | Path | None
) -> TraceAnalysis:
    return analyze_trace(load(path, cache_dir=cache_dir), rules=rules, scope=scope)


def _compare_paths(
    off: str, on: str, *, rules: RuleSet, scope: Scope, cache_dir: str | Path | None
) -> Comparison:
    a, b = load(off, cache_dir=cache_dir), load(on, cache_dir=cache_dir)
    return run_compare(a, b, rules=rules, scope=scope)


def compat_many(
    paths: list[str], *, tool: str = "hta", rules: RuleSet | None = None
) -> list[CompatResult]:
    """Another tool's conventions per trace (``"hta"``: HolisticTraceAnalysis 0.5.0), the
    traces taken together as one job's ranks (HTA counts ProfilerStep names across them)."""
    if tool != "hta":
        raise NsysmoeError(f"--compat {tool!r}: unknown tool; known: hta")
    traces = [load(p) for p in paths]
    steps = frozenset().union(*(profiler_step_names(t) for t in traces))
    return [compat_analysis(t, rules=rules, step_names=steps) for t in traces]


def kernel_summary(
    trace: str | Path | Trace, *, rules: RuleSet | None = None, klass: str | None = None
) -> pl.DataFrame:
    """Kernel names by total time with class and sub-class (name, class, subclass, count,
    sum_ns, mean_ns, pct_of_kernel_time)."""
    if not isinstance(trace, Trace):
        trace = load(trace)
    k = classify(trace.kernels, rules or default_rules())
    total = int((k["end"] - k["start"]).sum()) or 1
    table = (
        k.group_by("name", "class", "subclass")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (pl.col("end") - pl.col("start")).sum().alias("sum_ns"),
        )
        .with_columns(
            (pl.col("sum_ns") // pl.col("count")).alias("mean_ns"),
            (100.0 * pl.col("sum_ns") / total).alias("pct_of_kernel_time"),
        )
        .sort(["sum_ns", "name"], descending=[True, False])
    )
    if klass and klass not in CLASSES:
        raise NsysmoeError(f"--class {klass!r}: unknown class; one of {', '.join(CLASSES)}")
    return table.filter(pl.col("class") == klass) if klass else table


def example_paths(kind: str = "nsys") -> list[Path]:
    """The shipped example traces: HybridEP MoE steps with EP overlap off, then on — as nsys
    SQLite exports (``kind="nsys"``) or the same run as PyTorch profiler JSON (``"kineto"``)."""
    base = resources.files("nsysmoe") / "examples"
    return [Path(str(base / name)) for name in EXAMPLES[kind]]
