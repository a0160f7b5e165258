"""One trace analysed one process at a time: the memory an analysis holds is bounded by the
largest process, not by the file (an 8-GPU export of 8M kernels is eight processes of 1M).

Every per-GPU, per-process and per-iteration figure is one process's alone, so the trace is
measured in two passes over its processes (:class:`~nsysmoe.io.processes.ByProcess` hands out
one process's big tables at a time):

1. each process's iteration ranges and its steps on its own GPU timeline, its first GPU
   activity, whether its launch join is one to one, and its ops' start and launch times (what
   the critical path's op budget is counted on); then the window, chosen as for the whole trace;
2. each process classified and measured (:func:`nsysmoe.pipeline.measure_part`), keeping what
   the cross-GPU jobs read: the window's communication (and unclassified) kernels and the rows
   around the iterations the critical path walks, each row with its place in the whole trace's
   table; every table kept is copied out of the process's buffers (:func:`_owned`).

Then the parts are merged, the collectives matched, the path walked and the analysis summed
up (:func:`nsysmoe.pipeline.finish`): the analysis :func:`nsysmoe.pipeline.analyze_trace` gives
for the trace read whole, figure for figure (tests/test_by_process.py), without its classified
source (an analysis detached from it).
"""

from __future__ import annotations

import gc
import io
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from pathlib import Path

import polars as pl

from nsysmoe.classify import RuleSet, classify_trace, default_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.processes import ByProcess, Process
from nsysmoe.measure.critical_path import (
    PathRows,
    first_call,
    parse_scenario,
    path_of,
    rows_around,
    span_of,
    walked_iterations,
)
from nsysmoe.measure.launch_calls import launches_of
from nsysmoe.measure.steps import (
    DEFAULT_STEP_PATTERN,
    STEP_SCHEMA,
    launched_ops,
    matched_ranges,
    number_notes,
    numbered,
    process_windows,
    steps_from,
)
from nsysmoe.measure.window import choose
from nsysmoe.model import STEADY, Scope, WindowChoice
from nsysmoe.pipeline import (
    Part,
    Whole,
    collectives_of,
    finish,
    measure_part,
    merged,
    no_work,
    path_matches,
    warm_graph,
)
from nsysmoe.results import CriticalPath, Steps, TraceAnalysis

ORDER = "_order"  # a row's place in the whole trace's table, while rows of processes are merged


@dataclass(frozen=True)
class _Early:
    """What the first pass keeps of a process."""

    ranges: pl.DataFrame  # its numbered iteration ranges, with their NVTX rows' places
    steps: Steps
    origin: int | None  # its first GPU activity
    unique: bool  # its launch join is one to one
    ops: pl.DataFrame  # its GPU ops' start and launch (api_start)
    kernels: tuple[int, int] | None  # its kernels' first start and last end


