"""The Python API (also ``import nsysmoe; nsysmoe.load(...)``); the CLI is wiring over it.

Each function runs the one-way flow for one kind of input: read (``load``), classify once
(:func:`nsysmoe.pipeline.prepare`), measure (:func:`nsysmoe.pipeline.analyze_trace`), compare
(:mod:`nsysmoe.ab`, :mod:`nsysmoe.ranks`), and hands back a result from :mod:`nsysmoe.results`
that :func:`render` and :func:`plot` turn into text and figures.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from nsysmoe import ab, pipeline
from nsysmoe.ab.ranks import compare_runs
from nsysmoe.classify import RuleSet
from nsysmoe.errors import NsysmoeError
from nsysmoe.io import cache, load_trace
from nsysmoe.measure import lanes
from nsysmoe.measure.kernels import kernel_table
from nsysmoe.measure.steps import detect_steps
from nsysmoe.model import STEADY, WHOLE, Scope, Trace, Window
from nsysmoe.parallel import Executor, map_files
from nsysmoe.peers import compat_analysis, profiler_step_names
from nsysmoe.ranks import run_analysis, side_by_side
from nsysmoe.renderers import render
from nsysmoe.renderers.plot import (
    FigureJob,
    breakdown_figure,
    channels_figure,
    ranks_figure,
    slug,
    timeline_figure,
    waits_figure,
    write_figures,
)
from nsysmoe.results import (
    Comparison,
    CompatRun,
    RanksAnalysis,
    RanksComparison,
    TraceAnalysis,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EXAMPLES = {
    "nsys": ("moe-hybridep-overlap-off.sqlite", "moe-hybridep-overlap-on.sqlite"),
    "kineto": (
        "moe-hybridep-overlap-off.pt.trace.json.gz",
        "moe-hybridep-overlap-on.pt.trace.json.gz",
    ),
}
TraceLike = str | Path | Trace


def load(path: str | Path, *, cache_dir: str | Path | None = None) -> Trace:
    """Read a trace into canonical polars tables (see :mod:`nsysmoe.model`); with ``cache_dir``
    reuse (and fill) the cache of :mod:`nsysmoe.io.cache` (a cache that cannot be written is a
    :class:`~nsysmoe.io.cache.CacheWarning`, not an error)."""
    path = Path(path)
    if cache_dir is None or not os.path.isfile(path):  # os.path: False, not raised, if unreadable
        return load_trace(path)
    trace, note = cache.through(Path(cache_dir), path, load_trace)
    if note:  # the cache never stops a read; the CLI shows this after the report
        warnings.warn(note, cache.CacheWarning, stacklevel=2)
    return trace


def _trace(trace: TraceLike, cache_dir: str | Path | None) -> Trace:
    return trace if isinstance(trace, Trace) else load(trace, cache_dir=cache_dir)


def analyze(
    trace: TraceLike,
    *,
    rules: RuleSet | None = None,
    window: Window | None = None,
    scope: Scope = WHOLE,
    cache_dir: str | Path | None = None,
) -> TraceAnalysis:
    """Classify kernels and measure every GPU of one trace (``window`` overrides ``scope``'s
    windows; ``scope.rank`` still selects one rank)."""
    source = pipeline.prepare(_trace(trace, cache_dir), rules, scope.rank)
    return pipeline.analyze_trace(source, scope=Scope(window=window) if window else scope)


def compare(
    off: TraceLike,
    on: TraceLike,
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    cache_dir: str | Path | None = None,
    vary: tuple[str, ...] = (),
    labels: tuple[str, str] | None = None,
) -> Comparison:
    """A/B of two traces over the steady window common to both (see :mod:`nsysmoe.ab`); with
    ``scope.rank``, of that rank's GPUs on each side. ``vary``: the variable under test
    (``--vary`` names); ``labels``: names of the sides (default: from the variable)."""
    with ThreadPoolExecutor(max_workers=2) as pool:  # readers and polars release the GIL
        traces = list(pool.map(partial(_trace, cache_dir=cache_dir), (off, on)))
        sources = list(pool.map(partial(pipeline.prepare, rules=rules, rank=scope.rank), traces))
        steps = list(pool.map(lambda s: detect_steps(s.trace, scope.step_pattern), sources))
        common = ab.common_scope(*steps, scope)
        a, b = pool.map(lambda src, st: pipeline.analyze_trace(src, scope=common, steps=st),
                        sources, steps)  # fmt: skip
    return ab.compare(a, b, scope=common, steps=(steps[0], steps[1]), vary=tuple(vary),
                      labels=labels)  # fmt: skip


def analyze_many(
    paths: list[str],
    *,
    rules: RuleSet | None = None,
    scope: Scope = WHOLE,
    executor: Executor | None = None,
    cache_dir: str | Path | None = None,
    align: bool = False,
) -> RanksAnalysis:
    """Analyse per-rank files in parallel (processes or Dask); bad files are reported, not
    fatal. Files are put on one clock by their session starts; with ``align``, each rank's clock
    is also corrected by its collectives' end times (``--align collectives``)."""
    fn = partial(_analyze_path, rules=rules, scope=scope, cache_dir=cache_dir)
    results = map_files(fn, paths, executor or Executor(), "reading traces")
    return run_analysis(results, align=align)


