"""Which of the "Three Walls" (memory, communication, host overhead, then compute) holds a GPU back.

Fixing one wall exposes the next, so every verdict carries its evidence numbers and thresholds.
Memory evidence comes only from what was captured (CUDA memory-usage events, OOM markers in NVTX).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysmoe.model import SourceFormat
from nsysmoe.results import Dispatcher, Evidence, Wall, WallVerdict

#: Thresholds, stated in every report.
MEMORY_PEAK_PCT = 90.0  # peak allocated bytes / GPU memory
COMM_EXPOSED_PCT = 10.0  # exposed communication / span
HOST_IDLE_PCT = 15.0  # GPU idle (no kernel, no copy) / span
OOM_PATTERN = r"(?i)out of memory|outofmemory|\boom\b"  # polars (Rust) regex syntax

#: What the seeds recommend for each wall (docs/domain.md, Megatron-Core MoE paper); a verdict
#: gives the subset its trace shows a reason for (:func:`knobs`).
KNOBS: dict[Wall, tuple[str, ...]] = {
    "memory": (
        "selective recompute (layernorm, core_attn, moe_act, mlp)",
        "FP8",
        "offloading",
        "better PP layout",
    ),
    "communication": (
        "DeepEP or HybridEP dispatcher",
        "--overlap-moe-expert-parallel-comm",
        "--overlap-grad-reduce",
        "--tp-comm-overlap",
        "better PP layout",
    ),
    "host overhead": (
        "CUDA graphs (moe_router, moe_preprocess, attn)",
        "--manual-gc",
        "larger micro-batch",
        "CPU affinity",
    ),
    "compute": (
        "grouped GEMM",
        "fusions",
        "FP8",
        "dispatcher SM tuning (--moe-deepep-num-sms 20, --moe-hybridep-num-sms 16..32)",
    ),
}


#: idle this much host-bound (launch after the GPU went idle) is what CUDA graphs fix
HOST_BOUND_SHARE = 0.5


@dataclass(frozen=True)
class Context:
    """What the trace shows beyond the wall's numbers, so a verdict advises only knobs that
    apply: the dispatcher, the communication channels present, how much of the idle time was
    host-bound, and the input format (for the right profiler flag)."""

    dispatcher: Dispatcher = "none detected"
    channels: frozenset[str] = frozenset()
    host_bound_share: float | None = None  # idle_host_ns / idle_ns
    source_format: SourceFormat = "nsys-sqlite"

    @property
    def moe(self) -> bool:
        return self.dispatcher != "none detected" or any(c.startswith("ep.") for c in self.channels)


GENERIC = Context()


def knobs(wall: Wall, ctx: Context) -> tuple[str, ...]:
    """The knobs of :data:`KNOBS` for ``wall`` that the trace gives a reason for: dispatcher
    knobs only with a MoE dispatcher, its SM knob only for that dispatcher, CUDA graphs only when
    idle is host-bound, data-parallel overlap only with all-reduce / reduce-scatter traffic."""
    ch = ctx.channels
    if wall == "communication":
        out = []
        if ctx.moe:
            if ctx.dispatcher.startswith("alltoall") or ctx.dispatcher == "none detected":
                out.append("DeepEP or HybridEP dispatcher (--moe-token-dispatcher-type flex)")
            out += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
        if ch & {"nccl.allreduce", "nccl.reducescatter"}:
            out.append("--overlap-grad-reduce" + (" (DDP: bucket_cap_mb)" if not ctx.moe else ""))
        if "nccl.allgather" in ch:
            out.append("--overlap-param-gather")
        if "tp.userbuffers" in ch:
            out.append("--tp-comm-overlap")
        if "nccl.sendrecv" in ch:
            out.append("better PP layout")
        return tuple(out) or ("overlap the communication with independent compute",)
    if wall == "host overhead":
        share = ctx.host_bound_share
        if share is not None and share < HOST_BOUND_SHARE:
            return ("idle is mostly dependency waits (a sync, an event, a late peer): see the "
                    "largest idle gaps; remove host syncs (.item(), cudaStreamSynchronize)",)
        graphs = ("CUDA graphs (moe_router, moe_preprocess, attn)" if ctx.moe
                  else "CUDA graphs")  # fmt: skip
        return (graphs, "--manual-gc", "larger micro-batch", "CPU affinity")
    if wall == "compute":
        out = ["fusions", "FP8"]
        if ctx.moe:
            out.insert(0, "grouped GEMM")
        if ctx.dispatcher == "DeepEP":
            out.append("dispatcher SM tuning (--moe-deepep-num-sms 20)")
        if ctx.dispatcher == "HybridEP":
            out.append("dispatcher SM tuning (--moe-hybridep-num-sms 16..32)")
        return tuple(out)
    return KNOBS[wall]


def thresholds() -> dict[str, float]:
    return {
        "memory_peak_pct": MEMORY_PEAK_PCT,
        "exposed_comm_pct_of_span": COMM_EXPOSED_PCT,
        "idle_pct_of_span": HOST_IDLE_PCT,
    }


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 3) if whole else None


#: how to record memory usage, per input format
MEMORY_FLAG: dict[SourceFormat, str] = {
    "nsys-sqlite": "nsys profile --cuda-memory-usage=true",
    "nsys-parquet": "nsys profile --cuda-memory-usage=true",
    "nsys-arrow": "nsys profile --cuda-memory-usage=true",
    "kineto-json": "torch.profiler.profile(profile_memory=True)",
}


def memory_evidence(
    memory_events: pl.DataFrame,
    total_memory_bytes: int | None,
    nvtx_names: pl.Series | None,
    source_format: SourceFormat = "nsys-sqlite",
    *,
    markers: int | None = None,
) -> dict[str, object]:
    """Peak allocated bytes of one GPU (from captured usage events) and OOM markers in NVTX
    (``markers``: their count when already known, :func:`oom_markers`; else counted in
    ``nvtx_names``)."""
    ev: dict[str, object] = {}
    if memory_events.is_empty():
        ev["memory_usage"] = f"not captured (record with {MEMORY_FLAG[source_format]})"
    else:
        peak = int(memory_events.sort("start")["bytes"].cum_sum().max())
        ev["peak_allocated_bytes"] = peak
        ev["gpu_memory_bytes"] = total_memory_bytes
        ev["peak_memory_pct"] = _pct(peak, total_memory_bytes) if total_memory_bytes else None
    if markers is not None:
        ev["oom_markers"] = markers
    elif nvtx_names is not None and len(nvtx_names):
        ev["oom_markers"] = int(nvtx_names.str.contains(OOM_PATTERN).sum())
    return ev


def oom_markers(nvtx: pl.DataFrame) -> dict[int, int]:
    """Per pid with NVTX rows, how many of its range names are OOM markers: one pass over the
    millions of names for all GPUs, not one per GPU."""
    oom = pl.col("name").str.contains(OOM_PATTERN).sum()
    counts = nvtx.drop_nulls("pid").group_by("pid").agg(oom)
    return {int(pid): int(n) for pid, n in counts.iter_rows()}


def verdict(
    span_ns: int,
    idle_ns: int,
    exposed_ns: int,
    memory: dict[str, object],
    ctx: Context = GENERIC,
) -> WallVerdict:
    """Memory first (does the run fit?), then the larger of comm/host, else compute; the knobs
    are those ``ctx`` gives a reason for (:func:`knobs`)."""

    def _verdict(wall: Wall, reason: str, evidence: Evidence) -> WallVerdict:
        return WallVerdict(wall, reason, evidence, thresholds(), knobs(wall, ctx))

    ev: Evidence = {
        "span_ns": span_ns,
        "exposed_comm_ns": exposed_ns,
        "exposed_comm_pct_of_span": _pct(exposed_ns, span_ns),
        "idle_ns": idle_ns,
        "idle_pct_of_span": _pct(idle_ns, span_ns),
        **memory,  # type: ignore[dict-item]
    }
    peak = memory.get("peak_memory_pct")
    if memory.get("oom_markers"):
        return _verdict("memory", f"{memory['oom_markers']} OOM marker(s) in NVTX", ev)
    if isinstance(peak, float) and peak >= MEMORY_PEAK_PCT:
        return _verdict("memory", f"peak memory {peak:.1f} % ≥ {MEMORY_PEAK_PCT} %", ev)
    comm_pct = ev["exposed_comm_pct_of_span"] or 0.0
    idle_pct = ev["idle_pct_of_span"] or 0.0
    comm_hit = comm_pct >= COMM_EXPOSED_PCT
    host_hit = idle_pct >= HOST_IDLE_PCT
    if comm_hit and (not host_hit or comm_pct >= idle_pct):
        reason = f"exposed communication {comm_pct:.1f} % of span ≥ {COMM_EXPOSED_PCT} %"
        return _verdict("communication", reason, ev)
    if host_hit:
        return _verdict(
            "host overhead", f"GPU idle {idle_pct:.1f} % of span ≥ {HOST_IDLE_PCT} %", ev
        )
    reason = (
        f"exposed communication {comm_pct:.1f} % < {COMM_EXPOSED_PCT} % and idle "
        f"{idle_pct:.1f} % < {HOST_IDLE_PCT} % of span: the GPU is busy computing"
    )
    return _verdict("compute", reason, ev)


MEMORY_KEYS = (
    "memory_usage", "peak_allocated_bytes", "gpu_memory_bytes", "peak_memory_pct", "oom_markers",
)  # fmt: skip


def trace_verdict(
    span_ns: int,
    idle_ns: int,
    exposed_ns: int,
    gpu_walls: tuple[WallVerdict, ...],
    ctx: Context = GENERIC,
) -> WallVerdict:
    """A whole trace's verdict: evidence summed over GPUs, the worst GPU's memory evidence."""
    evidences = [w.evidence for w in gpu_walls]
    memory = max(evidences, key=lambda e: e.get("peak_memory_pct") or 0) if evidences else {}
    oom = sum(int(e.get("oom_markers") or 0) for e in evidences)
    memory = {k: v for k, v in memory.items() if k in MEMORY_KEYS} | (
        {"oom_markers": oom} if oom else {}
    )
    return verdict(span_ns, idle_ns, exposed_ns, memory, ctx)