def analyze_by_process(split: ByProcess, rules: RuleSet | None = None, scope: Scope = STEADY
                       ) -> TraceAnalysis:  # fmt: skip
    """The analysis of the trace ``split`` holds over ``scope``, one process at a time (module
    docstring). Not of one rank (``scope.rank``): that process is read alone anyway."""
    if scope.rank is not None:
        raise ValueError("analyze_by_process measures every process; restrict a rank's trace "
                         "with pipeline.prepare(trace, rank=…)")  # fmt: skip
    shared, rules = split.shared, rules or default_rules()
    if split.rows["kernels"] == 0:
        raise NsysmoeError(f"{shared.path}: the export holds no CUDA kernels; nothing to measure")
    if scope.critical_path:  # the graph's compiled passes load meanwhile
        threading.Thread(target=warm_graph, daemon=True).start()
    pattern = scope.step_pattern or DEFAULT_STEP_PATTERN
    early = [_first_pass(split.load(pid), pattern) for pid in split.pids]
    steps = _steps(early, pattern)
    origin = min(e.origin for e in early if e.origin is not None)
    choice = choose(steps, scope.window, origin)
    kept = list(choice.kept)
    windows = process_windows(steps, kept)
    walk = _walk(scope, choice, windows, early)
    unique = all(e.unique for e in early)
    spans = [e.kernels for e in early if e.kernels is not None]
    del early  # the ops' times: not read again
    parts: dict[int, Part] = {}
    around: list[PathRows] = []
    devices: list[pl.DataFrame] = []

    def measure(process: Process, side: ThreadPoolExecutor) -> None:
        source = classify_trace(process.trace, rules)
        devices.append(source.kernels.select("pid", "device").unique())
        parts[process.pid] = _owned_part(measure_part(side, source, steps, choice, scope,
                                                      pid=process.pid, unique=unique))  # fmt: skip
        if walk is not None:
            around.append(_rows_around(process, source.kernels, *walk))

    idle: list[int] = []  # processes without GPU work in the window: measured once some has
    with ThreadPoolExecutor(max_workers=1) as side:
        for pid in split.pids:
            process = split.load(pid)
            if not choice.window.select(process.trace.kernels.select("start", "end")).is_empty():
                measure(process, side)
            else:
                idle.append(pid)
            del process
            gc.collect()  # a process's tables can sit in reference cycles: gone before the next
        if not parts:
            raise no_work(shared.path, choice.window, min(lo for lo, _ in spans),
                          max(hi for _, hi in spans))  # fmt: skip
        for pid in idle:
            measure(split.load(pid), side)
            gc.collect()
    part = merged([parts.pop(pid) for pid in sorted(parts)], shared.graph_trace)
    n_gpus = len(part.tables.gpus)
    collectives = collectives_of(part.in_window, windows, part.busy, Path(shared.path).name,
                                 n_gpus)  # fmt: skip
    gpus = pl.concat(devices).sort("pid", "device")
    path = None
    if walk is not None:
        path = _path(split, walk, around, windows, kept, collectives, len(gpus), scope)
    whole = Whole(shared, rules.source, origin, gpus)
    return finish(whole, steps, choice, scope, part, collectives, path)


def _first_pass(process: Process, pattern: str) -> _Early:
    trace = process.trace
    nvtx = trace.nvtx.with_columns(pl.Series(ORDER, process.order["nvtx"], pl.Int64))
    ranges = numbered(matched_ranges(nvtx, pattern, keep=(ORDER,)))
    steps = steps_from(ranges, launched_ops(trace), pattern, ())
    launches = launches_of(trace)
    starts = pl.concat([trace.kernels["start"], trace.memops["start"]])
    origin = None if trace.kernels.is_empty() and trace.memops.is_empty() else int(starts.min())
    k = trace.kernels
    span = None if k.is_empty() else (int(k["start"].min()), int(k["end"].max()))
    return _Early(_owned(ranges), replace(steps, table=_owned(steps.table)), origin,
                  launches.unique, launches.ops.select("start", "api_start"), span)  # fmt: skip


def _steps(early: list[_Early], pattern: str) -> Steps:
    """The processes' steps as :func:`nsysmoe.measure.steps.detect_steps` finds them in the
    whole trace: its notes from all the ranges in the trace's order; iterations on the GPU
    timeline where any process launched GPU work (a process that launched none then has
    none), else on the CPU's."""
    ranges = pl.concat([e.ranges for e in early]).sort(ORDER)
    warnings = number_notes(ranges, pattern)
    found = [e.steps for e in early if e.steps.timeline != "none"]
    if not found:
        return Steps(pl.DataFrame(schema=STEP_SCHEMA), pattern, "none", warnings)
    timeline = "gpu" if any(s.timeline == "gpu" for s in found) else "cpu"
    tables = [s.table for s in found if s.timeline == timeline]
    return Steps(pl.concat(tables), pattern, timeline, warnings)


#: the critical path's walked iterations: their span [lo, hi] and the earliest launch of its ops
_Walk = tuple[list[int], int, int, int | None]


