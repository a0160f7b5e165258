"""The Python API (also ``import nsysmoe; nsysmoe.load(...)``); the CLI is wiring over it.

Each function runs the one-way flow for one kind of input: read (``load``), classify once
(:func:`nsysmoe.pipeline.prepare`), measure (:func:`nsysmoe.pipeline.analyze_trace`), compare
(:mod:`nsysmoe.ab`, :mod:`nsysmoe.ranks`), and hands back a result from :mod:`nsysmoe.results`
that :func:`render` and :func:`plot` turn into text and figures.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import polars as pl

from nsysmoe import ab, pipeline, result_cache
from nsysmoe.ab import sweep as ab_sweep
from nsysmoe.ab.evidence import with_acceptance
from nsysmoe.ab.ranks import compare_runs
from nsysmoe.ab.side import measure_side
from nsysmoe.acceptance import Acceptance, AcceptedComparison
from nsysmoe.by_process import analyze_by_process
from nsysmoe.classify import RuleSet, default_rules
from nsysmoe.depgraph.build import DepGraph
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.io import cache, load_by_process, load_trace, several_processes
from nsysmoe.io import logs as logs_io
from nsysmoe.io.logs import TrainingLog
from nsysmoe.measure import acceptance as measure_acceptance
from nsysmoe.measure import lanes
from nsysmoe.measure.kernels import kernel_table
from nsysmoe.measure.steps import detect_steps
from nsysmoe.model import STEADY, ClassifiedTrace, Scope, Span, Trace, WindowChoice
from nsysmoe.parallel import Executor, expand, map_files
from nsysmoe.peers import compat_analysis, profiler_step_names
from nsysmoe.ranks import run_analysis
from nsysmoe.renderers import render
from nsysmoe.renderers.cells import plural
from nsysmoe.renderers.names import distinct_tails
from nsysmoe.renderers.plot import (
    FigureJob,
    breakdown_figure,
    channels_figure,
    png_bytes,
    ranks_figure,
    slug,
    svg_text,
    timeline_figure,
    unique_stems,
    waits_figure,
    write_figures,
)
from nsysmoe.renderers.plot.common import side_names
from nsysmoe.renderers.plot.sweep import sweep_figure
from nsysmoe.results import (
    Comparison,
    CompatRun,
    RanksAnalysis,
    RanksComparison,
    Side,
    Steps,
    TraceAnalysis,
)
from nsysmoe.sweeps import Sweep

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EXAMPLES = {
    "nsys": ("moe-hybridep-overlap-off.sqlite", "moe-hybridep-overlap-on.sqlite"),
    "kineto": (
        "moe-hybridep-overlap-off.pt.trace.json.gz",
        "moe-hybridep-overlap-on.pt.trace.json.gz",
    ),
    # the unprofiled runs' training logs (synthetic: tests/fixtures/example_logs.py)
    "logs": ("moe-hybridep-overlap-off.log", "moe-hybridep-overlap-on.log"),
}
TraceLike = str | Path | Trace
LogLike = str | Path | TrainingLog
R = TypeVar("R")


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
    window: Span | None = None,
    scope: Scope = STEADY,
    cache_dir: str | Path | None = None,
    detached: bool = False,
) -> TraceAnalysis:
    """Classify kernels and measure every GPU of one trace over ``scope`` (by default the steady
    iterations, as every report of the CLI: :data:`~nsysmoe.model.WHOLE` for the whole trace).
    ``window`` (a time
    :class:`~nsysmoe.model.Window`, :class:`~nsysmoe.model.Iterations` or
    :class:`~nsysmoe.model.Whole`) replaces ``scope.window`` only: the rank, the step pattern,
    the NVTX naming and the phases of ``scope`` still apply. ``detached``: the result need not
    hold its classified source (no timeline figure is drawn from it); a file of
    :data:`BY_PROCESS_BYTES` or more is then read and measured one process at a time
    (:mod:`nsysmoe.by_process`: the same figures, in the memory of its largest process); with
    ``cache_dir`` too, a repeat of the same analysis is loaded from the result cache
    (:mod:`nsysmoe.result_cache`)."""
    scope = scope if window is None else replace(scope, window=window)

    def compute() -> TraceAnalysis:
        if detached and scope.rank is None and _by_process(trace):
            split = _analyze_by_process(Path(trace), rules, scope)  # type: ignore[arg-type]
            if split is not None:
                return split
        source, steps = pipeline.prepare_with_steps(_trace(trace, cache_dir), rules, scope)
        result = pipeline.analyze_trace(source, scope=scope, steps=steps)
        return replace(result, source=None) if detached else result

    if not detached or cache_dir is None or isinstance(trace, Trace):
        return compute()
    name = result_cache.key("analyze", [trace], _rules_key(rules), repr(scope))
    return _through(Path(cache_dir), name, compute)


#: an nsys export at least this big, of two or more processes, is analysed one process at a
#: time where no figure needs its classified source (:mod:`nsysmoe.by_process`): the memory
#: held is then the largest process's, not the file's. It costs time (the rows spilled and
#: each process read twice: 1.3x on the bench's 1.35 GB 8-GPU export, 1.5x on its 0.74 GB
#: 2-process one), so smaller files, whose whole read peaks under ~3 GB, are read whole.
BY_PROCESS_BYTES = 2**30
#: the room a by-process read needs in the temporary folder, per byte of the file (its rows
#: spilled as Arrow: 2.0 GB for the bench's 1.35 GB 8-GPU export), with a margin
SPILL_PER_BYTE = 2


def _by_process(trace: TraceLike) -> bool:
    """Whether to read ``trace`` one process at a time: an nsys SQLite export file (not a trace
    in memory, a folder, a report or a Kineto trace) of :data:`BY_PROCESS_BYTES` or more, of
    two or more processes, with room for its rows in the temporary folder (else it is read
    whole: the same figures, in more memory)."""
    if isinstance(trace, Trace):
        return False
    try:
        size = os.path.getsize(trace) if os.path.isfile(trace) else 0
        room = size and shutil.disk_usage(tempfile.gettempdir()).free >= SPILL_PER_BYTE * size
    except (OSError, ValueError):  # the reader says what is wrong with the path
        return False
    return bool(size >= BY_PROCESS_BYTES and room and several_processes(trace))


def _analyze_by_process(path: Path, rules: RuleSet | None, scope: Scope
                        ) -> TraceAnalysis | None:  # fmt: skip
    """:func:`nsysmoe.by_process.analyze_by_process` of a file read one process at a time,
    its processes' rows waiting in a temporary folder (removed afterwards) meanwhile; None
    where the folder fills up (or may hold no file that big): the caller reads it whole."""
    try:
        with tempfile.TemporaryDirectory(prefix="nsysmoe-processes-") as spill:
            return analyze_by_process(load_by_process(path, spill), rules, scope)
    except OSError as exc:
        if not _out_of_room(exc):
            raise
    return None


def _out_of_room(exc: OSError) -> bool:
    """A write refused for want of room: disk full, quota, file size limit (polars says so
    in its message, with no errno)."""
    codes = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return exc.errno in codes or any(f"(os error {c})" in str(exc) for c in codes)


def dependency_graph(trace: TraceLike, *, rules: RuleSet | None = None,
                     cache_dir: str | Path | None = None) -> DepGraph:
    """A trace's dependency graph (:mod:`nsysmoe.depgraph`, docs/critical-path.md), for a
    notebook's own questions: ``.nodes()`` (every GPU op and CUDA call: kind, pid, start,
    end, category, its row in its table) and ``.edges()`` (between events: node n's start is
    event 2n, its end 2n+1; kind and weight) as polars frames; ``.edge_counts``,
    ``.dropped``, ``.unmatched_waits``. The whole trace, without the op budget an analysis'
    critical path keeps to."""
    source, steps = pipeline.prepare_with_steps(_trace(trace, cache_dir), rules)
    return pipeline.dependency_graph(source, steps)


def _rules_key(rules: RuleSet | None) -> str:
    """The rules' content (every rule and where they came from), not just a path."""
    return repr(rules or default_rules())


