"""The data model every stage shares: the canonical input tables (what every reader produces, so
analyses never see a source format's table names), the window and scope that select part of a
trace, and a trace with its kernels classified.

All times are integer nanoseconds on the trace's own timeline. A GPU is ``(pid, device)``: several
processes in one export are several ranks, even when each calls its GPU device 0.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

import polars as pl

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)

#: Column schemas of the canonical tables (readers must produce exactly these columns).
KERNEL_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "stream": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,  # null when the export has none; unique only within a pid
    "name": pl.String,  # demangled name; "[CUDA graph N]" for a whole-graph row
    "short_name": pl.String,
    # CUDA graphs: null = an ordinary launch; "node" = a kernel that ran as a node of a graph
    # replay (node-level tracing); "whole" = one row for a whole replay, contents unknown
    # (nsys --cuda-graph-trace=graph)
    "graph": pl.String,
    "graph_id": pl.Int64,  # the graph's id where the source records it, else null
    # the launch shape (null where the source has none, and for a whole-graph row): thread
    # blocks launched (grid x·y·z), threads per block (x·y·z), registers per thread, shared
    # memory per block (static + dynamic, bytes) — what the SM budget reads
    "blocks": pl.Int64,
    "threads": pl.Int32,
    "registers": pl.Int32,
    "shared_bytes": pl.Int32,
}
#: the launch-shape columns of KERNEL_SCHEMA
LAUNCH_SHAPE = ("blocks", "threads", "registers", "shared_bytes")
MEMOP_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "stream": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,
    "kind": pl.String,  # "memcpy" | "memset"
    "bytes": pl.Int64,
    "name": pl.String,  # display name, e.g. "[CUDA memcpy DtoD]"
}
RUNTIME_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "tid": pl.Int64,  # full serialized globalTid, so threads of different processes never collide
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,
    "api": pl.String,  # the calls CUDA-graph accounting and the dependency graph need, else null
}
#: ``RUNTIME_SCHEMA["api"]`` values: what a call does for CUDA graphs, and the calls that order
#: work across streams or hold the host until the GPU is done (:mod:`nsysmoe.depgraph`)
API_KINDS = ("graph_launch", "capture_begin", "capture_end", "stream_sync", "event_sync",
             "device_sync", "stream_wait", "event_record", "blocking_copy")  # fmt: skip
#: GPU-side records of synchronisation calls (nsys ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``):
#: which stream a stream synchronize or a stream-wait-event names, and the event it waits on
SYNC_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "corr_id": pl.Int64,  # the synchronisation call's (unique within a pid)
    "device": pl.Int64,
    "stream": pl.Int64,  # null for "none" (a device or context synchronize)
    "event_id": pl.Int64,  # null for "none"
    "event_sync_id": pl.Int64,  # links the wait to its event record (nsys >= 2026.4), else null
}
#: event records (nsys ``CUPTI_ACTIVITY_KIND_CUDA_EVENT``): the stream each ``cudaEventRecord``
#: marked, so a wait on the event can be tied to the work recorded before it
EVENT_RECORD_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "corr_id": pl.Int64,  # the cudaEventRecord call's
    "device": pl.Int64,
    "stream": pl.Int64,
    "event_id": pl.Int64,
    "event_sync_id": pl.Int64,
}
NVTX_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "tid": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,  # unended ranges are closed at the trace's last NVTX timestamp
    "name": pl.String,  # bare range text
    "domain": pl.String,  # null for the default domain
    "style": pl.String,  # "pushpop" | "startend"
    "cross_thread": pl.Boolean,  # start/end range ended on another thread (no GPU projection)
}
GPU_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "gpu_name": pl.String,
    "total_memory_bytes": pl.Int64,
    # SMs and the per-SM occupancy limits (null where the source does not record them)
    "sm_count": pl.Int64,
    "max_threads_per_sm": pl.Int64,
    "max_blocks_per_sm": pl.Int64,
    "registers_per_sm": pl.Int64,
    "shared_bytes_per_sm": pl.Int64,
}
MEMORY_EVENT_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "start": pl.Int64,
    "bytes": pl.Int64,  # positive for allocation, negative for deallocation
}


#: the input format a trace was read from (nsys: ``nsys export --type sqlite|parquetdir|arrowdir``)
SourceFormat = Literal["nsys-sqlite", "nsys-parquet", "nsys-arrow", "kineto-json"]

#: Report order of the channel vocabulary; a user's own channel names follow, sorted.
CHANNEL_ORDER = (
    "ep.dispatch",
    "ep.combine",
    "ep.sync",
    "nccl.allreduce",
    "nccl.reducescatter",
    "nccl.allgather",
    "nccl.broadcast",
    "nccl.sendrecv",
    "nccl.other",
    "tp.userbuffers",
    "other",
)


def channel_order_key(channel: str) -> tuple[int, str]:
    """Report order of channel names (``sorted(names, key=channel_order_key)``): the vocabulary
    as in :data:`CHANNEL_ORDER`, then a user's own names sorted."""
    rank = CHANNEL_ORDER.index(channel) if channel in CHANNEL_ORDER else len(CHANNEL_ORDER)
    return rank, channel


def empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


@dataclass(frozen=True)
class Launch:
    """How the run was launched, as the export recorded it (:mod:`nsysmoe.io.launch`), secrets
    redacted (:mod:`nsysmoe.io.redact`): command and arguments, working directory, environment,
    host."""

    command: tuple[str, ...] = ()
    working_dir: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)
    #: the program that generated the trace when it is synthetic, not a measurement (an nsys
    #: export's ``NSYSMOE_GENERATED_BY`` metadata row, a Kineto trace's ``generatedBy`` field)
    generated_by: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"command": list(self.command), "working_dir": self.working_dir,
                "environment": dict(self.environment), "system": dict(self.system),
                "generated_by": self.generated_by}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict) -> Launch:
        return cls(tuple(d.get("command", ())), d.get("working_dir", ""),
                   dict(d.get("environment", {})), dict(d.get("system", {})),
                   d.get("generated_by"))  # fmt: skip


@dataclass(frozen=True)
class Trace:
    """One input trace, read into canonical polars tables plus what the file did not capture."""

    path: str
    source_format: SourceFormat
    schema_version: str | None
    product_version: str | None
    kernels: pl.DataFrame
    memops: pl.DataFrame
    runtime: pl.DataFrame
    nvtx: pl.DataFrame
    gpus: pl.DataFrame
    memory_events: pl.DataFrame
    #: data kinds absent from the file, e.g. {"nvtx": "not captured (no NVTX_EVENTS table)"}
    not_captured: dict[str, str] = field(default_factory=dict)
    #: reader warnings a user should see (dropped rows and why)
    warnings: tuple[str, ...] = ()
    #: counts of rows left out by the reader, by reason
    dropped: dict[str, int] = field(default_factory=dict)
    #: how the capture traced CUDA graphs, as recorded (nsys: ``CUDA_GRAPH_TRACE_OPTIONS``,
    #: e.g. ``{"MODE": "Graph", "TRACE_DEVICE_GRAPH_LAUNCH": "true"}``); empty when unrecorded
    graph_trace: dict[str, str] = field(default_factory=dict)
    #: synchronisation records and event records (:data:`SYNC_SCHEMA`,
    #: :data:`EVENT_RECORD_SCHEMA`); empty where the source has none
    syncs: pl.DataFrame = field(default_factory=lambda: empty(SYNC_SCHEMA))
    event_records: pl.DataFrame = field(default_factory=lambda: empty(EVENT_RECORD_SCHEMA))
    #: UTC epoch (ns) of the capture's start (nsys TARGET_INFO_SESSION_START_TIME), if recorded
    session_start_ns: int | None = None
    #: the command line, environment and host the export recorded, secrets redacted
    launch: Launch = field(default_factory=Launch)
    #: how a report was read (the export nsysmoe read it through), None for an export itself
    via: str | None = None

    @property
    def generated_by(self) -> str | None:
        """The program that generated this trace when it is synthetic (see :class:`Launch`)."""
        return self.launch.generated_by

    @property
    def gpu_keys(self) -> list[tuple[int, int]]:
        """(pid, device) of every GPU that ran at least one kernel or memory op, sorted."""
        keys = pl.concat(
            [self.kernels.select("pid", "device"), self.memops.select("pid", "device")]
        ).unique()
        return sorted(keys.iter_rows())

    def only_processes(self, pids: Collection[int]) -> Trace:
        """The trace of these processes only: every table's rows of other pids left out."""
        keep = pl.col("pid").is_in(list(pids))
        tables = ("kernels", "memops", "runtime", "nvtx", "gpus", "memory_events", "syncs",
                  "event_records")
        return replace(self, **{t: getattr(self, t).filter(keep) for t in tables})


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Window:
    """Half-open analysis window [start_ns, end_ns) on the trace timeline; None = unbounded."""

    start_ns: int | None = None
    end_ns: int | None = None
    #: the bounds count from the trace's first GPU activity (``--window +2s:+5s``), so one
    #: window means the same on traces with different time origins (epoch-stamped, Kineto)
    relative: bool = False

    def anchored(self, origin: int) -> Window:
        """The absolute window, for a trace whose first GPU activity starts at ``origin``; a
        bound past the int64 timeline is held at its end (2^63-1 ns: no trace time lies beyond
        it), never a number the timeline cannot hold."""
        if not self.relative:
            return self
        lo, hi = self.start_ns, self.end_ns
        return Window(None if lo is None else _on_timeline(lo + origin),
                      None if hi is None else _on_timeline(hi + origin))  # fmt: skip

    @property
    def bounded(self) -> bool:
        return self.start_ns is not None or self.end_ns is not None

    def bounds(self) -> tuple[int, int]:
        lo = self.start_ns if self.start_ns is not None else INT64_MIN
        hi = self.end_ns if self.end_ns is not None else INT64_MAX
        return int(lo), int(hi)

    def select(self, df: Frame) -> Frame:
        """Rows whose interval meets the window, clipped to it (zero-length rows: start inside);
        a lazy frame stays lazy."""
        if not self.bounded:
            return df
        lo, hi = self.bounds()
        inside = ((pl.col("end") > lo) | (pl.col("start") >= lo)) & (pl.col("start") < hi)
        return df.filter(inside).with_columns(
            pl.col("start").clip(lo, hi), pl.col("end").clip(lo, hi)
        )