def _walk(scope: Scope, choice: WindowChoice, windows: pl.DataFrame, early: list[_Early]
          ) -> _Walk | None:  # fmt: skip
    """The iterations the critical path walks, as :func:`nsysmoe.measure.critical_path.
    critical_path` chooses them over the whole trace's ops (None where no path is walked)."""
    if not scope.critical_path or choice.timeline != "gpu" or windows.is_empty():
        return None
    kept = sorted(choice.kept)
    lo, hi = windows["start_ns"].min(), windows["end_ns"].max()
    n_ops = sum(e.ops.select(((pl.col("start") >= lo) & (pl.col("start") < hi)).sum()).item()
                for e in early)  # fmt: skip
    walked = walked_iterations(kept, n_ops)
    lo, hi = span_of(windows, walked)
    calls = [c for e in early if (c := first_call(e.ops, lo, hi)) is not None]
    return walked, lo, hi, min(calls) if calls else None


def _rows_around(process: Process, kernels: pl.DataFrame, walked: list[int], lo: int, hi: int,
                 call: int | None) -> PathRows:  # fmt: skip
    """The process's rows the critical path's graph holds, each with its place in the whole
    trace's table."""
    trace, order = process.trace, process.order

    def placed(df: pl.DataFrame, table: str) -> pl.DataFrame:
        return df.with_columns(pl.Series(ORDER, order[table], pl.Int64))

    rows = rows_around(placed(kernels, "kernels"), placed(trace.memops, "memops"),
                       placed(trace.runtime, "runtime"), lo, hi, call, keep=(ORDER,))  # fmt: skip
    return PathRows(*(_owned(getattr(rows, t)) for t in ("kernels", "memops", "runtime")))


def _owned(df: pl.DataFrame) -> pl.DataFrame:
    """A copy of ``df`` that holds only its own rows' bytes. What polars derives from a table
    can share its buffers: a filter that keeps a run of rows is a slice of every column, and
    strings are views into the table's string buffers; a few rows kept of a process would
    hold all of its tables (100 MB a process on the bench's 8-GPU export). An Arrow IPC round
    trip writes the rows alone."""
    buf = io.BytesIO()
    df.write_ipc(buf)
    buf.seek(0)
    return pl.read_ipc(buf)


def _owned_part(part: Part) -> Part:
    """:func:`_owned` for every table of a process's part (it outlives the process)."""
    tables = replace(part.tables, **{f.name: _owned(getattr(part.tables, f.name))
                                     for f in fields(part.tables)
                                     if isinstance(getattr(part.tables, f.name), pl.DataFrame)})
    return replace(
        part,
        tables=tables,
        busy=_owned(part.busy),
        judged=_owned(part.judged),
        idle_gaps=_owned(part.idle_gaps),
        phases=(_owned(part.phases[0]), _owned(part.phases[1])),
        in_window=_owned(part.in_window),
        seen=_owned(part.seen),
        graphs=replace(part.graphs, per_gpu=_owned(part.graphs.per_gpu)),
        sm=replace(part.sm, **{f.name: _owned(getattr(part.sm, f.name))
                               for f in fields(part.sm)}),
    )  # fmt: skip


def _path(split: ByProcess, walk: _Walk, around: list[PathRows], windows: pl.DataFrame,
          kept: list[int], collectives: tuple, n_gpus: int, scope: Scope
          ) -> CriticalPath | None:  # fmt: skip
    """The critical path over the processes' rows, put back in the whole trace's order (the
    graph numbers its nodes by row), with the collectives matched across the trace's GPUs."""
    scenarios = [parse_scenario(a) for a in scope.what_if]
    walked = walk[0]

    def whole(table: str) -> pl.DataFrame:
        return pl.concat([getattr(r, table) for r in around]).sort(ORDER).drop(ORDER)

    rows = PathRows(whole("kernels"), whole("memops"), whole("runtime"))
    matched = path_matches(collectives, n_gpus, split.shared.path)
    shared = split.shared
    in_walk = windows.filter(pl.col("step").is_in(walked))
    return path_of(rows, shared.syncs, shared.event_records, in_walk, len(kept), matched,
                   scenarios)  # fmt: skip
