"""One trace in, one :class:`~nsysmoe.results.TraceAnalysis` out: classify once, scope, measure.

The classified trace travels with the analysis (``analysis.source``), so the A/B's side facts and
the figures read the same classes the numbers came from, and nothing classifies twice.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import polars as pl

from nsysmoe.classify import RuleSet, classify_trace, default_rules
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
    summarize,
    with_rank,
)
from nsysmoe.measure.dispatcher import dispatcher_of
from nsysmoe.measure.graphs import graph_summary
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
from nsysmoe.measure.steps import detect_steps, process_windows, select_steps, step_windows
from nsysmoe.measure.validity import caveats
from nsysmoe.model import (
    INT64_MAX,
    WHOLE,
    WHOLE_TRACE,
    ClassifiedTrace,
    Scope,
    Trace,
    Window,
)
from nsysmoe.results import Collectives, Steps, TraceAnalysis, WallVerdict


def prepare(trace: Trace, rules: RuleSet | None = None, rank: int | None = None) -> ClassifiedTrace:
    """The trace with its kernels classified (default rules unless given): the only place
    analyses classify; with ``rank``, the trace of that rank's process only (:func:`rank_pid`),
    so everything after measures only its GPUs."""
    if rank is not None:
        trace = trace.only_processes([rank_pid(trace, rank)])
    return classify_trace(trace, rules or default_rules())


def prepare_with_steps(trace: Trace, rules: RuleSet | None = None, scope: Scope = WHOLE
                       ) -> tuple[ClassifiedTrace, Steps | None]:  # fmt: skip
    """:func:`prepare` and the iterations :func:`analyze_trace` would detect (none for a trace
    without kernels: the analysis then says so), side by side: classification reads the kernel
    names, step detection the NVTX ranges and the launch join, so the two share the cores."""
    if scope.rank is not None:
        trace = trace.only_processes([rank_pid(trace, scope.rank)])
    if trace.kernels.is_empty():
        return prepare(trace, rules), None
    with ThreadPoolExecutor(max_workers=1) as side:
        steps = side.submit(detect_steps, trace, scope.step_pattern)
        source = prepare(trace, rules)
        return source, steps.result()


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


def resolve_scope(
    steps: Steps, scope: Scope, origin: int = 0
) -> tuple[Window, Window, str, list[int]]:
    """The GPU window, the CPU window (for CPU-side NVTX totals), the window's description for
    the report, and the iterations inside it; ``origin`` anchors a relative time window."""
    if scope.window.bounded:
        w = scope.window.anchored(origin)
        lo = scope.window.start_ns
        if scope.window.relative and lo is not None and w.start_ns == INT64_MAX:
            raise NsysmoeError(
                f"--window starts {lo:,} ns after the first GPU activity (at {origin:,} ns), "
                "at or past the end of the trace timeline (2^63-1 ns); use a start within the trace"
            )
        kept = [s for s, sw in step_windows(steps, steps.numbers) if _inside(sw, w)]
        text = "time window" + (f" from the first GPU activity at {origin:,} ns"
                                 if scope.window.relative else "")  # fmt: skip
        return w, w, text, kept
    if not scope.steady:
        return WHOLE_TRACE, WHOLE_TRACE, "whole trace", steps.numbers
    if not steps.numbers and not scope.require_steps:
        text = "whole trace (no iteration ranges found; name them with --step-range REGEX)"
        return WHOLE_TRACE, WHOLE_TRACE, text, []
    sel = select_steps(steps, skip=scope.skip, first=scope.first, last=scope.last,
                       only=scope.numbers)  # fmt: skip
    return sel.window, sel.cpu_window, sel.description, sel.steps


def _inside(inner: Window, outer: Window) -> bool:
    lo, hi = outer.bounds()
    return inner.start_ns is not None and inner.start_ns >= lo and (inner.end_ns or 0) <= hi


def analyze_trace(
    source: ClassifiedTrace, *, scope: Scope = WHOLE, steps: Steps | None = None
) -> TraceAnalysis:
    """Measure every GPU of a classified trace over ``scope``; ``steps`` may be passed in when
    the caller detected them already (an A/B needs them to choose its common window)."""
    trace, kernels = source.trace, source.kernels
    if trace.kernels.is_empty():
        raise NsysmoeError(f"{trace.path}: the export holds no CUDA kernels; nothing to measure")
    steps = detect_steps(trace, scope.step_pattern) if steps is None else steps
    origin = int(pl.concat([kernels["start"], trace.memops["start"]]).min())
    return _measure(source, scope, steps, *resolve_scope(steps, scope, origin))


def analyze_process(
    analysis: TraceAnalysis,
    pid: int,
    *,
    scope: Scope = WHOLE,
    steps: Steps | None = None,
    detail: bool = True,
) -> TraceAnalysis:
    """One process of an analysis, measured over the analysis' own windows and iterations (so
    its durations are the process' share of the analysis' sums): an A/B's per-rank values.
    ``steps``: those the analysis was measured with (detected again when not given);
    ``detail``: see :func:`_measure` (an A/B's per-rank rows need none of the detail)."""
    if analysis.source is None:
        raise NsysmoeError(f"{analysis.path}: analysis was detached from its trace; re-analyse it")
    source = restrict(analysis.source, [pid])
    if source.trace.kernels.is_empty():
        raise NsysmoeError(f"{analysis.path}: process {pid} ran no CUDA kernels")
    steps = detect_steps(analysis.source.trace, scope.step_pattern) if steps is None else steps
    mine = Steps(steps.table.filter(pl.col("pid") == pid), steps.pattern, steps.timeline,
                 steps.warnings)  # fmt: skip
    kept = sorted(analysis.iterations["step"].to_list())
    return _measure(source, scope, mine, analysis.window, analysis.cpu_window,
                    analysis.window_text, kept, detail=detail, whole=analysis)  # fmt: skip


def _measure(source: ClassifiedTrace, scope: Scope, steps: Steps, window: Window,
             cpu_window: Window, window_text: str, kept: list[int], *,
             detail: bool = True, whole: TraceAnalysis | None = None) -> TraceAnalysis:  # fmt: skip
    """Every GPU of a classified trace over resolved windows and iterations.

    ``whole``: an analysis over the same windows of a trace ``source`` is part of (some of its
    processes): the per-GPU tables (GPUs with their idle split, classes, channels) are its rows
    for these GPUs, not measured again — each row is one GPU's alone.

    ``detail=False`` measures the per-GPU, per-channel, per-iteration and NVTX figures and the
    walls only; the phase, layer, idle-gap, per-iteration idle and arrival tables are left empty
    (their schemas, no rows) and ``collectives`` is none.

    The NVTX-side work (range totals, OOM markers, phase tables: millions of range names) runs
    in a second thread while this one measures the GPU timelines: polars and numpy release the
    GIL, and each job reads only the immutable trace."""
    with ThreadPoolExecutor(max_workers=1) as nvtx_side:
        return _measure_on(nvtx_side, source, scope, steps, window, cpu_window, window_text,
                           kept, detail, whole)  # fmt: skip


def _measure_on(nvtx_side: Executor, source: ClassifiedTrace, scope: Scope, steps: Steps,
                window: Window, cpu_window: Window, window_text: str, kept: list[int],
                detail: bool, whole: TraceAnalysis | None) -> TraceAnalysis:  # fmt: skip
    trace, kernels = source.trace, source.kernels
    origin = int(pl.concat([kernels["start"], trace.memops["start"]]).min())
    if window.select(kernels.select("start", "end")).is_empty():
        raise NsysmoeError(
            f"{trace.path}: no GPU work in the window [{window.start_ns}, {window.end_ns}) ns; "
            "widen --window (GPU work spans "
            f"{trace.kernels['start'].min()}–{trace.kernels['end'].max()} ns)"
        )
    # the side thread's jobs first, so it starts while this one measures the GPUs
    launches = _launches(source)
    if whole is None:
        nvtx_job = nvtx_side.submit(process_nvtx_totals, trace.nvtx, cpu_window,
                                    normalize=not scope.raw_nvtx)  # fmt: skip
        markers_job = nvtx_side.submit(walls.oom_markers, trace.nvtx)
    if detail:
        launched = launches.kernels.select("api_tid", "api_start", "api_end")
        phases_job = nvtx_side.submit(phase_tables, kernels, trace.runtime, trace.nvtx, window,
                                      phase_pattern(scope.phase),
                                      launched=launched if launches.unique else None)  # fmt: skip
    # the window's kernels that are read below, only their columns: the communication ones
    # (matched across GPUs) and those no rule named (the audit table); of the rest, only
    # which subclasses and names occur (the dispatcher), not a copy of a million rows
    window_kernels = window.select(kernels.lazy().select(
        "pid", "device", "start", "end", "name", "class", "subclass", "channel"))  # fmt: skip
    in_window = window_kernels.filter(
        (pl.col("class") == COMM) | NO_RULE).collect()
    seen = window_kernels.select(pl.col("subclass", "name").unique().implode()).collect()
    windows = process_windows(steps, kept)  # each process's own iteration windows
    if whole is None:  # the kernels as both channel sweeps read them, coded once, when due
        coded_job = nvtx_side.submit(coded_kernels, kernels)
        # the future is bound now: this thread lets go of its name once its own sweep is done
        pci_job = nvtx_side.submit(lambda job: process_channel_iterations(job.result(), windows),
                                   coded_job)  # fmt: skip
        gpus, classes, busy = per_gpu_and_busy(kernels, trace.memops, window)
    else:
        mine = pl.col("pid").is_in(trace.gpus["pid"].unique().to_list())
        gpus, classes = whole.gpus.filter(mine), whole.classes.filter(mine)
        busy = whole.compute_under_comm.filter(mine)
    if detail:  # the side thread takes the cross-GPU matching too
        collectives_job = nvtx_side.submit(_collectives, in_window, windows, busy,
                                           Path(trace.path).name, len(gpus))  # fmt: skip
    graphs = graph_summary(trace, kernels, window)
    ops = launches.ops.select(list(OPS_SCHEMA))
    window_ops = window.select(ops.lazy())  # read only per GPU (its span): no copy of the ops
    if detail or whole is None:  # the whole timeline's gaps, and the window's cut from them
        timeline_gaps = gaps(ops, launch=True)
        window_gaps = (gaps_in_window(timeline_gaps, window_ops) if window.bounded
                       else timeline_gaps.drop("api_start"))  # fmt: skip
        timeline_gaps = timeline_gaps.drop("api_start")  # only the window's cut needed it
    if whole is None:
        split = idle_split_per_gpu(window_ops, window_gaps).drop("idle_ns")
        gpus = (
            gpus.join(trace.gpus.select("pid", "device", "gpu_name"), on=["pid", "device"],
                      how="left")
            .select("pid", "device", "gpu_name", pl.exclude("pid", "device", "gpu_name"))
            .join(split, on=["pid", "device"], how="left", maintain_order="left")
        )  # fmt: skip
    if detail:  # what the gap tables give, taken now: a million gaps each are not kept
        judged = judged_per_iteration(ops, windows, timeline_gaps)
        idle_gaps = largest_gaps(window_ops, trace.nvtx, gap_table=window_gaps)
    if detail or whole is None:
        del timeline_gaps, window_gaps
    if whole is None:
        channels = channel_table(coded_job.result(), window)
        del coded_job  # its arrays go once the side thread's sweep is done with them
    else:
        channels = whole.channels.filter(mine).select(list(CHANNEL_SCHEMA))
    dispatcher = dispatcher_of(set(seen["subclass"].explode()), seen["name"].explode())

    def context(idle_host_ns: int, idle_ns: int, pid: int | None = None) -> walls.Context:
        mine = channels if pid is None else channels.filter(pl.col("pid") == pid)
        share = idle_host_ns / idle_ns if idle_ns else None
        return walls.Context(dispatcher, frozenset(mine["channel"]), share, trace.source_format)

    if whole is None:
        markers, nvtx_by_process = markers_job.result(), nvtx_job.result()
    else:  # a process's own totals and markers, as its whole analysis named and counted them
        nvtx_by_process = whole.process_nvtx.filter(mine)
        pids = set(trace.gpus["pid"].to_list())
        markers = {pid: n for pid, n in whole.oom_markers.items() if pid in pids}
    gpu_walls = tuple(_gpu_wall(trace, row, context(row["idle_host_ns"] or 0, row["idle_ns"],
                                                    row["pid"]), markers)
                      for row in gpus.iter_rows(named=True))  # fmt: skip
    total = totals(gpus)
    if whole is None:
        by_process = process_iterations(kernels, trace.memops, steps, kept)
        channels_by_process = pci_job.result()
    else:  # a process's own rows of the whole (its windows, its GPUs)
        by_process = whole.process_iterations.filter(mine)
        channels_by_process = whole.process_iteration_channels.filter(mine)
    iterations = iteration_table(kernels, trace.memops, steps, kept, per_process=by_process)
    step_channels = _step_channels(kernels, windows, iterations, channels_by_process)
    if detail:
        idle_steps = with_other(iterations, judged)
        iterations = iterations.join(idle_steps, on="step", how="left", maintain_order="left")
        phases, layers = phases_job.result()
        arrived, busy, collectives = collectives_job.result()
    else:
        phases, layers = pl.DataFrame(schema=PHASE_SCHEMA), pl.DataFrame(schema=LAYER_SCHEMA)
        arrived, busy = pl.DataFrame(schema=ARRIVAL_SCHEMA), pl.DataFrame(schema=BUSY_SCHEMA)
        idle_gaps, collectives = pl.DataFrame(schema=GAP_SCHEMA), Collectives.none()
    offset, basis = clock_offset(trace.session_start_ns, origin)
    config = contract_config(trace.launch.command)
    return TraceAnalysis(
        path=trace.path,
        source_format=trace.source_format,
        schema_version=trace.schema_version,
        product_version=trace.product_version,
        window=window,
        cpu_window=cpu_window,
        window_text=window_text,
        rules_source=source.rules_source,
        gpus=gpus,
        classes=classes,
        nvtx=totals_of(nvtx_by_process),
        unclassified=busiest_unclassified(in_window),
        iterations=iterations,
        step_timeline=steps.timeline,
        gpu_walls=gpu_walls,
        wall=walls.trace_verdict(total.span_ns, total.idle_ns, total.exposed_ns, gpu_walls,
                                 context(int(gpus["idle_host_ns"].sum()), total.idle_ns)),
        totals=total,
        graphs=graphs,
        channels=with_shares(channels, gpus),
        channel_totals=with_step_bounds(channel_totals(channels), step_channels),
        iteration_channels=step_channels,
        process_iterations=by_process,
        process_iteration_channels=channels_by_process,
        process_nvtx=nvtx_by_process,
        oom_markers=markers,
        idle_gaps=idle_gaps,
        phases=phases,
        phase_totals=phase_totals(phases),
        layers=layers,
        layer_totals=layer_totals(layers),
        arrivals=arrived,
        compute_under_comm=busy,
        clock_offset_ns=offset,
        clock_basis=basis,
        launch=trace.launch,
        launch_config=config,
        caveats=caveats(config, dispatcher),
        collectives=collectives,
        not_captured=dict(trace.not_captured),
        warnings=trace.warnings + steps.warnings + peer_copy_note(window.select(trace.memops)),
        source=source,
    )


def _collectives(in_window: pl.DataFrame, windows: pl.DataFrame, busy: pl.DataFrame, name: str,
                 n_gpus: int) -> tuple[pl.DataFrame, pl.DataFrame, Collectives]:  # fmt: skip
    """The window's matchable communication kernels, each GPU's ⋃compute ∩ ⋃comm (``busy``,
    passed through), and the collectives matched across the file's GPUs (none with one GPU)."""
    arrived = arrivals(in_window, windows)
    if n_gpus < 2:
        return arrived, busy, Collectives.none()
    return arrived, busy, summarize(with_rank(arrived, name), with_rank(busy, name),
                                    pl.DataFrame(), n_ranks=n_gpus)  # fmt: skip


def _launches(source: ClassifiedTrace) -> Launches:
    """The trace's shared launch join (its kernel rows are the classified kernels' rows)."""
    launches = launches_of(source.trace)
    if launches.n_kernels == len(source.kernels):
        return launches
    return launch_table(source.kernels, source.trace.memops, source.trace.runtime)


def _step_channels(kernels: pl.DataFrame, windows: pl.DataFrame, iterations: pl.DataFrame,
                   per_process: pl.DataFrame) -> pl.DataFrame:  # fmt: skip
    """Per (iteration, channel), all GPUs together, with what is still on the table
    (``windows``: each process's iteration windows; ``per_process``: their channel sums)."""
    per_step = channel_iterations(kernels, windows, per_process=per_process)
    devices = kernels.select("pid", "device").unique().group_by("pid").len("gpus")
    gpus = windows.select("pid", "step").join(devices, on="pid").group_by("step").agg(
        pl.col("gpus").sum())  # the GPUs of the processes that ran the step
    return on_the_table(per_step, iterations, gpus)


def peer_copy_note(memops: pl.DataFrame) -> tuple[str, ...]:
    """Peer-to-peer copies move data between GPUs without a kernel: say they are not counted
    as communication, so a report showing no communication is not misread."""
    p2p = memops.filter(pl.col("name").str.contains("PtoP"))
    if p2p.is_empty():
        return ()
    total = int((p2p["end"] - p2p["start"]).sum())
    note = (
        f"{len(p2p):,} peer-to-peer memcpy ({total / 1e6:,.3f} ms summed) moved data between "
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
