"""Every result type: frozen data plus provenance, each with ``to_dict()`` (the JSON body) and
``to_polars()`` where a table is the natural view. Results import no renderer: ``nsysmoe.renderers``
turns them into text, never the reverse.

One line of a stage's flow per type: a trace's :class:`TraceAnalysis` (per GPU, per iteration,
the wall), an A/B's :class:`Comparison` of two :class:`Side` s, many ranks' :class:`RanksAnalysis`
and the A/B of two such runs, :class:`RanksComparison`, another tool's view, :class:`CompatResult`,
and the figure data :class:`Timeline`. Longer than most modules because it is the one home of
the data model's outputs (a reason the layout states: one hop to any result type).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Literal

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet
from nsysmoe.model import (
    ClassifiedTrace,
    Launch,
    SourceFormat,
    StepTimeline,
    Window,
    WindowChoice,
)

Wall = Literal["memory", "communication", "host overhead", "compute"]
Unit = Literal["ns", "pct", "count"]
Better = Literal["lower", "higher"]
Outcome = Literal["improvement", "regression", "no change", "n/a"]
Dispatcher = Literal["HybridEP", "DeepEP", "alltoall (NCCL SendRecv)", "none detected"]
Evidence = dict[str, float | int | str | None]

#: Per-iteration table: one row per kept iteration, all GPUs of the trace together.
ITERATION_SCHEMA = {
    "step": pl.Int64,
    "start_ns": pl.Int64,  # GPU start of the iteration (earliest process)
    "end_ns": pl.Int64,  # GPU end of the iteration's window (latest process)
    "step_ns": pl.Int64,  # GPU period (median over processes)
    "comm_ns": pl.Int64,
    "hidden_ns": pl.Int64,
    "exposed_ns": pl.Int64,
    "hidden_pct": pl.Float64,
    "idle_ns": pl.Int64,  # per GPU: the iteration window's length − active time, summed
}
#: ``TraceAnalysis.iterations`` also carries ``idle_host_ns``, ``idle_dependency_ns`` and
#: ``idle_other_ns`` (:func:`nsysmoe.measure.idle.idle_per_iteration`), adding up to idle_ns.


@dataclass(frozen=True)
class Failure:
    """One input (a path, or a pair of paths) that could not be analysed, and why."""

    path: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass(frozen=True)
class WallVerdict:
    """Which of the Three Walls holds a GPU back, with the evidence, thresholds and knobs."""

    wall: Wall
    reason: str
    evidence: Evidence
    thresholds: dict[str, float]
    knobs: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"wall": self.wall, "reason": self.reason, "evidence": self.evidence,
                "thresholds": self.thresholds, "knobs": list(self.knobs)}  # fmt: skip


@dataclass(frozen=True)
class Totals:
    """All GPUs of an analysis together: durations summed over GPUs, hidden % from the sums."""

    span_ns: int
    active_ns: int
    idle_ns: int
    comm_ns: int
    compute_ns: int
    hidden_ns: int
    exposed_ns: int
    hidden_pct: float | None
    comm_gemm_attn_ns: int
    kernels: int


@dataclass(frozen=True)
class Steps:
    """Detected iterations per process (:data:`nsysmoe.measure.steps.STEP_SCHEMA`); ``timeline``
    says whether they were mapped onto the GPU or, without CUDA API rows, left on the CPU;
    ``warnings``: ranges the pattern named that are no iteration, and why (for the report)."""

    table: pl.DataFrame
    pattern: str
    timeline: StepTimeline
    warnings: tuple[str, ...] = ()

    @property
    def numbers(self) -> list[int]:
        """Step numbers complete in every process that has them."""
        done = self.table.group_by("step").agg(pl.col("complete").all())
        return sorted(done.filter(pl.col("complete"))["step"].to_list())

    @property
    def truncated(self) -> list[int]:
        """Last steps left out because the capture ended before they did."""
        return sorted(self.table.filter(~pl.col("complete"))["step"].unique().to_list())


#: host facts every report may show (TARGET_INFO_SYSTEM_ENV names)
HOST_KEYS = ("NvDriverVersion", "CudaDriverVersion", "CudaRuntimeVersion", "NcclVersion",
             "OsDescription", "Hostname", "CpuCores", "HardwarePlatform", "DistributedBackend",
             "WorldSize")  # fmt: skip
PERF_ENV = re.compile(
    r"^(?:NCCL_|NVTE_|TORCH_NCCL_|NVSHMEM_|CUDA_DEVICE_MAX_CONNECTIONS$|CUDA_VISIBLE_DEVICES$"
    r"|PYTORCH_CUDA_ALLOC_CONF$|OMP_NUM_THREADS$|UB_|DEEPEP_|HYBRID_EP_)"
)


@dataclass(frozen=True)
class Caveat:
    """Why a trace's timing is not what its command line claims (:mod:`nsysmoe.measure.validity`):
    ``code`` ``backend_not_in_use`` or ``benchmark_only``; ``text`` says it to a reader."""

    code: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "text": self.text}


def launch_dict(launch: Launch, config: dict[str, str] | None = None) -> dict[str, object]:
    """What an output says of the launch: the command, the contract settings parsed from it,
    the variables that change performance, how many variables there were, and the host; secret
    values arrive redacted (:func:`nsysmoe.io.load_trace` →
    :func:`nsysmoe.io.redact.redact_trace`)."""
    return {
        "command": list(launch.command),
        "config": dict(config or {}),
        "working_dir": launch.working_dir,
        "environment": {k: v for k, v in launch.environment.items() if PERF_ENV.search(k)},
        "environment_variables": len(launch.environment),
        "host": {k: launch.system[k] for k in HOST_KEYS if k in launch.system},
    }


def _by_channel(table: pl.DataFrame, drop: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """Rows of a channel table as ``{channel: {metric: value}}`` (report order kept)."""
    return {r.pop("channel"): r for r in table.drop(*drop).to_dicts()}


@dataclass(frozen=True)
class Collectives:
    """Collectives matched across ranks (:mod:`nsysmoe.measure.collectives`): the clock offsets
    applied (rank, offset_ns, basis), wait vs transfer per (rank, channel) and per rank over
    all its channels (``rank_totals``: unions, overlapping channels counted once), the
    straggler per channel, and the instances left unmatched (``incomplete``: per step, channel,
    name and launch number ``k``, the ranks that have all of its stretch's launches,
    ``present_on``, and those with only some, which cannot be told apart, ``ambiguous_on``;
    stretches not every rank has equally many launches in are listed there, never guessed:
    :mod:`nsysmoe.measure.collectives`)."""

    offsets: pl.DataFrame
    waits: pl.DataFrame
    stragglers: pl.DataFrame
    incomplete: pl.DataFrame
    matched: int = 0
    #: exposed wait / exposed collective time (%), and the imbalance knobs when it dominates
    exposed_wait_pct: float | None = None
    knobs: tuple[str, ...] = ()
    rank_totals: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def imbalanced(self) -> bool:
        return bool(self.knobs)

    @classmethod
    def none(cls, offsets: pl.DataFrame | None = None) -> Collectives:
        empty = pl.DataFrame()
        return cls(offsets if offsets is not None else empty, empty, empty, empty, 0)

    def to_dict(self) -> dict[str, object]:
        return {
            "matched_instances": self.matched,
            "exposed_wait_pct": self.exposed_wait_pct,
            "verdict": "imbalance / straggler" if self.imbalanced else None,
            "knobs": list(self.knobs),
            "offsets": self.offsets.to_dicts(),
            "waits": self.waits.to_dicts(),
            "rank_totals": self.rank_totals.to_dicts(),
            "stragglers": self.stragglers.to_dicts(),
            "incomplete": self.incomplete.to_dicts(),
        }


@dataclass(frozen=True)
class Graphs:
    """CUDA graphs over the analysis window (:mod:`nsysmoe.measure.graphs`): how the capture
    says it traced them (``recorded``), what the tables hold (``traced``: ``none``, ``graph``
    = whole-graph rows, ``node`` = kernels of replays, or ``graph+node``), all-GPU sums, the
    per-GPU table, and NVTX ranges pushed during graph capture as (name, count)."""

    recorded: dict[str, str]
    traced: str
    replays: int
    whole_rows: int
    whole_ns: int
    unknown_ns: int
    node_kernels: int
    node_ns: int
    node_comm_ns: int
    per_gpu: pl.DataFrame
    capture_nvtx: tuple[tuple[str, int], ...] = ()

    @property
    def present(self) -> bool:
        return self.traced != "none"

    def to_dict(self) -> dict[str, object]:
        return {
            "traced": self.traced,
            "recorded_options": self.recorded,
            "replays": self.replays,
            "whole_rows": self.whole_rows,
            "whole_ns": self.whole_ns,
            "unknown_ns": self.unknown_ns,
            "node_kernels": self.node_kernels,
            "node_ns": self.node_ns,
            "node_comm_ns": self.node_comm_ns,
            "per_gpu": self.per_gpu.to_dicts(),
            "capture_nvtx": [{"name": n, "count": c} for n, c in self.capture_nvtx],
        }


@dataclass(frozen=True)
class RankChoice:
    """The one rank an analysis measured (``--rank R``): ``rank`` as asked, ``pid`` the process
    it named (R itself where a process has that pid, else the R-th by sorted pid)."""

    rank: int
    pid: int

    def to_dict(self) -> dict[str, int]:
        return {"rank": self.rank, "pid": self.pid}

    @property
    def text(self) -> str:
        """How every report says it: ``rank 1 only (pid 145)``."""
        return f"rank {self.rank} only (pid {self.pid})"


@dataclass(frozen=True)
class TraceAnalysis:
    """Everything ``nsysmoe analyze`` measured on one trace.

    ``gpus``: one row per GPU (pid, device, gpu_name and the metrics of
    :mod:`nsysmoe.measure.overlap`); ``classes``: per (pid, device, class) count/sum_ns/union_ns;
    ``nvtx``: CPU-side range totals (name, style, count, total_ns, min_ns, max_ns);
    ``unclassified``: busiest kernel names no rule recognised (name, count, sum_ns);
    ``iterations``: per-iteration step time and communication (:data:`ITERATION_SCHEMA`);
    ``totals``: all GPUs together; ``graphs``: CUDA graphs (:class:`Graphs`); ``source``: the
    classified trace it was measured on (for A/B facts and figures; ``None`` once detached to
    travel between processes).
    """

    path: str
    source_format: SourceFormat
    schema_version: str | None
    product_version: str | None
    #: which part of the trace was measured, and why (made once by nsysmoe.measure.window)
    window_choice: WindowChoice
    rules_source: str
    gpus: pl.DataFrame
    classes: pl.DataFrame
    nvtx: pl.DataFrame
    unclassified: pl.DataFrame
    iterations: pl.DataFrame
    step_timeline: StepTimeline
    gpu_walls: tuple[WallVerdict, ...]
    wall: WallVerdict
    totals: Totals
    graphs: Graphs
    channels: pl.DataFrame  # per (pid, device, channel): nsysmoe.measure.channels
    channel_totals: pl.DataFrame  # per channel, all GPUs summed
    iteration_channels: pl.DataFrame  # per (step, channel), all GPUs, with on-the-table figures
    idle_gaps: pl.DataFrame  # per GPU, the largest idle gaps (nsysmoe.measure.idle.GAP_SCHEMA)
    phases: pl.DataFrame  # per (pid, device, phase): nsysmoe.measure.phases.PHASE_SCHEMA
    phase_totals: pl.DataFrame  # per phase, all GPUs summed
    layers: pl.DataFrame  # per (pid, device, layer) where phase names give layers
    layer_totals: pl.DataFrame  # per layer, all GPUs summed
    arrivals: pl.DataFrame  # matchable comm kernels (nsysmoe.measure.collectives.arrivals)
    compute_under_comm: pl.DataFrame  # per GPU ⋃compute ∩ ⋃comm (for exposed wait/transfer)
    clock_offset_ns: int  # added to this file's times to put them on the UTC epoch
    clock_basis: str  # why that offset
    collectives: Collectives  # across the GPUs of this file (a multi-process export)
    launch: Launch = field(default_factory=Launch)  # secrets redacted at io.load_trace
    #: the contract settings its command line gives (nsysmoe.measure.launch.contract_config)
    launch_config: dict[str, str] = field(default_factory=dict)
    caveats: tuple[Caveat, ...] = ()  # the timing is not what the command line claims
    not_captured: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: per (pid, step): each process alone in its own iteration windows (its GPUs summed), and
    #: per (pid, step, channel) its channel sums — what ``iterations`` and
    #: ``iteration_channels`` add up; an A/B's per-rank values read them
    process_iterations: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False,
                                             compare=False)  # fmt: skip
    process_iteration_channels: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False,
                                                     compare=False)  # fmt: skip
    #: per (pid, name, style) the NVTX totals ``nvtx`` adds up, and per pid its OOM markers
    #: (:func:`nsysmoe.measure.walls.oom_markers`): a rank's own, for the same reason
    process_nvtx: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False, compare=False)
    oom_markers: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    source: ClassifiedTrace | None = field(default=None, repr=False, compare=False)
    #: ``--rank R`` (:attr:`nsysmoe.model.Scope.rank`): the rank asked for and the process it
    #: named; None when every process was measured
    rank: RankChoice | None = None
    #: what bounds the step and what each knob could buy (:mod:`nsysmoe.measure.critical_path`);
    #: None where the graph was not built (no iterations on the GPU timeline,
    #: ``--no-critical-path``)
    critical_path: CriticalPath | None = None
    #: how a report was read (:attr:`nsysmoe.model.Trace.via`), None for an export itself
    via: str | None = None
    #: the SMs communication holds and what hiding it cost compute (:class:`SmBudget`)
    sm: SmBudget = field(default_factory=lambda: SmBudget.none())

    @property
    def window(self) -> Window:
        """The measured window on the GPU timeline."""
        return self.window_choice.window

    @property
    def cpu_window(self) -> Window:
        """The kept iterations' CPU ranges (CPU-side NVTX totals are taken over them)."""
        return self.window_choice.cpu_window

    @property
    def classified(self) -> ClassifiedTrace:
        """The classified trace it was measured on (``source``), for what is measured from it
        later; an error once the analysis was detached from it."""
        if self.source is None:
            raise NsysmoeError(f"{self.path}: analysis was detached from its trace; re-analyse it")
        return self.source

    @property
    def median_step_ns(self) -> int | None:
        """The median step time over the window's iterations (their GPU periods), as every report
        of this trace says it; None without iterations."""
        it = self.iterations
        return None if it.is_empty() else int(it["step_ns"].median())

    @property
    def generated_by(self) -> str | None:
        """The program that generated this trace when it is synthetic, not a measurement."""
        return self.launch.generated_by

    def to_polars(self) -> pl.DataFrame:
        """The per-GPU table (one row per (pid, device))."""
        return self.gpus

    def to_dict(self) -> dict[str, object]:
        classes = self.classes.partition_by("pid", "device", as_dict=True)
        gpus = []
        for row, wall in zip(self.gpus.iter_rows(named=True), self.gpu_walls, strict=True):
            per_class = classes.get((row["pid"], row["device"]))
            row["classes"] = {
                c["class"]: {"count": c["count"], "sum_ns": c["sum_ns"], "union_ns": c["union_ns"]}
                for c in (per_class.iter_rows(named=True) if per_class is not None else [])
            }
            of_gpu = (pl.col("pid") == row["pid"]) & (pl.col("device") == row["device"])
            row["channels"] = _by_channel(self.channels.filter(of_gpu), ("pid", "device"))
            row["phases"] = {r.pop("phase"): r for r in
                             self.phases.filter(of_gpu).drop("pid", "device").to_dicts()}
            row["layers"] = self.layers.filter(of_gpu).drop("pid", "device").to_dicts()
            gaps = self.idle_gaps.filter(of_gpu).drop("pid", "device")
            row["largest_idle_gaps"] = gaps.to_dicts()
            row["wall"] = wall.to_dict()
            gpus.append(row)
        steps: dict[int, dict[str, dict[str, object]]] = {}  # one pass, not a frame per step
        for r in self.iteration_channels.to_dicts():
            steps.setdefault(r.pop("step"), {})[r.pop("channel")] = r
        iterations = [it | {"channels": steps.get(it["step"], {})}
                      for it in self.iterations.to_dicts()]  # fmt: skip
        return {
            "path": self.path,
            "format": self.source_format,
            "via": self.via,
            "schema_version": self.schema_version,
            "product_version": self.product_version,
            "generated_by": self.generated_by,
            "window": self.window_choice.to_dict(),
            "rank": None if self.rank is None else self.rank.to_dict(),
            "rules": self.rules_source,
            "gpus": gpus,
            "channels": _by_channel(self.channel_totals, ()),
            "phases": {r.pop("phase"): r for r in self.phase_totals.to_dicts()},
            "layers": self.layer_totals.to_dicts(),
            "clock": {"offset_ns": self.clock_offset_ns, "basis": self.clock_basis},
            "launch": launch_dict(self.launch, self.launch_config),
            "caveats": [c.to_dict() for c in self.caveats],
            "collectives": self.collectives.to_dict(),
            "graphs": self.graphs.to_dict(),
            "nvtx": self.nvtx.select("name", "style", "count", "total_ns").to_dicts(),
            "wall": self.wall.to_dict(),
            "unclassified": self.unclassified.to_dicts(),
            "iterations": iterations,
            "iteration_timeline": self.step_timeline,
            "not_captured": self.not_captured,
            "warnings": list(self.warnings),
            **CriticalPath.json_keys(self.critical_path),
            **self.sm.to_dict(),
        }


