"""HolisticTraceAnalysis 0.5.0's conventions, as data: the kernel-name rules and the reasons a
kernel is left out, and one line per convention for reports (paths inside the HTA 0.5.0 wheel)."""

from __future__ import annotations

HTA_VERSION = "0.5.0"
TOOL = f"HolisticTraceAnalysis {HTA_VERSION} TraceAnalysis.get_comm_comp_overlap"

#: One line per convention, for reports; paths are inside the HTA 0.5.0 wheel.
HTA_CONVENTIONS: tuple[str, ...] = (
    "one figure per rank (trace file): every stream and device of the process pooled, over the "
    "whole loaded trace, no per-iteration averaging "
    "(hta/analyzers/communication_analysis.py: get_comm_comp_overlap)",
    "communication = kernel name matching ^nccl.*Kernel (ncclKernel_*, ncclDevKernel_*) and "
    "nothing else, so DeepEP, NVSHMEM and custom all-reduce kernels count as computation "
    "(hta/utils/utils.py: is_comm_kernel, get_kernel_type)",
    "computation = every other kernel except names starting Memcpy/Memset/dma (memory) or "
    "containing Memcpy or Sync (neither); memcpy/memset operations are memory and left out "
    "(hta/utils/utils.py: is_memory_kernel, is_compute_kernel)",
    "ns-resolution traces (float ts) are rounded inward to whole µs: start up, start+dur (in "
    "double precision) down, so sub-µs kernels vanish or invert "
    "(hta/common/trace_parser.py: round_down_time_stamps)",
    "when the traces loaded together name two or more distinct ProfilerStep ranges, a kernel is "
    "kept only if its launch (CPU event with the same correlation) starts before the rank's last "
    "ProfilerStep starts: the last step and kernels whose launch is not in the trace are dropped; "
    "with one or no ProfilerStep nothing is dropped "
    "(hta/common/trace.py: Trace._filter_irrelevant_gpu_kernels)",
    "ratio = |merged comm ∩ merged compute| / Σ merged comm intervals in integer µs; a sub-µs "
    "comm kernel rounded to [t, t-1) that merges with nothing subtracts 1 µs from the total; "
    "no communication gives NaN (hta/utils/utils.py: merge_kernel_intervals; "
    "communication_analysis.py: get_comm_comp_overlap)",
    "reported as round(100 × ratio, 2), numpy rounding (communication_analysis.py)",
)

STEP_MARK = "ProfilerStep"
COMM, MEMORY, COMPUTE, NEITHER = "communication", "memory", "computation", "other"
COMM_RE = r"^nccl.*Kernel"
MEMORY_RE = r"^(?:Memcpy|Memset|dma)"
NOT_COMPUTE_RE = r"^(?:nccl.*Kernel|.*Memcpy|Memset|.*Sync)"
#: why HTA leaves a kernel out (column ``dropped_because`` of :func:`hta_kernels`)
NO_LAUNCH = "no launch in the trace"
LATE = "launched at or after the last ProfilerStep's start"
NO_STEP = "its rank names no ProfilerStep"