def _through(cache_dir: Path, name: str | None, compute: Callable[[], R]) -> R:
    result, note = result_cache.through(cache_dir, name, compute)
    if note:  # the cache never stops an analysis; the CLI shows this after the report
        warnings.warn(note, cache.CacheWarning, stacklevel=3)
    return result


def compare(
    off: TraceLike,
    on: TraceLike,
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    cache_dir: str | Path | None = None,
    vary: tuple[str, ...] = (),
    labels: tuple[str, str] | None = None,
    detached: bool = False,
    logs: tuple[LogLike, LogLike] | None = None,
    log_window: tuple[int, int] | None = None,
    equivalent: bool = False,
    loss_tolerance: float | None = None,
) -> Comparison | AcceptedComparison:
    """A/B of two traces over the steady window common to both (see :mod:`nsysmoe.ab`); with
    ``scope.rank``, of that rank's GPUs on each side. ``vary``: the variable under test
    (``--vary`` names); ``labels``: names of the sides (default: from the variable);
    ``detached`` (and ``cache_dir``): as in :func:`analyze`, the comparison keyed on both sides.
    ``logs`` (the unprofiled training logs of off, then on): the A/B with its acceptance
    (:class:`~nsysmoe.acceptance.AcceptedComparison`, measured by :func:`accept` with
    ``log_window``, ``equivalent`` and ``loss_tolerance``, the sides named as the comparison
    names them); exactly two, checked before the traces are read."""
    if logs is not None:
        if isinstance(logs, str | Path | TrainingLog) or len(logs) != 2:
            given = 1 if isinstance(logs, str | Path | TrainingLog) else len(logs)
            raise NsysmoeError(f"logs: {plural(given, 'training log')} given; an A/B takes two "
                               "(off, then on); accept(logs) measures one or a ladder")
        c = compare(off, on, rules=rules, scope=scope, cache_dir=cache_dir, vary=vary,
                    labels=labels, detached=detached)  # fmt: skip
        assert isinstance(c, Comparison)
        acc = accept(list(logs), labels=(c.off.name, c.on.name), window=log_window,
                     equivalent=equivalent, loss_tolerance=loss_tolerance)  # fmt: skip
        return with_acceptance(c, acc)

    def compute() -> Comparison:
        c = _compare(off, on, rules=rules, scope=scope, cache_dir=cache_dir, vary=vary,
                     labels=labels)  # fmt: skip
        return _detach(c) if detached else c

    if not detached or cache_dir is None or isinstance(off, Trace) or isinstance(on, Trace):
        return compute()
    name = result_cache.key("compare", [off, on], _rules_key(rules), repr(scope), tuple(vary),
                            labels)  # fmt: skip
    return _through(Path(cache_dir), name, compute)