# --- A/B ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """An analysed trace over its window, with window-limited facts for the comparison.

    ``label``: "off" or "on" (its place in the A/B); ``name``: what reports call it
    (``--labels``, else from the variable under test or the file name; "off"/"on" until then);
    ``kernel_names``: name, count, sum_ns, class (kernels in the window);
    ``compute_kernels``: class, count, sum_ns, median_ns for GEMM and attention;
    ``nvtx``: normalised name, count, total_ns (CPU side) of ranges in the window;
    ``phases_gpu``: MoE/NCCL phase ranges in the window projected onto the GPU — normalised name,
    count, busy_total_ns (Σ per-range exact union), gpu_span_total_ns, kernels, comm_ns,
    compute_ns, hidden_ns (see :mod:`nsysmoe.measure.projection`); ``projected``: the range
    instances ``phases_gpu`` adds up (one row each, with its pid).
    """

    label: str
    analysis: TraceAnalysis
    kernel_names: pl.DataFrame
    kernel_channels: pl.DataFrame  # name, class, channel (None: compute), count
    compute_kernels: pl.DataFrame
    nvtx: pl.DataFrame
    phases_gpu: pl.DataFrame
    gpu_models: tuple[str, ...]
    ranks: int
    dispatcher: Dispatcher
    projected: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.label)


#: A Δ % is shown only where its base (the off value) is at least this share (%) of the off
#: side's GPU-active time over the same window (all GPUs summed, as the rows are): the rows are
#: totals over that window, and one under 1 % of it is a sliver (the shipped A/B's
#: communication concurrent with GEMM/attention, 0.120 ms of 597 ms, went +47,274 %; the seed's
#: 9.079 ms → 3,959 ms, +43,506 %), whose percentage says nothing the Δ in ms does not. Rows
#: that are one event's duration (the median step, a class's median kernel) and counts have no
#: floor: their base is a typical size, not a share of the window.
PCT_BASE_SHARE = 1.0


@dataclass(frozen=True)
class RankValue:
    """One metric of one rank of an A/B: the ``rank``-th process by sorted pid of each side
    (``pid_off``, ``pid_on``; None where that side has fewer processes) and its values."""

    rank: int
    pid_off: int | None
    pid_on: int | None
    off: float | int | None
    on: float | int | None

    def to_dict(self) -> dict[str, object]:
        return {"rank": self.rank, "pid_off": self.pid_off, "pid_on": self.pid_on,
                "off": self.off, "on": self.on}  # fmt: skip


@dataclass(frozen=True)
class MetricRow:
    """One compared quantity; ``unit`` "pct" is a percentage, its Δ in points. ``per_rank``:
    the same quantity for each rank alone. ``pct_floor`` (in the row's unit): the smallest base
    a Δ % is given for (:data:`PCT_BASE_SHARE`); None: any non-zero base."""

    key: str
    label: str
    unit: Unit
    off: float | int | None
    on: float | int | None
    better: Better | None = None  # None: no direction
    note: str = ""
    per_rank: tuple[RankValue, ...] = ()
    pct_floor: float | None = None

    @property
    def delta(self) -> float | int | None:
        return None if self.off is None or self.on is None else self.on - self.off

    @property
    def delta_pct(self) -> float | None:
        """Δ as a percentage of the off value; None for a percentage (its Δ is in points), a
        zero base, or one below ``pct_floor`` (the change is then said in absolute terms only:
        a percentage of a sliver is noise, +47,274 % for 0.120 → 56.929 ms)."""
        if self.delta is None or not self.off or self.unit == "pct" or self.pct_floored:
            return None
        return 100.0 * self.delta / self.off

    @property
    def pct_floored(self) -> bool:
        """The off value is below ``pct_floor``: no Δ % is shown."""
        return (self.pct_floor is not None and self.off is not None
                and abs(self.off) < self.pct_floor)  # fmt: skip

    @property
    def gated_pct(self) -> float | None:
        """The relative change ``--fail-if`` (``KEY_delta_pct``) and the verdicts test: Δ over
        the off value, but over no less than ``pct_floor``, so noise on a tiny base cannot pass
        a threshold while a real change from it still does. Equal to :attr:`delta_pct` wherever
        that is given."""
        if self.delta is None or self.off is None or self.unit == "pct":
            return None
        base = max(abs(self.off), self.pct_floor or 0)
        return 100.0 * self.delta / base if base else None

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key, "label": self.label, "unit": self.unit, "off": self.off,
            "on": self.on, "delta": self.delta, "delta_pct": self.delta_pct,
            "delta_pct_floor": self.pct_floor, "better": self.better, "note": self.note,
        }  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """Improvement, regression or no change of one metric against its noise floor; ``change``
    and ``noise`` are in ``unit``: "%" (relative change) or "pp" (points, for percentages).
    ``base_ns``: set where the off value was below the row's ``pct_floor``: the change is then
    a percentage of that floor (:attr:`MetricRow.gated_pct`), not of the tiny base."""

    key: str
    label: str
    outcome: Outcome
    change: float | None
    noise: float
    noise_source: str
    unit: Literal["%", "pp"] = "%"
    base_ns: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"metric": self.key, "label": self.label, "outcome": self.outcome,
                "change": self.change, "change_base_ns": self.base_ns, "noise_floor": self.noise,
                "noise_source": self.noise_source}  # fmt: skip


#: how a contract row bears on the comparison: ``same`` on both sides; ``variable`` (the variable
#: under test); ``consequence`` (a difference the variable under test explains); ``incidental``
#: (differs, bears not on performance: job ids, ports, output paths); ``unexpected`` (breaks the
#: contract)
Role = Literal["same", "variable", "consequence", "incidental", "unexpected"]


@dataclass(frozen=True)
class Check:
    """One clause of the measurement contract: both sides' values and how they bear on it.
    ``off``/``on`` are what a report shows ("3,256", "12 names"); ``off_value``/``on_value`` the
    number behind them where the check is a count (kernels, names, iterations, GPUs), else None."""

    name: str
    off: str
    on: str
    role: Role = "same"
    detail: str = ""
    off_value: int | float | None = None
    on_value: int | float | None = None

    @property
    def ok(self) -> bool:
        return self.role != "unexpected"

    def to_dict(self) -> dict[str, object]:
        return {"check": self.name, "off": self.off, "on": self.on,
                "off_value": self.off_value, "on_value": self.on_value, "ok": self.ok,
                "role": self.role, "detail": self.detail}  # fmt: skip


def _failed_clause(c: Check) -> str:
    """What breaks a clause: "X differs (…)", or, where both sides agree but should not (a
    declared variable nothing varied), "X: <why>", never "differs" of two equal values."""
    if c.off == c.on and c.detail:
        return f"{c.name} {c.off} on both sides: {c.detail}"
    return f"{c.name} differs ({c.detail or c.off + ' vs ' + c.on})"


@dataclass(frozen=True)
class Variable:
    """The variable under test of an A/B: ``key`` as ``--vary`` names it (a contract setting, an
    option, an environment variable or a kernel channel: ``kind``), each side's value (None: not
    set or not recorded), and whether ``--vary`` declared it or it was inferred as the one
    setting that differs."""

    key: str
    kind: Literal["config", "option", "environment", "channel", "version"]
    off: str | None
    on: str | None
    declared: bool

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "kind": self.kind, "off": self.off, "on": self.on,
                "declared": self.declared}  # fmt: skip


@dataclass(frozen=True)
class Contract:
    """The measurement contract: matched when no row is unexpected. ``variables``: the variable
    under test (declared or inferred); ``note``: how it was found, or how to declare it."""

    checks: tuple[Check, ...]
    variables: tuple[Variable, ...] = ()
    note: str = ""

    @property
    def matched(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)

    def summary(self) -> str:
        if self.matched:
            under = (" apart from the variable under test ("
                     + ", ".join(v.key for v in self.variables) + ")") if self.variables else ""
            return f"matched{under}: " + ", ".join(
                c.name for c in self.checks if c.role == "same") + " agree"
        return "NOT matched: " + "; ".join(_failed_clause(c) for c in self.failures)

    def to_dict(self) -> dict[str, object]:
        return {"matched": self.matched, "variables": [v.to_dict() for v in self.variables],
                "note": self.note, "checks": [c.to_dict() for c in self.checks]}


@dataclass(frozen=True)
class StepChange:
    """What the step-time change of an A/B is made of, per iteration and per GPU (ns): the
    change in exposed communication, and beside it the change in GEMM + attention kernel time
    (compute inflation: hidden communication shares SMs). ``explained_pct`` = 100 · −Δexposed /
    −Δstep: the share of the step-time change the exposed-communication change accounts for
    (over 100 %: inflation or other time ate part of the gain)."""

    step_delta_ns: float | None
    exposed_delta_ns: float | None
    compute_delta_ns: float | None
    explained_pct: float | None
    #: the change in the GEMM + attention time that the same kernels (name and grid) took
    #: longer overlapped than alone (:attr:`SmBudget.gemm_attn_extra_ns`), per iteration and GPU:
    #: how much of ``compute_delta_ns`` is inflation measured kernel by kernel
    inflation_delta_ns: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"step_delta_ns": self.step_delta_ns, "exposed_delta_ns": self.exposed_delta_ns,
                "compute_delta_ns": self.compute_delta_ns, "explained_pct": self.explained_pct,
                "inflation_delta_ns": self.inflation_delta_ns}


@dataclass(frozen=True)
class Comparison:
    """A/B of two traces: the metric rows, verdicts, contract, per-GPU pairs and top changes."""

    off: Side
    on: Side
    contract: Contract
    rows: tuple[MetricRow, ...]
    verdicts: tuple[Verdict, ...]
    per_gpu: pl.DataFrame
    kernel_changes: pl.DataFrame
    nvtx_changes: pl.DataFrame
    step_change: StepChange = StepChange(None, None, None, None)

    def to_polars(self) -> pl.DataFrame:
        """The side-by-side metric table: key, label, unit, off, on, delta, delta_pct."""
        return pl.DataFrame([r.to_dict() for r in self.rows])

    def row(self, key: str) -> MetricRow:
        return next(r for r in self.rows if r.key == key)

    def to_dict(self) -> dict[str, object]:
        return {
            "off": self.off.analysis.to_dict(),
            "on": self.on.analysis.to_dict(),
            "labels": {"off": self.off.name, "on": self.on.name},
            "contract": self.contract.to_dict()
            | {"dispatcher": {"off": self.off.dispatcher, "on": self.on.dispatcher}},
            "metrics": [r.to_dict() | {"per_rank": [v.to_dict() for v in r.per_rank]}
                        for r in self.rows],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "per_gpu": self.per_gpu.to_dicts(),
            "kernel_changes": self.kernel_changes.to_dicts(),
            "nvtx_changes": self.nvtx_changes.to_dicts(),
            "step_change": self.step_change.to_dict(),
        }


# --- many ranks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepStraggler:
    """The rank with the longest median step, and how much longer than the median over ranks."""

    rank: str
    step_ns: float
    vs_median_pct: float


@dataclass(frozen=True)
class WaitStraggler:
    """The rank with the least communication: the others wait for it in their collectives."""

    rank: str
    comm_ns: float
    others_wait_up_to_ns: float


@dataclass(frozen=True)
class Stragglers:
    """The straggler found each way (None: the ranks agree on that measure)."""

    by_step_time: StepStraggler | None = None
    by_comm_wait: WaitStraggler | None = None

    def named(self) -> list[tuple[str, StepStraggler | WaitStraggler]]:
        """(kind, straggler) for each way one was found, step time first."""
        both = (("by_step_time", self.by_step_time), ("by_comm_wait", self.by_comm_wait))
        return [(kind, s) for kind, s in both if s is not None]

    def to_dict(self) -> dict[str, dict[str, str | float]]:
        return {kind: asdict(s) for kind, s in self.named()}


@dataclass(frozen=True)
class MissingIterations:
    """Ranks that lack iterations other ranks of the run have: ``missing`` (step numbers),
    ``has`` (how many they have), ``of`` (how many the run's ranks have together). Their step
    time is the median over the iterations they have."""

    ranks: tuple[str, ...]
    missing: tuple[int, ...]
    has: int
    of: int

    def to_dict(self) -> dict[str, object]:
        return {"ranks": list(self.ranks), "missing": list(self.missing), "has": self.has,
                "of": self.of}  # fmt: skip


@dataclass(frozen=True)
class RanksAnalysis:
    """Many ranks of one run. ``ranks``: one row per GPU across all files (file, rank label, the
    per-GPU metrics, the file's iteration count and median step, as the file's own analysis
    finds it); ``spread``: per metric median/min/max across ranks and which rank holds each;
    ``stragglers``: by step time and by communication wait; ``missing_iterations``: ranks that
    lack iterations others have."""

    analyses: tuple[TraceAnalysis, ...]
    failures: tuple[Failure, ...]
    ranks: pl.DataFrame
    spread: pl.DataFrame
    stragglers: Stragglers
    graphs: Graphs  # every rank's CUDA graphs together
    channel_totals: pl.DataFrame  # per communication channel, every rank's GPUs summed
    collectives: Collectives  # matched across every GPU of every file, on one clock
    missing_iterations: tuple[MissingIterations, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        """The per-rank table."""
        return self.ranks

    def to_dict(self) -> dict[str, object]:
        return {
            "ranks": self.ranks.to_dicts(),
            "missing_iterations": [m.to_dict() for m in self.missing_iterations],
            "spread": self.spread.to_dicts(),
            "stragglers": self.stragglers.to_dict(),
            "channels": _by_channel(self.channel_totals, ()),
            "graphs": self.graphs.to_dict(),
            "collectives": self.collectives.to_dict(),
            "failures": [f.to_dict() for f in self.failures],
            "traces": [a.to_dict() for a in self.analyses],
        }


@dataclass(frozen=True)
class RanksComparison:
    """A/B of two multi-rank runs: rank pairs compared one by one, then summed."""

    pairs: tuple[Comparison, ...]
    failures: tuple[Failure, ...]
    rows: tuple[MetricRow, ...]
    verdicts: tuple[Verdict, ...]
    per_rank: pl.DataFrame
    matched: bool
    contract_notes: tuple[str, ...]
    #: collectives matched across each run's ranks (off, on)
    collectives_off: Collectives = field(default_factory=Collectives.none)
    collectives_on: Collectives = field(default_factory=Collectives.none)
    #: what the runs are called: the pairs' labels where they all agree, else "off"/"on"
    labels: tuple[str, str] = ("off", "on")

    def to_polars(self) -> pl.DataFrame:
        """The summed metric table over all rank pairs."""
        return pl.DataFrame([r.to_dict() for r in self.rows])

    def to_dict(self) -> dict[str, object]:
        return {
            "labels": {"off": self.labels[0], "on": self.labels[1]},
            "matched": self.matched,
            "contract_notes": list(self.contract_notes),
            "metrics": [r.to_dict() | {"per_rank": [v.to_dict() for v in r.per_rank]}
                        for r in self.rows],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "per_rank": self.per_rank.to_dicts(),
            "collectives": {"off": self.collectives_off.to_dict(),
                            "on": self.collectives_on.to_dict()},
            "failures": [f.to_dict() for f in self.failures],
            "pairs": [p.to_dict() for p in self.pairs],
        }


# --- other tools, kernels, figures --------------------------------------------------------------


@dataclass(frozen=True)
class CompatResult:
    """Another tool's figure beside nsysmoe's default one, per GPU, with the reasons they differ.

    ``gpus``: pid, device, hta_overlap_pct (HTA's rounded figure, NaN without communication),
    hidden_pct (nsysmoe default, whole trace), diff_pp (hidden_pct − hta_overlap_pct),
    hta_ratio (unrounded), hta_comm_us, hta_overlap_us, comm_ns, hidden_ns.
    ``reasons``: one line per convention that matters for this trace; ``explanation`` joins them.
    """

    path: str
    tool: str
    gpus: pl.DataFrame
    conventions: tuple[str, ...]
    reasons: tuple[str, ...]
    explanation: str

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "gpus": self.gpus.to_dicts(), "reasons": list(self.reasons)}


@dataclass(frozen=True)
class CompatRun:
    """``--compat``: one :class:`CompatResult` per trace of one job, with the tool's conventions."""

    results: tuple[CompatResult, ...]

    @property
    def tool(self) -> str:
        return self.results[0].tool

    def to_dict(self) -> dict[str, object]:
        return {"tool": self.tool, "conventions": list(self.results[0].conventions),
                "traces": [r.to_dict() for r in self.results]}  # fmt: skip


@dataclass(frozen=True)
class KernelSummary:
    """``nsysmoe kernels``: kernel names by total time with their class (name, class, subclass,
    count, sum_ns, mean_ns, pct_of_kernel_time), ``top`` of them shown (0 = all)."""

    source: str
    table: pl.DataFrame
    top: int = 0

    @property
    def shown(self) -> pl.DataFrame:
        return self.table if self.top <= 0 else self.table.head(self.top)

    def to_polars(self) -> pl.DataFrame:
        return self.table

    def to_dict(self) -> dict[str, object]:
        return {"trace": self.source, "kernels": self.shown.to_dicts()}


@dataclass(frozen=True)
class GpuLanes:
    """One GPU's exact interval unions inside a timeline's interval, per lane; ``channels`` are
    the communication lanes per channel (report order), ``graph`` the whole CUDA-graph rows of
    unknown contents (compute, but not in ``other_compute``)."""

    @dataclass(frozen=True)
    class Channel:
        """One channel lane: exposed = ⋃C_x − ⋃compute, hidden = ⋃C_x ∩ ⋃compute (disjoint).
        ``names`` is one channel, or more when a GPU's smallest channels share one lane."""

        names: tuple[str, ...]
        exposed: IntervalSet
        hidden: IntervalSet

    pid: int
    device: int
    gpu_name: str | None
    comm: IntervalSet
    exposed: IntervalSet
    hidden: IntervalSet
    gemm_attn: IntervalSet
    other_compute: IntervalSet
    copies: IntervalSet
    idle: IntervalSet
    hidden_pct: float | None  # of this GPU's communication in the interval
    graph: IntervalSet = field(default_factory=IntervalSet.empty)
    channels: tuple[GpuLanes.Channel, ...] = ()


@dataclass(frozen=True)
class Timeline:
    """Figure data of one trace: the lanes of its first GPUs over one iteration [lo_ns, hi_ns)
    (``how`` says which and why), measured by :mod:`nsysmoe.measure.lanes`; ``hidden_pct`` is
    over the drawn GPUs, so a title agrees with the lanes under it."""

    path: str
    lo_ns: int
    hi_ns: int
    how: str
    gpus: tuple[GpuLanes, ...]
    n_gpus: int
    hidden_pct: float | None
    max_channel_lanes: int = 0  # per GPU; more channels than this share its last lane
    #: the critical path of the drawn iteration (:attr:`CriticalPath.drawn`: step, pid,
    #: start_ns, end_ns, category) clipped to [lo_ns, hi_ns); empty where there is none
    critical_path: pl.DataFrame = field(default_factory=pl.DataFrame, compare=False)


#: the path's categories that are not a communication channel's (every dependency graph has
#: them: ``nsysmoe.depgraph.build.BASE_CATEGORIES``); every other category is a channel's: its
#: own name, its ``.transfer`` or its ``.wait``
PATH_BASE_CATEGORIES = ("gemm", "attention", "compute.other", "memcpy", "memset", "host",
                        "sync", "idle", "unexplained")  # fmt: skip


@dataclass(frozen=True)
class PathIteration:
    """One iteration's critical path (:mod:`nsysmoe.measure.critical_path`): on the rank whose
    step was slowest (``pid``), walked back through cross-rank edges to the iteration's start.

    ``step_ns``: the measured step; ``length_ns``: the path's length (its segments' sum, equal
    to the step); ``replay_step_ns``: the step the identity replay gives; ``segments``: ns per
    category (``gemm``, ``attention``, ``compute.other``, ``memcpy``, ``memset``, a channel's
    ``.transfer``/``.wait`` or its own name where no peer was matched, ``host``, ``sync``,
    ``idle``, ``unexplained``)."""

    step: int
    pid: int
    step_ns: int
    length_ns: int
    replay_step_ns: int
    unexplained_ns: int
    segments: dict[str, int]

    def to_dict(self) -> dict[str, object]:
        return {"step": self.step, "pid": self.pid, "step_ns": self.step_ns,
                "length_ns": self.length_ns, "replay_step_ns": self.replay_step_ns,
                "unexplained_ns": self.unexplained_ns, "segments": dict(self.segments)}  # fmt: skip


@dataclass(frozen=True)
class WhatIf:
    """One replayed change: ``scenario`` (``ep.combine*0.5``), the ``knob`` it stands for, the
    predicted and measured step (the window's replayed and measured length over its
    iterations: a replay moves iteration boundaries, so one iteration alone would mix that
    shift in), the gain, and whether the prediction is an upper bound on what the knob can buy
    (a part taking no time)."""

    scenario: str
    knob: str
    predicted_step_ns: float
    measured_step_ns: float
    gain_ns: float
    bound: bool

    @property
    def gain_pct(self) -> float | None:
        return 100 * self.gain_ns / self.measured_step_ns if self.measured_step_ns else None

    def to_dict(self) -> dict[str, object]:
        """Times as whole ns (the JSON's rule; a median of an even count can end in .5)."""
        return {"scenario": self.scenario, "knob": self.knob,
                "predicted_step_ns": round(self.predicted_step_ns),
                "measured_step_ns": round(self.measured_step_ns), "gain_ns": round(self.gain_ns),
                "gain_pct": self.gain_pct, "bound": self.bound}  # fmt: skip


@dataclass(frozen=True)
class SmBudget:
    """The SMs communication holds and what hiding it costs compute (issue 38): per channel
    and GPU the blocks its kernels launch and the SMs they hold (:mod:`nsysmoe.measure.
    sm_budget`), per GPU communication's SMs over time, the compute kernels that ran beside it
    against the SMs it left, and per compute kernel its duration overlapped against alone
    (:mod:`nsysmoe.measure.inflation`). ``hidden_ns``: the communication the trace hid (its
    totals), what the extra compute time bought."""

    channels: pl.DataFrame  # nsysmoe.measure.sm_budget.SM_BUDGET_SCHEMA
    gpus: pl.DataFrame  # SM_SHARE_SCHEMA
    beside: pl.DataFrame  # BESIDE_SCHEMA, the top rows by time beside communication
    inflation: pl.DataFrame  # nsysmoe.measure.inflation.INFLATION_SCHEMA
    hidden_ns: int = 0

    @staticmethod
    def none() -> SmBudget:
        """No SM budget (an analysis built by hand, or one process of an analysis)."""
        return SmBudget(pl.DataFrame(), pl.DataFrame(), pl.DataFrame(), pl.DataFrame())

    def _extra(self, classes: tuple[str, ...] | None = None) -> int | None:
        """The extra time of the comparable rows (of ``classes``): 0 where none of those
        kernels ran beside communication, None where some did but none could be compared
        (or nothing was measured): a 0 must never mean "unknown"."""
        df = self.inflation
        if df.width == 0:
            return None
        if classes is not None:
            df = df.filter(pl.col("class").is_in(list(classes)))
        if df.is_empty():
            return 0
        ok = df.filter(pl.col("comparable"))
        return int(ok["extra_ns"].sum()) if len(ok) else None

    @property
    def extra_ns(self) -> int | None:
        """The compute time overlap added, over every comparable kernel (see :meth:`_extra`)."""
        return self._extra()

    @property
    def gemm_attn_extra_ns(self) -> int | None:
        """The same, over comparable GEMM and attention kernels (the A/B's compute row)."""
        return self._extra(("gemm", "attention"))

    def comparable_rows(self, classes: tuple[str, ...] | None = None) -> tuple[int, int]:
        """(comparable, all) kernel shapes that ran overlapped (of ``classes``)."""
        df = self.inflation
        if df.width == 0:
            return 0, 0
        if classes is not None:
            df = df.filter(pl.col("class").is_in(list(classes)))
        return int(df["comparable"].sum()), len(df)

    def to_dict(self) -> dict[str, object]:
        """The JSON keys ``sm_budget``, ``sm_share``, ``compute_beside_comm``, ``inflation``
        and ``inflation_totals`` of a trace (documented in docs/json.md)."""

        def rows(df: pl.DataFrame) -> list[dict[str, object]]:
            return df.to_dicts() if not df.is_empty() else []

        budget = [{"gpu": f"{r['pid']}/{r['device']}", **r} for r in rows(self.channels)]
        share = [{"gpu": f"{r['pid']}/{r['device']}", **r} for r in rows(self.gpus)]
        return {
            "sm_budget": budget,
            "sm_share": share,
            "compute_beside_comm": rows(self.beside),
            "inflation": rows(self.inflation),
            "inflation_totals": {
                "extra_ns": self.extra_ns,
                "gemm_attn_extra_ns": self.gemm_attn_extra_ns,
                "comparable_kernels": self.comparable_rows()[0],
                "kernels": len(self.inflation),
                "hidden_ns": self.hidden_ns,
            },
        }


@dataclass(frozen=True)
class CriticalPath:
    """What bounds a trace's step: per iteration its critical path (:class:`PathIteration`),
    the window's composition (``composition``: ns per category over the kept iterations, the
    path's order of size), the ``top`` segments (category, name, pid, ns, count), per rank
    the path of its own step (``per_rank``: pid, step, category, ns; a wait names its peer in
    ``peer``), the replays (``what_if``, best gain first), the graph's edge counts (kept, and
    ``dropped`` where the times contradict an edge) and the cross-stream waits no record
    could be tied to (``unmatched_waits``)."""

    iterations: tuple[PathIteration, ...]
    composition: dict[str, int]
    top: pl.DataFrame
    per_rank: pl.DataFrame
    what_if: tuple[WhatIf, ...]
    edges: dict[str, int]
    dropped: dict[str, int]
    unmatched_waits: int
    #: median over iterations of |replay - measured| / measured, in % (0: reproduced exactly)
    replay_error_pct: float
    #: the window's iterations; more than ``len(iterations)`` where the window held more GPU
    #: ops than the graph's budget and the path was walked over its middle iterations
    window_iterations: int = 0
    #: what a reader should know (a --what-if that names nothing in the trace)
    notes: tuple[str, ...] = ()
    #: the path of the iteration with the median step as intervals on the timeline (step,
    #: pid, start_ns, end_ns, category; contiguous, each on the rank it ran on): what a
    #: timeline figure draws
    drawn: pl.DataFrame = field(default_factory=pl.DataFrame, compare=False)

    @property
    def sampled(self) -> bool:
        """Walked over part of the window's iterations (:attr:`window_iterations`)."""
        return self.window_iterations > len(self.iterations)

    @property
    def step_ns(self) -> int:
        return sum(i.step_ns for i in self.iterations)

    @property
    def unexplained_pct(self) -> float | None:
        total = sum(self.composition.values())
        return 100 * self.composition.get("unexplained", 0) / total if total else None

    def shares(self) -> list[tuple[str, float]]:
        """Categories by share of the path (%), largest first (zero ones left out)."""
        total = sum(self.composition.values())
        if not total:
            return []
        rows = [(c, 100 * ns / total) for c, ns in self.composition.items() if ns > 0]
        return sorted(rows, key=lambda r: (-r[1], r[0]))

    @property
    def comm_share_pct(self) -> float | None:
        """The share of the path (%) spent in communication: every channel's categories (its
        own name, ``.transfer`` and ``.wait``) together; None for an empty path."""
        total = sum(self.composition.values())
        comm = sum(ns for c, ns in self.composition.items() if c not in PATH_BASE_CATEGORIES)
        return 100 * comm / total if total else None

    @property
    def best_gain_pct(self) -> float | None:
        """The largest gain of any replayed scenario, in % of the measured step (None without
        a scenario that has one)."""
        gains = [w.gain_pct for w in self.what_if if w.gain_pct is not None]
        return max(gains) if gains else None

    @staticmethod
    def json_keys(path: CriticalPath | None) -> dict[str, object]:
        """A trace's JSON keys: ``critical_path`` (:meth:`to_dict`, or null) and its sibling
        ``what_if`` (the replays, best gain first; [] without a path)."""
        if path is None:
            return {"critical_path": None, "what_if": []}
        return {"critical_path": path.to_dict(), "what_if": [w.to_dict() for w in path.what_if]}

    def to_dict(self) -> dict[str, object]:
        return {
            "iterations": [i.to_dict() for i in self.iterations],
            "composition": dict(self.composition),
            "unexplained_pct": self.unexplained_pct,
            "replay_error_pct": self.replay_error_pct,
            "top": self.top.to_dicts(),
            "edges": dict(self.edges),
            "dropped_edges": dict(self.dropped),
            "window_iterations": self.window_iterations,
            "unmatched_waits": self.unmatched_waits,
        }
