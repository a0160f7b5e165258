"""One trace in, one :class:`~nsysmoe.results.TraceAnalysis` out: classify once, choose the
window (:mod:`nsysmoe.measure.window`), measure.

Three stages: the full measure of a trace (:func:`analyze_trace`: every per-GPU, per-channel,
per-iteration and NVTX table, summed up by :func:`_summarize`), its detail stage
(:func:`_with_detail`: phases, idle gaps, collectives), and the restriction of an analysis to
one process (:func:`analyze_process`: its rows of those tables, filtered, summed the same way;
no detail). The classified trace travels with the analysis (``analysis.source``), so the A/B's
side facts and the figures read the same classes the numbers came from, and nothing classifies
twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from nsysmoe.classify import RuleSet, classify_trace, default_rules
from nsysmoe.depgraph.build import DepGraph, build_graph
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure import walls
from nsysmoe.measure.channels import (
    CHANNEL_SCHEMA,
    channel_iterations,
    channel_table,
    channel_totals,
    coded_kernels,
    on_the_table,
    process_channel_iterations,
    with_shares,
    with_step_bounds,
)
from nsysmoe.measure.collectives import (
    ARRIVAL_SCHEMA,
    arrivals,
    clock_offset,
    match,
    summarize,
    with_rank,
)
from nsysmoe.measure.critical_path import critical_path
from nsysmoe.measure.dispatcher import dispatcher_of
from nsysmoe.measure.graphs import combined, graph_summary
from nsysmoe.measure.idle import (
    GAP_SCHEMA,
    OPS_SCHEMA,
    gaps,
    gaps_in_window,
    idle_split_per_gpu,
    judged_per_iteration,
    largest_gaps,
    with_other,
)
from nsysmoe.measure.iterations import iteration_table, process_iterations
from nsysmoe.measure.kernels import NO_RULE, busiest_unclassified
from nsysmoe.measure.launch import contract_config
from nsysmoe.measure.launch_calls import (
    Launches,
    launch_table,
    launches_of,
    only_processes,
    remember,
)
from nsysmoe.measure.nvtx import process_nvtx_totals, totals_of
from nsysmoe.measure.overlap import BUSY_SCHEMA, COMM, per_gpu_and_busy, totals
from nsysmoe.measure.phases import (
    LAYER_SCHEMA,
    PHASE_SCHEMA,
    layer_totals,
    phase_pattern,
    phase_tables,
    phase_totals,
)
from nsysmoe.measure.sm_budget import SmPart, finished, measure_sm, merged_sm
from nsysmoe.measure.steps import detect_steps, process_windows
from nsysmoe.measure.validity import caveats
from nsysmoe.measure.window import choose, choose_common
from nsysmoe.model import STEADY, ClassifiedTrace, Scope, Trace, Window, WindowChoice
from nsysmoe.results import (
    Collectives,
    CriticalPath,
    Graphs,
    RankChoice,
    Steps,
    TraceAnalysis,
    WallVerdict,
)


def prepare(trace: Trace, rules: RuleSet | None = None, rank: int | None = None) -> ClassifiedTrace:
    """The trace with its kernels classified (default rules unless given): the only place
    analyses classify; with ``rank``, the trace of that rank's process only (:func:`rank_pid`),
    so everything after measures only its GPUs."""
    if rank is not None:
        trace = trace.only_processes([rank_pid(trace, rank)])
    return classify_trace(trace, rules or default_rules())


def prepare_with_steps(trace: Trace, rules: RuleSet | None = None, scope: Scope = STEADY
                       ) -> tuple[ClassifiedTrace, Steps | None]:  # fmt: skip
    """:func:`prepare` and the iterations :func:`analyze_trace` would detect (none for a trace
    without kernels: the analysis then says so), side by side: classification reads the kernel
    names, step detection the NVTX ranges and the launch join, so the two share the cores."""
    if scope.rank is not None:
        trace = trace.only_processes([rank_pid(trace, scope.rank)])
    if trace.kernels.is_empty():
        return prepare(trace, rules), None
    if scope.critical_path:  # the graph's compiled passes load meanwhile (~0.5 s of imports)
        threading.Thread(target=warm_graph, daemon=True).start()
    with ThreadPoolExecutor(max_workers=1) as side:
        steps = side.submit(detect_steps, trace, scope.step_pattern)
        source = prepare(trace, rules)
        return source, steps.result()


def warm_graph() -> None:
    """Load the graph's compiled passes ahead of use; a failure here is left to the analysis
    (which meets it again where it can say so), never printed from this thread."""
    try:
        from nsysmoe.depgraph import core

        core.warm()
    except Exception:  # a warm-up only
        return


def rank_pid(trace: Trace, rank: int) -> int:
    """The process ``--rank`` names, among those that ran GPU work: the one whose pid is
    ``rank`` (a PyTorch profiler trace's pid is its rank); else, in an nsys export (which
    records no rank), the ``rank``-th process by sorted pid when ``rank`` < their number."""
    pids = sorted({pid for pid, _ in trace.gpu_keys})
    if rank in pids:
        return rank
    by_position = trace.source_format != "kineto-json"
    if by_position and 0 <= rank < len(pids):
        return pids[rank]
    shown = ", ".join(map(str, pids[:16])) + (", …" if len(pids) > 16 else "")
    if not pids:
        have = "no process ran GPU work"
    elif by_position:
        have = (f"ranks here: pid {shown}, or 0–{len(pids) - 1} for the processes by sorted "
                "pid" if len(pids) > 1 else f"ranks here: pid {shown}, or 0")  # fmt: skip
    else:
        have = f"ranks here: {shown} (the trace's distributedInfo.rank, else its OS pid)"
    raise NsysmoeError(f"{trace.path}: no rank {rank} ({have})")


def restrict(source: ClassifiedTrace, pids: list[int]) -> ClassifiedTrace:
    """A classified trace of these processes only (no kernel classified again, no launch
    call joined again: the restricted trace takes its share of the whole one's join)."""
    trace = source.trace.only_processes(pids)
    remember(trace, only_processes(launches_of(source.trace), pids))
    return ClassifiedTrace(trace, source.kernels.filter(pl.col("pid").is_in(pids)),
                           source.rules_source)  # fmt: skip


def origin_of(source: ClassifiedTrace) -> int:
    """The trace's first GPU activity (a relative time window counts from it); a trace without
    kernels has nothing to measure."""
    trace = source.trace
    if trace.kernels.is_empty():
        raise NsysmoeError(f"{trace.path}: the export holds no CUDA kernels; nothing to measure")
    return int(pl.concat([source.kernels["start"], trace.memops["start"]]).min())


def analyze_trace(
    source: ClassifiedTrace,
    *,
    scope: Scope = STEADY,
    steps: Steps | None = None,
    choice: WindowChoice | None = None,
) -> TraceAnalysis:
    """Measure every GPU of a classified trace over ``scope``'s window; ``steps`` and ``choice``
    (the window chosen: :func:`common_windows` for an A/B) may be passed in when known.

    The NVTX-side work (range totals, OOM markers, phase tables: millions of range names) and
    the cross-GPU matching run in a second thread while this one measures the GPU timelines:
    polars and numpy release the GIL, and each job reads only the immutable trace."""
    origin = origin_of(source)
    steps = detect_steps(source.trace, scope.step_pattern) if steps is None else steps
    choice = choose(steps, scope.window, origin) if choice is None else choice
    with ThreadPoolExecutor(max_workers=1) as side:
        analysis = replace(_measure_on(side, source, steps, choice, scope), source=source)
    pids = analysis.gpus["pid"].unique()  # under --rank, the one process prepare() kept
    if scope.rank is None or len(pids) != 1:
        return analysis
    return replace(analysis, rank=RankChoice(scope.rank, int(pids[0])))


def common_windows(sources: tuple[ClassifiedTrace, ClassifiedTrace], steps: tuple[Steps, Steps],
                   scope: Scope) -> tuple[WindowChoice, WindowChoice]:  # fmt: skip
    """An A/B's windows (:func:`nsysmoe.measure.window.choose_common`)."""
    origins = origin_of(sources[0]), origin_of(sources[1])
    return choose_common(steps[0], steps[1], scope.window, origins)


def analyze_process(analysis: TraceAnalysis, pid: int, *, steps: Steps) -> TraceAnalysis:
    """One process of an analysis, over the analysis' own windows and iterations: its rows of
    the per-GPU and per-process tables (each row is one GPU's or one process's alone: nothing
    on the timeline is measured again), and what those rows add up to — an A/B's per-rank
    values. ``steps``: those the analysis was measured with. No detail tables (phases, idle
    gaps, collectives): no per-rank row reads them."""
    source = restrict(analysis.classified, [pid])
    trace = source.trace
    if trace.kernels.is_empty():
        raise NsysmoeError(f"{analysis.path}: process {pid} ran no CUDA kernels")
    _check_window(source, analysis.window)
    pids = set(trace.gpus["pid"].to_list())
    mine = pl.col("pid").is_in(list(pids))
    tables = _Tables(
        gpus=analysis.gpus.filter(mine),
        classes=analysis.classes.filter(mine),
        channels=analysis.channels.filter(mine).select(list(CHANNEL_SCHEMA)),
        nvtx_by_process=analysis.process_nvtx.filter(mine),
        markers={p: n for p, n in analysis.oom_markers.items() if p in pids},
        by_process=analysis.process_iterations.filter(mine),
        channels_by_process=analysis.process_iteration_channels.filter(mine),
    )  # fmt: skip
    mine_steps = Steps(steps.table.filter(pl.col("pid") == pid), steps.pattern, steps.timeline,
                       steps.warnings)  # fmt: skip
    kept = sorted(analysis.iterations["step"].to_list())
    window = analysis.window
    in_window, seen = _window_kernels(source.kernels, window)
    part = Part(tables, pl.DataFrame(), pl.DataFrame(), pl.DataFrame(), (pl.DataFrame(),) * 2,
                in_window, seen, graph_summary(trace, source.kernels, window),
                peer_copies(window.select(trace.memops)))  # fmt: skip
    whole = Whole(trace, source.rules_source, origin_of(source),
                  source.kernels.select("pid", "device").unique())  # fmt: skip
    return replace(_summarize(whole, mine_steps, analysis.window_choice, kept, part),
                   source=source)  # fmt: skip


@dataclass(frozen=True)
class _Tables:
    """A trace's measured per-GPU and per-process tables, before they are summed up."""

    gpus: pl.DataFrame  # per GPU, with its name and idle split
    classes: pl.DataFrame
    channels: pl.DataFrame
    nvtx_by_process: pl.DataFrame
    markers: dict[int, int]
    by_process: pl.DataFrame  # per (pid, step)
    channels_by_process: pl.DataFrame  # per (pid, step, channel)


def _check_window(source: ClassifiedTrace, window: Window) -> None:
    if window.select(source.kernels.select("start", "end")).is_empty():
        kernels = source.trace.kernels
        raise no_work(source.trace.path, window, kernels["start"].min(), kernels["end"].max())


def no_work(path: str, window: Window, lo: object, hi: object) -> NsysmoeError:
    """The error of a window without GPU work (``lo``–``hi``: where the kernels are)."""
    return NsysmoeError(
        f"{path}: no GPU work in the window [{window.start_ns}, {window.end_ns}) ns; widen "
        f"--window (GPU work spans {lo}–{hi} ns)"
    )


def _window_kernels(kernels: pl.DataFrame, window: Window) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The window's kernels that are read again, only their columns: the communication ones
    (matched across GPUs) and those no rule named (the audit table); of the rest, only which
    subclasses and names occur (the dispatcher), not a copy of a million rows."""
    window_kernels = window.select(kernels.lazy().select(
        "pid", "device", "start", "end", "name", "class", "subclass", "channel"))  # fmt: skip
    in_window = window_kernels.filter((pl.col("class") == COMM) | NO_RULE).collect()
    seen = window_kernels.select(pl.col("subclass", "name").unique().implode()).collect()
    return in_window, seen


@dataclass(frozen=True)
class Part:
    """One process's measured GPU timelines (or the whole trace's, measured at once): its rows
    of every per-GPU and per-process table and its share of the detail and whole-trace facts.
    Concatenated over processes in pid order (:func:`merged`), each table is the one the whole
    trace gives: every row is one GPU's or one process's alone."""

    tables: _Tables
    busy: pl.DataFrame  # per GPU, ⋃compute ∩ ⋃comm
    judged: pl.DataFrame  # per step: host and dependency idle
    idle_gaps: pl.DataFrame
    phases: tuple[pl.DataFrame, pl.DataFrame]  # phase rows, layer rows
    in_window: pl.DataFrame  # :func:`_window_kernels`
    seen: pl.DataFrame
    graphs: Graphs
    peer_copies: tuple[int, int]  # peer-to-peer copies in the window: count, ns summed
    sm: SmPart = field(default_factory=SmPart.none)  # the SM budget and inflation durations


def measure_part(side: Executor, source: ClassifiedTrace, steps: Steps, choice: WindowChoice,
                 scope: Scope, *, pid: int | None = None, unique: bool | None = None,
                 cross: Callable[[pl.DataFrame, pl.DataFrame, int], None] | None = None
                 ) -> Part:  # fmt: skip
    """The GPU timelines of ``source`` (the whole trace, or process ``pid``'s alone, measured
    in its own iterations of ``steps``), on both threads: the NVTX-side work (range totals, OOM
    markers, phase tables) and the channel sweeps per iteration on ``side``, the unions, idle
    gaps and channel table on this one. ``unique``:
    whether the whole trace's launch join is one to one (a process's alone may be; default:
    this source's). ``cross(in_window, busy, n_gpus)`` is called once they are known, so the caller
    can start the cross-GPU jobs (collectives, critical path) on ``side`` while this thread
    measures the idle gaps (started first, beside the reader's tables, it added a quarter to
    the bench export's peak memory); its third argument is the number of GPUs measured."""
    trace, kernels, window = source.trace, source.kernels, choice.window
    kept = list(choice.kept)
    if pid is not None:
        steps = replace(steps, table=steps.table.filter(pl.col("pid") == pid))
    launches = _launches(source)
    unique = launches.unique if unique is None else unique
    nvtx_job = side.submit(process_nvtx_totals, trace.nvtx, choice.cpu_window,
                           normalize=not scope.raw_nvtx)  # fmt: skip
    markers_job = side.submit(walls.oom_markers, trace.nvtx)
    launched = launches.kernels.select("api_tid", "api_start", "api_end")
    phases_job = side.submit(phase_tables, kernels, trace.runtime, trace.nvtx, window,
                             phase_pattern(scope.phase),
                             launched=launched if unique else None)  # fmt: skip
    in_window, seen = _window_kernels(kernels, window)
    windows = process_windows(steps, kept)  # each process's own iteration windows
    # the kernels as both channel sweeps read them, coded once, on the side thread; the future
    # is bound now: this thread lets go of its name once its own sweep is done
    coded_job = side.submit(coded_kernels, kernels)
    pci_job = side.submit(lambda job: process_channel_iterations(job.result(), windows),
                          coded_job)  # fmt: skip
    gpus, classes, busy = per_gpu_and_busy(kernels, trace.memops, window)
    if cross is not None:
        cross(in_window, busy, len(gpus))
    ops = launches.ops.select(list(OPS_SCHEMA))
    window_ops = window.select(ops.lazy())  # read only per GPU (its span): no copy of the ops
    timeline_gaps = gaps(ops, launch=True)  # the whole timeline's gaps, the window's cut
    window_gaps = (gaps_in_window(timeline_gaps, window_ops) if window.bounded
                   else timeline_gaps.drop("api_start"))  # fmt: skip
    timeline_gaps = timeline_gaps.drop("api_start")  # only the window's cut needed it
    split = idle_split_per_gpu(window_ops, window_gaps).drop("idle_ns")
    gpus = (
        gpus.join(trace.gpus.select("pid", "device", "gpu_name"), on=["pid", "device"],
                  how="left")
        .select("pid", "device", "gpu_name", pl.exclude("pid", "device", "gpu_name"))
        .join(split, on=["pid", "device"], how="left", maintain_order="left")
    )  # fmt: skip
    # the detail the gap tables give, taken now: a million gaps each are not kept
    judged = judged_per_iteration(ops, windows, timeline_gaps)
    idle_gaps = largest_gaps(window_ops, trace.nvtx, gap_table=window_gaps)
    del timeline_gaps, window_gaps
    channels = channel_table(coded_job.result(), window)
    del coded_job  # its arrays go once the side thread's sweep is done with them
    tables = _Tables(gpus, classes, channels, nvtx_job.result(), markers_job.result(),
                     process_iterations(kernels, trace.memops, steps, kept), pci_job.result())
    # here, not queued on the side thread: that one is the longer (NVTX, then the cross-GPU
    # jobs), and this one would otherwise wait for it
    sm = measure_sm(kernels, trace.gpus, window)
    return Part(tables, busy, judged, idle_gaps, phases_job.result(), in_window, seen,
                graph_summary(trace, kernels, window), peer_copies(window.select(trace.memops)),
                sm)


def merged(parts: list[Part], recorded: dict[str, str]) -> Part:
    """Processes' parts (in pid order) as the whole trace's (``recorded``: its graph trace
    options)."""
    if len(parts) == 1:
        return parts[0]

    def cat(get: Callable[[Part], pl.DataFrame]) -> pl.DataFrame:
        # every column materialised, as in a table of all GPUs at once: one-row parts of
        # equal values stack into a constant ("scalar") column, which polars divides by as a
        # multiplication by its reciprocal (a share of the span moved in the 16th digit)
        df = pl.concat([get(p) for p in parts], rechunk=True)
        return pl.DataFrame([df.to_series(i) for i in range(df.width)])

    tables = _Tables(*(cat(lambda p, f=f: getattr(p.tables, f))  # type: ignore[misc]
                       for f in ("gpus", "classes", "channels", "nvtx_by_process")),
                     {k: v for p in parts for k, v in p.tables.markers.items()},
                     cat(lambda p: p.tables.by_process),
                     cat(lambda p: p.tables.channels_by_process))  # fmt: skip
    judged = cat(lambda p: p.judged)
    judged = judged.group_by("step").agg(pl.exclude("step").sum()) if len(judged) else judged
    seen = pl.DataFrame({c: [pl.concat([p.seen[c].explode() for p in parts]).unique()]
                         for c in ("subclass", "name")})  # fmt: skip
    return Part(
        tables, cat(lambda p: p.busy), judged.select(parts[0].judged.columns),
        cat(lambda p: p.idle_gaps),
        (cat(lambda p: p.phases[0]), cat(lambda p: p.phases[1])),
        cat(lambda p: p.in_window), seen,
        replace(combined([p.graphs for p in parts]), recorded=dict(recorded)),
        (sum(p.peer_copies[0] for p in parts), sum(p.peer_copies[1] for p in parts)),
        merged_sm([p.sm for p in parts]),
    )  # fmt: skip


def _measure_on(side: Executor, source: ClassifiedTrace, steps: Steps, choice: WindowChoice,
                scope: Scope) -> TraceAnalysis:  # fmt: skip
    """The full measure (:func:`measure_part` of the whole trace, then :func:`finish`). The
    cross-GPU jobs go to the side thread once the GPUs' unions are known; the critical path is
    its last job: it starts once the side's other jobs (and their working memory) are done,
    while this thread measures the idle gaps."""
    _check_window(source, choice.window)
    kept = list(choice.kept)
    windows = process_windows(steps, kept)  # each process's own iteration windows
    jobs: list[Future] = []

    def cross(in_window: pl.DataFrame, busy: pl.DataFrame, n_gpus: int) -> None:
        trace = source.trace
        collectives_job = side.submit(collectives_of, in_window, windows, busy,
                                      Path(trace.path).name, n_gpus)  # fmt: skip
        jobs.append(collectives_job)
        walk = scope.critical_path and choice.timeline == "gpu"  # GPU ops bound a path
        if walk:
            jobs.append(side.submit(_critical_path, source, windows, kept, collectives_job,
                                    scope.what_if))  # fmt: skip

    part = measure_part(side, source, steps, choice, scope, cross=cross)
    collectives = jobs[0].result()
    path = jobs[1].result() if len(jobs) > 1 else None
    facts = Whole(source.trace, source.rules_source, origin_of(source),
                  source.kernels.select("pid", "device").unique())  # fmt: skip
    return finish(facts, steps, choice, scope, part, collectives, path)


@dataclass(frozen=True)
class Whole:
    """What the summing-up reads of the whole trace besides the parts: its small tables and
    facts (``trace``: its big tables may be empty), the rules' source, its first GPU activity
    and its GPUs (pid, device) that ran kernels."""

    trace: Trace
    rules_source: str
    origin: int
    devices: pl.DataFrame


def finish(whole: Whole, steps: Steps, choice: WindowChoice, scope: Scope, part: Part,
           collectives: _Matched, path: CriticalPath | None) -> TraceAnalysis:  # fmt: skip
    """The analysis the whole trace's part, its collectives and critical path add up to
    (:func:`_summarize`, then :func:`_with_detail`; no ``source``: the caller sets it)."""
    core = _summarize(whole, steps, choice, list(choice.kept), part)
    detail = _with_detail(core, part.judged, part.idle_gaps, part.phases, collectives[:3])
    notes = () if path is None else path.notes
    if path is None and scope.what_if:
        why = ("--no-critical-path" if not scope.critical_path else
               "its iterations come from CPU ranges alone, not from GPU ops"
               if choice.timeline == "cpu" else "the trace has no iterations to walk")
        notes = (f"--what-if {', '.join(scope.what_if)}: not replayed: {why}",)
    return replace(detail, critical_path=path, warnings=detail.warnings + notes)


def dependency_graph(source: ClassifiedTrace, steps: Steps | None) -> DepGraph:
    """The whole trace's dependency graph (:mod:`nsysmoe.depgraph`; no op budget), with the
    collectives matched across its GPUs in each of its complete iterations as cross-rank
    edges."""
    trace = source.trace
    matched = None
    if steps is not None and source.kernels.select("pid", "device").n_unique() > 1:
        kept = sorted(steps.table.filter(pl.col("complete"))["step"].unique().to_list())
        arrived = arrivals(source.kernels, process_windows(steps, kept))
        if not arrived.is_empty():
            n_gpus = source.kernels.select("pid", "device").n_unique()
            matched, _ = match(with_rank(arrived, Path(trace.path).name), n_ranks=n_gpus)
    return build_graph(source.kernels, trace.memops, trace.runtime, trace.syncs,
                       trace.event_records, matched)  # fmt: skip


def _critical_path(source: ClassifiedTrace, windows: pl.DataFrame, kept: list[int],
                   collectives_job: Future[_Matched], asked: tuple[str, ...]
                   ) -> CriticalPath | None:  # fmt: skip
    """The critical path and what-if replays over the kept iterations (none without them),
    with the collectives matched across the trace's GPUs as cross-rank edges (from
    :func:`collectives_of`' arrivals, and its match where it matched over as many ranks)."""
    if windows.is_empty():
        return None
    n_gpus = source.kernels.select("pid", "device").n_unique()
    matched = path_matches(collectives_job.result(), n_gpus, source.trace.path)
    return critical_path(source, windows, kept, matched, asked)


def path_matches(collectives: _Matched, n_gpus: int, path: str) -> pl.DataFrame | None:
    """The collectives the critical path crosses ranks at, over the trace's ``n_gpus`` GPUs
    that ran kernels: :func:`collectives_of`' match where it matched over as many ranks, else
    its arrivals matched again (none with one GPU)."""
    arrived, _, _, (n_ranks, rows) = collectives
    if n_gpus < 2 or arrived.is_empty():
        return None
    if n_ranks == n_gpus and rows is not None:
        return rows
    return match(with_rank(arrived, Path(path).name), n_ranks=n_gpus)[0]


def _summarize(whole: Whole, steps: Steps, choice: WindowChoice, kept: list[int], part: Part
               ) -> TraceAnalysis:  # fmt: skip
    """The analysis the part adds up to: totals, walls, the iteration and channel tables, the
    trace's facts; the detail tables empty (:func:`_with_detail` fills them)."""
    trace, tables = whole.trace, part.tables
    gpus, channels, seen = tables.gpus, tables.channels, part.seen
    dispatcher = dispatcher_of(set(seen["subclass"].explode()), seen["name"].explode())

    def context(idle_host_ns: int, idle_ns: int, pid: int | None = None) -> walls.Context:
        mine = channels if pid is None else channels.filter(pl.col("pid") == pid)
        share = idle_host_ns / idle_ns if idle_ns else None
        return walls.Context(dispatcher, frozenset(mine["channel"]), share, trace.source_format)

    gpu_walls = tuple(_gpu_wall(trace, row, context(row["idle_host_ns"] or 0, row["idle_ns"],
                                                    row["pid"]), tables.markers)
                      for row in gpus.iter_rows(named=True))  # fmt: skip
    total = totals(gpus)
    no_kernels, no_memops = trace.kernels.clear(), trace.memops.clear()  # read from the parts
    iterations = iteration_table(no_kernels, no_memops, steps, kept, per_process=tables.by_process)
    windows = process_windows(steps, kept)
    step_channels = _step_channels(whole.devices, windows, iterations,
                                   tables.channels_by_process)  # fmt: skip
    offset, basis = clock_offset(trace.session_start_ns, whole.origin)
    config = contract_config(trace.launch.command)
    return TraceAnalysis(
        path=trace.path,
        source_format=trace.source_format,
        via=trace.via,
        schema_version=trace.schema_version,
        product_version=trace.product_version,
        window_choice=choice,
        rules_source=whole.rules_source,
        gpus=gpus,
        classes=tables.classes,
        nvtx=totals_of(tables.nvtx_by_process),
        unclassified=busiest_unclassified(part.in_window),
        iterations=iterations,
        step_timeline=steps.timeline,
        gpu_walls=gpu_walls,
        wall=walls.trace_verdict(total.span_ns, total.idle_ns, total.exposed_ns, gpu_walls,
                                 context(int(gpus["idle_host_ns"].sum()), total.idle_ns)),
        totals=total,
        graphs=part.graphs,
        channels=with_shares(channels, gpus),
        channel_totals=with_step_bounds(channel_totals(channels), step_channels),
        iteration_channels=step_channels,
        process_iterations=tables.by_process,
        process_iteration_channels=tables.channels_by_process,
        process_nvtx=tables.nvtx_by_process,
        oom_markers=tables.markers,
        idle_gaps=pl.DataFrame(schema=GAP_SCHEMA),
        phases=pl.DataFrame(schema=PHASE_SCHEMA),
        phase_totals=phase_totals(pl.DataFrame(schema=PHASE_SCHEMA)),
        layers=pl.DataFrame(schema=LAYER_SCHEMA),
        layer_totals=layer_totals(pl.DataFrame(schema=LAYER_SCHEMA)),
        arrivals=pl.DataFrame(schema=ARRIVAL_SCHEMA),
        compute_under_comm=pl.DataFrame(schema=BUSY_SCHEMA),
        clock_offset_ns=offset,
        clock_basis=basis,
        launch=trace.launch,
        launch_config=config,
        caveats=caveats(config, dispatcher),
        collectives=Collectives.none(),
        not_captured=dict(trace.not_captured),
        warnings=trace.warnings + steps.warnings + _peer_copy_note(*part.peer_copies),
        source=None,
        sm=finished(part.sm, total.hidden_ns),
    )


def _with_detail(
    a: TraceAnalysis,
    judged: pl.DataFrame,
    idle_gaps: pl.DataFrame,
    phases: tuple[pl.DataFrame, pl.DataFrame],
    collectives: tuple[pl.DataFrame, pl.DataFrame, Collectives],
) -> TraceAnalysis:
    """The detail stage: per-iteration idle (``judged``: :func:`judged_per_iteration`), the
    largest idle gaps, the phase and layer tables, and the collectives matched across the
    trace's GPUs with what they were matched from."""
    idle_steps = with_other(a.iterations, judged)
    (phase_rows, layer_rows), (arrived, busy, matched) = phases, collectives
    return replace(
        a,
        iterations=a.iterations.join(idle_steps, on="step", how="left", maintain_order="left"),
        idle_gaps=idle_gaps,
        phases=phase_rows,
        phase_totals=phase_totals(phase_rows),
        layers=layer_rows,
        layer_totals=layer_totals(layer_rows),
        arrivals=arrived,
        compute_under_comm=busy,
        collectives=matched,
    )


#: :func:`collectives_of`: arrivals, busy, the collectives, and (ranks, instances) of the match
_Matched = tuple[pl.DataFrame, pl.DataFrame, Collectives,
                 tuple[int, pl.DataFrame | None]]  # fmt: skip


def collectives_of(in_window: pl.DataFrame, windows: pl.DataFrame, busy: pl.DataFrame, name: str,
                 n_gpus: int) -> _Matched:  # fmt: skip
    """The window's matchable communication kernels, each GPU's ⋃compute ∩ ⋃comm (``busy``,
    passed through), and the collectives matched across the file's GPUs (none with one GPU);
    the matched instances too, so the critical path does not match them again."""
    arrived = arrivals(in_window, windows)
    if n_gpus < 2:
        return arrived, busy, Collectives.none(), (n_gpus, None)
    ranked = with_rank(arrived, name)
    rows = None if ranked.is_empty() else match(ranked, n_gpus)
    matched = summarize(ranked, with_rank(busy, name), pl.DataFrame(), n_ranks=n_gpus,
                        matched=rows)  # fmt: skip
    return arrived, busy, matched, (n_gpus, None if rows is None else rows[0])


def _launches(source: ClassifiedTrace) -> Launches:
    """The trace's shared launch join (its kernel rows are the classified kernels' rows)."""
    launches = launches_of(source.trace)
    if launches.n_kernels == len(source.kernels):
        return launches
    return launch_table(source.kernels, source.trace.memops, source.trace.runtime)


def _step_channels(devices: pl.DataFrame, windows: pl.DataFrame, iterations: pl.DataFrame,
                   per_process: pl.DataFrame) -> pl.DataFrame:  # fmt: skip
    """Per (iteration, channel), all GPUs together, with what is still on the table
    (``devices``: the GPUs that ran kernels; ``windows``: each process's iteration windows;
    ``per_process``: their channel sums)."""
    per_step = channel_iterations(pl.DataFrame(), windows, per_process=per_process)
    devices = devices.group_by("pid").len("gpus")
    gpus = windows.select("pid", "step").join(devices, on="pid").group_by("step").agg(
        pl.col("gpus").sum())  # the GPUs of the processes that ran the step
    return on_the_table(per_step, iterations, gpus)


def peer_copies(memops: pl.DataFrame) -> tuple[int, int]:
    """The peer-to-peer copies among ``memops``: how many, and their time summed (ns).
    Peer-to-peer copies move data between GPUs without a kernel: the report says they are not
    counted as communication, so a report showing no communication is not misread."""
    p2p = memops.filter(pl.col("name").str.contains("PtoP"))
    return len(p2p), int((p2p["end"] - p2p["start"]).sum())


def _peer_copy_note(n: int, total: int) -> tuple[str, ...]:
    if not n:
        return ()
    note = (
        f"{n:,} peer-to-peer memcpy ({total / 1e6:,.3f} ms summed) moved data between "
        "GPUs; copies count as GPU activity, not as communication kernels"
    )
    return (note,)


def _gpu_wall(trace: Trace, row: dict, ctx: walls.Context, markers: dict[int, int]) -> WallVerdict:
    """``markers``: :func:`walls.oom_markers` of the trace."""
    key = (pl.col("pid") == row["pid"]) & (pl.col("device") == row["device"])
    info = trace.gpus.filter(key)
    total = info["total_memory_bytes"][0] if len(info) else None
    mem = walls.memory_evidence(trace.memory_events.filter(key), total, None,
                                trace.source_format, markers=markers.get(row["pid"]))  # fmt: skip
    return walls.verdict(row["span_ns"], row["idle_ns"], row["exposed_ns"], mem, ctx)