def read_log(path: str | Path) -> TrainingLog:
    """A training log (Megatron-LM / Megatron-Bridge console output, a Megatron metrics JSON,
    torchtitan step lines, or a CSV/JSONL of ``step, step_time_s``) as one row per logged sample
    (``.table``, :data:`~nsysmoe.io.logs.LOG_SCHEMA`), with what the reader skipped, counted."""
    return logs_io.read_log(path)


def accept(
    logs: Sequence[LogLike],
    *,
    labels: Sequence[str] | None = None,
    window: tuple[int, int] | None = None,
    equivalent: bool = False,
    loss_tolerance: float | None = None,
) -> Acceptance:
    """The unprofiled acceptance of one log (its summary), two (an A/B: off, then on) or more
    (a ladder: each rung against the one before and against the base): each log's steady
    window (``window``: iterations declared, first and last; default: warm-up detected as for
    traces), medians with bootstrap CIs, health, and the changes with their verdicts
    (:mod:`nsysmoe.measure.acceptance`). ``equivalent``: the change is declared
    training-equivalent, so losses are compared (within ``loss_tolerance``, relative).
    ``labels``: the sides' names (default: the file names, made distinct). A single path or
    string where a sequence is due is refused (it is not split into characters)."""
    if isinstance(logs, str | Path | TrainingLog):
        raise NsysmoeError(f"logs: a list of training logs, one or more ([{str(logs)[:60]!r}]), "
                           "not a single path")  # fmt: skip
    if isinstance(labels, str):
        raise NsysmoeError(f"labels: a list of names, one a log ({labels[:60]!r} is one string; "
                           "pass [name, ...])")  # fmt: skip
    read = [log if isinstance(log, TrainingLog) else read_log(log) for log in logs]
    if not read:
        raise NsysmoeError("no training log given; pass one log, two (off, on) or more")
    names = list(labels) if labels is not None else log_labels([r.path for r in read])
    if len(names) != len(read):
        raise NsysmoeError(f"{plural(len(names), 'label')} for {plural(len(read), 'log')}; "
                           "give one label a log")  # fmt: skip
    tolerance = {} if loss_tolerance is None else {"loss_tolerance": loss_tolerance}
    return measure_acceptance.accept(read, names, window=window, equivalent=equivalent,
                                     **tolerance)  # fmt: skip