def _on_timeline(ns: int) -> int:
    """``ns`` held to the int64 timeline (saturating arithmetic for window bounds)."""
    return min(max(ns, INT64_MIN), INT64_MAX)


WHOLE_TRACE = Window()


@dataclass(frozen=True)
class Whole:
    """The whole trace, warm-up included (``--whole-trace``)."""


@dataclass(frozen=True)
class Iterations:
    """Iterations by number, the steady ones by default: the first ``skip`` complete iterations
    left out as warm-up (``"detected"``: by the one warm-up rule,
    :func:`nsysmoe.measure.window.warmup`), then those in ``first``–``last`` (inclusive; None:
    open). ``required``: iterations were asked for (``--window 5-20``, ``--skip``,
    ``--step-range``), so a trace without any is an error; otherwise such a trace is measured
    whole and the report says why."""

    first: int | None = None
    last: int | None = None
    skip: int | Literal["detected"] = "detected"
    required: bool = False


#: the part of the timeline a scope measures: a time :class:`Window`, :class:`Iterations`, or
#: :class:`Whole` (an unbounded time window is the whole trace too)
Span = Window | Iterations | Whole
STEADY_ITERATIONS = Iterations()


@dataclass(frozen=True)
class Scope:
    """What to measure: the ``window`` (:data:`Span`; default the steady iterations) and, beside
    it, which rank and how ranges are named. Each field means one thing: no field overrides
    another."""

    window: Span = STEADY_ITERATIONS
    #: one rank only (``--rank R``): the process whose pid is R, else (nsys) the R-th process by
    #: sorted pid (:func:`nsysmoe.pipeline.rank_pid`); applied by :func:`~nsysmoe.pipeline.prepare`
    rank: int | None = None
    step_pattern: str | None = None  # names the iteration ranges (``--step-range REGEX``)
    raw_nvtx: bool = False  # keep PyTorch's ", op_id = N" suffixes (nsys stats' exact names)
    phase: str | None = None  # more NVTX ranges to measure as step phases (``--phase REGEX``)
    #: what-if replays asked for beside the defaults (``--what-if ep.combine*0.5``):
    #: :func:`nsysmoe.measure.critical_path.parse_scenario`
    what_if: tuple[str, ...] = ()
    #: build the dependency graph: the critical path and the what-if replays
    #: (``--no-critical-path``: False)
    critical_path: bool = True