def compare_many(
    off: list[str],
    on: list[str],
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    executor: Executor | None = None,
    cache_dir: str | Path | None = None,
    vary: tuple[str, ...] = (),
    labels: tuple[str, str] | None = None,
) -> RanksComparison:
    """A/B of two runs, rank files paired by sorted order, pairs compared in parallel (``vary``
    and ``labels`` as in :func:`compare`, for every pair)."""
    fn = partial(_compare_paths, rules=rules, scope=scope, cache_dir=cache_dir, vary=tuple(vary),
                 labels=labels)  # fmt: skip
    pairs = list(zip(sorted(off), sorted(on), strict=False))
    results = map_files(fn, pairs, executor or Executor(), "comparing rank pairs")
    return compare_runs(results, len(off), len(on))


def _analyze_path(
    path: str, *, rules: RuleSet | None, scope: Scope, cache_dir: str | Path | None
) -> TraceAnalysis:
    """One rank in a worker, detached from its trace so only the figures travel back."""
    return replace(analyze(path, rules=rules, scope=scope, cache_dir=cache_dir), source=None)


def _compare_paths(
    off: str, on: str, *, rules: RuleSet | None, scope: Scope, cache_dir: str | Path | None,
    vary: tuple[str, ...] = (), labels: tuple[str, str] | None = None,
) -> Comparison:
    c = compare(off, on, rules=rules, scope=scope, cache_dir=cache_dir, vary=vary, labels=labels)
    sides = {s: replace(getattr(c, s), analysis=replace(getattr(c, s).analysis, source=None))
             for s in ("off", "on")}  # fmt: skip
    return replace(c, **sides)


def compat(
    paths: list[TraceLike], *, tool: str = "hta", rules: RuleSet | None = None
) -> CompatRun:
    """Another tool's conventions per trace (``"hta"``: HolisticTraceAnalysis 0.5.0), the
    traces taken together as one job's ranks (HTA counts ProfilerStep names across them)."""
    if tool != "hta":
        raise NsysmoeError(f"--compat {tool!r}: unknown tool; known: hta")
    traces = [_trace(p, None) for p in paths]
    steps = frozenset().union(*(profiler_step_names(t) for t in traces))
    return CompatRun(tuple(compat_analysis(pipeline.prepare(t, rules), step_names=steps)
                           for t in traces))  # fmt: skip


def kernel_summary(
    trace: TraceLike, *, rules: RuleSet | None = None, klass: str | None = None
) -> pl.DataFrame:
    """Kernel names by total time with class and sub-class (name, class, subclass, count,
    sum_ns, mean_ns, pct_of_kernel_time)."""
    return kernel_table(pipeline.prepare(_trace(trace, None), rules).kernels, klass)


def example_paths(kind: str = "nsys") -> list[Path]:
    """The shipped example traces: HybridEP MoE steps with EP overlap off, then on — as nsys
    SQLite exports (``kind="nsys"``) or the same run as PyTorch profiler JSON (``"kineto"``)."""
    base = resources.files("nsysmoe") / "examples"
    return [Path(str(base / name)) for name in EXAMPLES[kind]]


def figure_jobs(result: object) -> list[FigureJob]:
    """The figures that apply to ``result``: a timeline per trace (measured when drawn), the
    breakdown and the exposed/hidden time per channel of an A/B, the per-rank chart of more than
    one rank."""
    analyses: list[TraceAnalysis] = []
    jobs: list[FigureJob] = []
    if isinstance(result, TraceAnalysis):
        analyses = [result]
    elif isinstance(result, Comparison):
        analyses = [result.off.analysis, result.on.analysis]
    seen: set[str] = set()
    for a in analyses:
        if a.source is not None and a.path not in seen:
            seen.add(a.path)
            jobs.append((f"timeline-{slug(a.path)}",
                         partial(lambda a: timeline_figure(lanes.timeline(a)), a)))  # fmt: skip
    run = result if isinstance(result, RanksAnalysis) else None
    if isinstance(result, Comparison):
        parts = {s.label: lanes.breakdown(s.analysis.totals) for s in (result.off, result.on)}
        jobs.append(("breakdown", partial(breakdown_figure, result, parts)))
        jobs.append(("channels", partial(channels_figure, result)))
        run = side_by_side([result.off.analysis, result.on.analysis])
    if run is not None and len(run.ranks) > 1:
        jobs.append(("ranks", partial(ranks_figure, run)))
    collectives = run.collectives if isinstance(result, RanksAnalysis) else (
        result.collectives if isinstance(result, TraceAnalysis) else None)  # fmt: skip
    if collectives is not None and collectives.matched:
        jobs.append(("waits", partial(waits_figure, collectives)))
    return jobs


def plot(result: object, outdir: str | Path) -> list[Path]:
    """Write every figure that applies to ``result`` into ``outdir`` as PNG and SVG."""
    return write_figures(Path(outdir), figure_jobs(result))


def figures(result: object) -> dict[str, Figure]:
    """Every figure that applies to ``result``, drawn, by name (``breakdown``, ``ranks``,
    ``timeline-<trace>``): matplotlib figures to show in Jupyter or save yourself."""
    return {stem: make() for stem, make in figure_jobs(result)}


def _show_in_jupyter() -> None:
    """Results display as HTML in Jupyter (IPython's formatter, so results stay plain data)."""
    import sys

    if "IPython" not in sys.modules:
        return
    shell = sys.modules["IPython"].get_ipython()
    if shell is None:
        return
    html = shell.display_formatter.formatters["text/html"]
    for kind in (TraceAnalysis, Comparison, RanksAnalysis, RanksComparison, CompatRun):
        html.for_type(kind, lambda result: render(result, "html"))


_show_in_jupyter()


__all__ = [
    "Executor", "analyze", "analyze_many", "compare", "compare_many", "compat", "example_paths",
    "figure_jobs", "figures", "kernel_summary", "load", "plot", "render",
]  # fmt: skip