def log_labels(paths: Sequence[str]) -> list[str]:
    """Names for logs: the file names, with as many parent folders as makes them distinct
    (:func:`~nsysmoe.renderers.names.distinct_tails`)."""
    return distinct_tails(paths)


def _compare(
    off: TraceLike, on: TraceLike, *, rules: RuleSet | None, scope: Scope,
    cache_dir: str | Path | None, vary: tuple[str, ...], labels: tuple[str, str] | None,
) -> Comparison:  # fmt: skip
    def prepared(trace: Trace) -> tuple[ClassifiedTrace, Steps]:
        src = pipeline.prepare(trace, rules=rules, rank=scope.rank)
        return src, detect_steps(src.trace, scope.step_pattern)

    def measure(src: ClassifiedTrace, steps: Steps, choice: WindowChoice, label: str
                ) -> tuple[TraceAnalysis, Side]:  # fmt: skip
        analysis = pipeline.analyze_trace(src, scope=scope, steps=steps, choice=choice)
        return analysis, measure_side(label, analysis)

    # both files read first (a file that cannot be read is said before any work on the other),
    # then each side classified and measured in a thread of its own (readers and polars release
    # the GIL), its side facts taken as soon as its analysis is done; the two meet only where
    # they must: the common window, and the comparison
    with ThreadPoolExecutor(max_workers=2) as pool:
        traces = list(pool.map(partial(_trace, cache_dir=cache_dir), (off, on)))
        src, steps = zip(*pool.map(prepared, traces), strict=True)
        del traces
        choices = pipeline.common_windows((src[0], src[1]), (steps[0], steps[1]), scope)
        (a, side_a), (b, side_b) = pool.map(measure, src, steps, choices, ("off", "on"))
    return ab.compare(a, b, steps=(steps[0], steps[1]), vary=tuple(vary), labels=labels,
                      sides=(side_a, side_b))


def _detach(c: Comparison) -> Comparison:
    """``c`` without its sides' classified traces and projected range instances (to travel
    between processes, or be cached: only the per-rank values read them, computed already)."""
    sides = {s: replace(getattr(c, s), analysis=replace(getattr(c, s).analysis, source=None),
                        projected=pl.DataFrame())
             for s in ("off", "on")}  # fmt: skip
    return replace(c, **sides)


def analyze_many(
    paths: list[str],
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    executor: Executor | None = None,
    cache_dir: str | Path | None = None,
    align: bool = False,
) -> RanksAnalysis:
    """Analyse per-rank files in parallel (processes or Dask), each over ``scope`` (default:
    its steady iterations); bad files are reported, not fatal. Files are put on one clock by
    their session starts; with ``align``, each rank's clock is also corrected by its
    collectives' end times (``--align collectives``)."""
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


def sweep(
    settings: Sequence[TraceLike | Sequence[TraceLike]],
    *,
    vary: str,
    labels: Sequence[str] | None = None,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
    cache_dir: str | Path | None = None,
) -> Sweep:
    """N settings of one knob side by side (:mod:`nsysmoe.ab.sweep`): each setting one trace,
    or one run's rank files — a folder or glob of them, or a list (taken in sorted order) —
    each file over its own steady window, the first setting the base; ``vary``: the knob (a
    ``--vary`` name: a contract setting such as ``moe_deepep_num_sms``, an option, an
    environment variable); ``labels``: the settings' names (default: the knob's value in
    each). Files two at a time in threads; each analysis lets go of its trace once its facts
    are taken."""
    given = None if labels is None else tuple(labels)
    ab_sweep.check_settings(len(settings), given)
    runs = [_rank_files(s) for s in settings]
    sources = [os.fspath(s) if isinstance(s, (str, os.PathLike)) else None for s in settings]

    def one(path: TraceLike) -> Side:
        return ab_sweep.detached_side(analyze(path, rules=rules, scope=scope,
                                              cache_dir=cache_dir))  # fmt: skip

    with ThreadPoolExecutor(max_workers=2) as pool:
        sides = iter(pool.map(one, [p for run in runs for p in run]))
    return ab_sweep.sweep([[next(sides) for _ in run] for run in runs], vary, given, sources)