STEADY = Scope()  # the default everywhere: the steady iterations, the detected warm-up skipped
WHOLE = Scope(window=Whole())

StepTimeline = Literal["gpu", "cpu", "none"]
#: why a window was measured: it was asked for; the trace has no iterations (so the whole
#: trace); the leading iterations left out by the warm-up rule, or as many as ``--skip`` said
WindowWhy = Literal["asked", "no iterations", "warm-up detected", "warm-up given"]


def iterations_phrase(first: int | None, last: int | None) -> str:
    """Iterations ``first``–``last`` (inclusive) in words, either end open (None): "iterations
    2–7", "iterations 3 on", "iterations up to 20", "every iteration"."""
    if first is None and last is None:
        return "every iteration"
    if last is None:
        return f"iterations {first} on"
    if first is None:
        return f"iterations up to {last}"
    return f"iterations {first}–{last}"


@dataclass(frozen=True)
class WindowChoice:
    """Which part of a trace was measured, and why: made once
    (:func:`nsysmoe.measure.window.choose`), carried by the analysis and its JSON; reports
    format it, nothing parses it.

    ``kind``: ``whole``, ``time`` or ``iterations``; ``window`` on the GPU timeline and
    ``cpu_window`` (the kept iterations' CPU ranges, for CPU-side NVTX totals); ``kept``: the
    iterations measured; ``found``: the complete iterations the trace has; ``skipped``: leading
    ones left out as warm-up, with the rule's ``tolerance`` (a fraction) and ``median_ns`` (the
    steady median) where the rule decided; ``asked``: iterations first–last asked for;
    ``common``: only the iterations both traces of an A/B have; ``truncated``: last iterations
    left out because the capture cut them short; ``timeline``: where the iterations were
    mapped (``gpu``, ``cpu`` without CUDA API rows, ``none``); ``origin_ns``: the first GPU
    activity a relative time window counts from; ``slow_first``: the first kept iteration and
    how much slower (%) than the kept median it is, when warm-up may remain;
    ``description``: all of it in one sentence (what reports show in full)."""

    kind: Literal["whole", "time", "iterations"]
    why: WindowWhy
    window: Window = WHOLE_TRACE
    cpu_window: Window = WHOLE_TRACE
    kept: tuple[int, ...] = ()
    found: int = 0
    skipped: int = 0
    tolerance: float | None = None
    median_ns: float | None = None
    asked: tuple[int | None, int | None] | None = None
    common: bool = False
    truncated: tuple[int, ...] = ()
    timeline: StepTimeline = "none"
    origin_ns: int | None = None
    slow_first: tuple[int, float] | None = None
    description: str = ""

    @property
    def which(self) -> str:
        """The kept iterations in words: "iteration 5", "iterations 2–7"."""
        if not self.kept:
            return "no iterations"
        if len(self.kept) == 1:
            return f"iteration {self.kept[0]}"
        return iterations_phrase(self.kept[0], self.kept[-1])

    def to_dict(self) -> dict[str, object]:
        """The JSON ``window`` object (its first five keys as in every earlier release)."""
        return {
            "start_ns": self.window.start_ns,
            "end_ns": self.window.end_ns,
            "description": self.description,
            "cpu_start_ns": self.cpu_window.start_ns,
            "cpu_end_ns": self.cpu_window.end_ns,
            "kind": self.kind,
            "why": self.why,
            "kept": list(self.kept),
            "found": self.found,
            "skipped": self.skipped,
            "warmup_tolerance_pct": None if self.tolerance is None else 100 * self.tolerance,
            "steady_median_ns": self.median_ns,
            "asked": None if self.asked is None else list(self.asked),
            "common": self.common,
            "truncated": list(self.truncated),
            "timeline": self.timeline,
            "origin_ns": self.origin_ns,
            "slow_first": (None if self.slow_first is None else
                           {"step": self.slow_first[0], "slower_pct": self.slow_first[1]}),
        }  # fmt: skip


@dataclass(frozen=True)
class ClassifiedTrace:
    """A trace with every kernel classified once (``kernels`` = ``trace.kernels`` plus ``class``
    and ``subclass``); it travels with the analysis, so no later stage classifies again."""

    trace: Trace
    kernels: pl.DataFrame
    rules_source: str