def _rank_files(setting: TraceLike | Sequence[TraceLike]) -> list[TraceLike]:
    """A sweep setting's files: a folder (or glob) of rank files found in it, a list of them,
    each in the order pairs are made in (by name, as a folder lists them); one trace alone. The
    same file twice is a usage error."""
    if isinstance(setting, (str, os.PathLike)):
        files: list[TraceLike] = list(expand(os.fspath(setting)))
    elif isinstance(setting, (list, tuple)):
        files = sorted(setting, key=_file_name)
    else:
        files = [setting]  # type: ignore[list-item]
    if not files:
        raise UsageError(f"sweep setting {setting!s}: no trace file in it")
    names = [_file_name(f) for f in files]
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"sweep setting: {twice} given twice; each rank file once")
    return files


def _file_name(trace: TraceLike) -> str:
    """A path's text, or an in-memory trace's path (its file's)."""
    return os.fspath(trace) if isinstance(trace, (str, os.PathLike)) else str(trace.path)


def _analyze_path(
    path: str, *, rules: RuleSet | None, scope: Scope, cache_dir: str | Path | None
) -> TraceAnalysis:
    """One rank in a worker, detached from its trace so only the figures travel back."""
    return analyze(path, rules=rules, scope=scope, cache_dir=cache_dir, detached=True)


def _compare_paths(
    off: str, on: str, *, rules: RuleSet | None, scope: Scope, cache_dir: str | Path | None,
    vary: tuple[str, ...] = (), labels: tuple[str, str] | None = None,
) -> Comparison:
    return compare(off, on, rules=rules, scope=scope, cache_dir=cache_dir, vary=vary,
                   labels=labels, detached=True)  # fmt: skip


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
    SQLite exports (``kind="nsys"``) or the same run as PyTorch profiler JSON (``"kineto"``);
    ``"logs"``: the unprofiled runs' training logs (synthetic, Megatron-LM's console format)."""
    base = resources.files("nsysmoe") / "examples"
    return [Path(str(base / name)) for name in EXAMPLES[kind]]


def figure_jobs(result: object) -> list[FigureJob]:
    """The figures that apply to ``result``, as (file stem, maker) pairs; stems are unique, and
    each figure is drawn (its lanes measured) only when its maker is called:

    * ``timeline-<trace>``: one iteration of each trace, per GPU (in an A/B, titled with the
      side's name);
    * ``breakdown``, ``channels``: an A/B's time breakdown and exposed/hidden time per channel;
    * ``ranks``: communication per rank, for a run of at least two ranks (GPUs), or a trace of
      two or more that ran communication. In an A/B, ``ranks-off`` / ``ranks-on``: one chart per
      side that has two or more, of that side's ranks only, titled with its name. Off and on
      are different runs, not peers, so their GPUs never share a chart (no straggler could be
      named across them), and an A/B of two single-GPU traces has no per-rank chart at all;
    * ``sweep``: a sweep's settings, each step split into compute, exposed communication and
      idle, with the SMs the dispatcher held;
    * ``waits``: exposed wait per rank and channel where collectives matched across ranks
      (in an A/B, ``waits-off`` / ``waits-on``, per side, for the same reason, titled with the
      side's name).

    An A/B of many-rank runs (:class:`~nsysmoe.results.RanksComparison`) has no figures yet.
    """
    jobs: list[FigureJob] = []
    if isinstance(result, AcceptedComparison):  # the logs draw nothing yet: the profile's
        return figure_jobs(result.comparison)
    if isinstance(result, TraceAnalysis):
        jobs += _timeline_jobs([(result, "")])
        jobs += _run_jobs(result, "", "")
    elif isinstance(result, Comparison):
        sides = (result.off, result.on)
        names = side_names(sides)
        jobs += _timeline_jobs([(s.analysis, n) for s, n in zip(sides, names, strict=True)])
        parts = {s.label: lanes.breakdown(s.analysis.totals) for s in sides}
        jobs.append(("breakdown", partial(breakdown_figure, result, parts)))
        jobs.append(("channels", partial(channels_figure, result)))
        for side, name in zip(sides, names, strict=True):
            jobs += _run_jobs(side.analysis, f"-{side.label}", name)
    elif isinstance(result, Sweep):
        jobs.append(("sweep", partial(sweep_figure, result)))
    elif isinstance(result, RanksAnalysis):
        if len(result.ranks) > 1:
            jobs.append(("ranks", partial(ranks_figure, result)))
        if result.collectives.matched:
            jobs.append(("waits", partial(waits_figure, result.collectives)))
    return unique_stems(jobs)


def _timeline_jobs(analyses: list[tuple[TraceAnalysis, str]]) -> list[FigureJob]:
    """A timeline per trace still holding its source; one trace on both sides of an A/B (the
    same file) is drawn once, titled with both names."""
    names: dict[str, list[str]] = {}
    first: dict[str, TraceAnalysis] = {}
    for a, name in analyses:
        if a.source is not None:
            first.setdefault(a.path, a)
            names.setdefault(a.path, []).append(name)
    return [(f"timeline-{slug(path)}",
             partial(_timeline_of, a, " and ".join(n for n in names[path] if n)))
            for path, a in first.items()]  # fmt: skip


def _timeline_of(a: TraceAnalysis, side: str) -> Figure:
    return timeline_figure(lanes.timeline(a), side)


def _ranks_of(a: TraceAnalysis, side: str) -> Figure:
    return ranks_figure(run_analysis([a]), side)


def _run_jobs(a: TraceAnalysis, suffix: str, name: str) -> list[FigureJob]:
    """The per-rank chart of one trace's ranks (GPUs), where it has two or more and some ran
    communication (a chart of zeros says nothing), and their wait heat map: the figure data (a
    ranks analysis of this trace alone) is computed when drawn."""
    jobs: list[FigureJob] = []
    if len(a.gpus) > 1 and a.totals.comm_ns > 0:
        jobs.append((f"ranks{suffix}", partial(_ranks_of, a, name)))
    if a.collectives.matched:
        jobs.append((f"waits{suffix}", partial(waits_figure, a.collectives, name)))
    return jobs


def plot(result: object, outdir: str | Path) -> list[Path]:
    """Write every figure that applies to ``result`` (:func:`figure_jobs`) into ``outdir`` as
    PNG and SVG, one figure in memory at a time (each freed once written; pyplot never holds
    one, so a loop over many results leaks none)."""
    return write_figures(Path(outdir), figure_jobs(result))


def figures(result: object) -> dict[str, Figure]:
    """Every figure that applies to ``result``, drawn, by stem (:func:`figure_jobs`:
    ``breakdown``, ``ranks``, ``timeline-<trace>``, …): matplotlib figures (not pyplot's, so
    nothing to close) that display inline in Jupyter as PNG without ``%matplotlib inline``, or
    to save yourself."""
    _show_in_jupyter()
    return {stem: make() for stem, make in figure_jobs(result)}


def figure_svgs(result: object) -> dict[str, str]:
    """Every figure that applies to ``result``, drawn in memory as SVG text, by the stems of
    :func:`figure_jobs` (in its order): each text starts at its ``<svg>`` root element (no XML
    prolog, no creation date), ready to inline in an HTML page. One figure is held at a time,
    freed once written."""
    svgs = {}
    for stem, make in figure_jobs(result):
        fig = make()
        svgs[stem] = svg_text(fig)
        fig.clear()
    return svgs


def _show_in_jupyter() -> None:
    """In Jupyter, results display as HTML and matplotlib figures as PNG (IPython's formatters,
    so results stay plain data and no ``%matplotlib inline`` is needed; a PNG formatter already
    set for figures, e.g. by ``%matplotlib inline``, is kept)."""
    import sys

    if "IPython" not in sys.modules:
        return
    shell = sys.modules["IPython"].get_ipython()
    if shell is None:
        return
    formatters = shell.display_formatter.formatters
    html = formatters["text/html"]
    for kind in (TraceAnalysis, Comparison, RanksAnalysis, RanksComparison, CompatRun,
                 Acceptance, AcceptedComparison):  # fmt: skip
        html.for_type(kind, lambda result: render(result, "html"))
    png = formatters["image/png"]
    figure_type = ("matplotlib.figure", "Figure")
    if figure_type not in png.deferred_printers and not any(
        (t.__module__, t.__name__) == figure_type for t in png.type_printers
    ):
        png.for_type_by_name(*figure_type, png_bytes)


_show_in_jupyter()


__all__ = [
    "Executor", "analyze", "analyze_many", "compare", "compare_many", "compat",
    "dependency_graph", "example_paths",
    "figure_jobs", "figure_svgs", "figures", "kernel_summary", "load", "plot", "render",
]  # fmt: skip
