"""One training iteration of an MoE rank, as an ordered list of CPU slots and NVTX ranges.

A *slot* is one thing the host thread does, in launch order: a CUDA API call that enqueues a
kernel/memcpy/memset (with its GPU op), an API call without GPU work, or a stretch of CPU-only
time (PyTorch ops such as ``aten::t`` that launch nothing). A *range* is an NVTX push/pop range
around consecutive slots of one thread. The generator (``gen_exports.py``) turns the template
into timestamps for every iteration at once with numpy.

Forward runs on the main thread, backward on the autograd thread, as in PyTorch. Communication
kernels run on their own streams (EP dispatch/combine on one, NCCL on another); ``wait`` says
when the compute stream waits for a communication kernel: ``"always"`` (pipeline send/recv,
grad-norm all-reduce), ``"off"`` (EP dispatch/combine: waited for only in the overlap-off run),
``"never"`` (data-parallel reduce-scatter, overlapped in both runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from catalog import DRIVER, RUNTIME, K

MAIN, AUTOGRAD = 0, 1  # thread roles
NCCL_DOMAIN = 1  # domainId of the "NCCL" NVTX domain in every process
MAX_DEPTH = 10  # NVTX nesting never reaches this (ranges are widened by depth, see gen_exports)


@dataclass(frozen=True, slots=True)
class Slot:
    kind: str  # "kernel" | "memcpy" | "memset" | "api" | "sync" | "cpu"
    thread: int
    api: str = ""
    api_class: int = RUNTIME
    api_ns: int = 2000  # CPU duration of the call (or of the CPU-only stretch)
    stream: str = ""  # "compute" | "ep" | "nccl" | "copy"
    kernel: str = ""  # key of catalog.K
    dur_ns: int = 0  # mean GPU duration
    wait: str = "never"
    inflate: bool = False  # GEMM/attention: slower while an EP kernel overlaps (overlap on)


@dataclass(frozen=True, slots=True)
class Range:
    first: int  # first slot inside
    last: int  # last slot inside
    depth: int  # nesting depth on its thread (0 = outermost)
    thread: int
    text: str  # ", op_id = N" is appended when op; "{it}" is the iteration number
    op: bool = False
    registered: bool = False  # name in StringIds (textId), as NCCL's registered strings
    domain: int = 0


@dataclass
class Template:
    slots: list[Slot] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    thread: int = MAIN
    _depth: dict[int, int] = field(default_factory=lambda: {MAIN: 0, AUTOGRAD: 0})

    @contextmanager
    def range(
        self, text: str, *, op: bool = False, registered: bool = False, domain: int = 0
    ) -> Iterator[None]:
        thread, first = self.thread, len(self.slots)
        depth = self._depth[thread]
        assert depth < MAX_DEPTH, "NVTX nesting too deep for the range widening"
        self._depth[thread] = depth + 1
        yield
        self._depth[thread] = depth
        assert len(self.slots) > first, f"range {text!r} holds no slot"
        self.ranges.append(
            Range(first, len(self.slots) - 1, depth, thread, text, op, registered, domain)
        )

    def kernel(self, key: str, stream: str = "compute", wait: str = "never") -> None:
        spec = K[key]
        inflate = stream == "compute" and (key.startswith(("gemm", "fa_")) or key == "grouped")
        self.slots.append(
            Slot(
                "kernel",
                self.thread,
                spec.api,
                spec.api_class,
                2000,
                stream,
                key,
                round(spec.dur_us * 1000),
                wait,
                inflate,
            )
        )

    def copy(self, kind: str, dur_us: float, stream: str) -> None:
        api = "cudaMemcpyAsync_v3020" if kind == "memcpy" else "cudaMemsetAsync_v3020"
        self.slots.append(
            Slot(kind, self.thread, api, RUNTIME, 2200, stream, "", round(dur_us * 1000))
        )

    def api(self, name: str, ns: int = 1200, kind: str = "api") -> None:
        self.slots.append(Slot(kind, self.thread, name, RUNTIME, ns))

    def cpu(self, ns: int = 800) -> None:
        self.slots.append(Slot("cpu", self.thread, api_ns=ns))

    # --- PyTorch-style op helpers ---------------------------------------------------------------

    def op(self, *names: str, kernels: tuple[str, ...] = (), alloc: bool = False) -> None:
        """Nested emit_nvtx op ranges (outer to inner) around the kernels, an ``aten::empty``
        allocation first when ``alloc``."""
        with ExitStack() as stack:
            for name in names:
                stack.enter_context(self.range(name, op=True))
            if alloc:
                with self.range("aten::empty", op=True):
                    self.cpu(600)
            for key in kernels:
                self.kernel(key)
            if not kernels and not alloc:
                self.cpu()

    def linear(self, key: str) -> None:
        with self.range("aten::linear", op=True):
            with self.range("aten::t", op=True):
                with self.range("aten::transpose", op=True):
                    self.cpu(500)
            with self.range("aten::matmul", op=True):
                self.op("aten::mm", kernels=(key,), alloc=True)

    def backward(self, fn: str, *ops: tuple[str, str]) -> None:
        """An autograd node: evaluate_function > node > one aten op per (op, kernel)."""
        with self.range(f"autograd::engine::evaluate_function: {fn}", op=True):
            with self.range(fn, op=True):
                if not ops:
                    self.cpu(900)
                for name, key in ops:
                    self.op(name, kernels=(key,), alloc=True)

    def nccl(self, call: str, key: str, wait: str, grouped: tuple[str, ...] = ()) -> None:
        """An NCCL call: registered-string ranges in the NCCL domain; the kernel is launched by
        the call (by ncclGroupEnd for grouped point-to-point calls)."""
        nccl = {"registered": True, "domain": NCCL_DOMAIN}
        if grouped:
            with self.range("ncclGroupStart", **nccl):
                self.cpu(400)
            for name in grouped:
                with self.range(name, **nccl):
                    self.cpu(700)
        with self.range(call, **nccl):
            self.kernel(key, stream="nccl", wait=wait)


def _ep_dispatch(t: Template, dispatcher: str, phase: str, backward: bool) -> None:
    """EP token exchange: ``phase`` is "dispatch" or "combine" (which kernel runs)."""
    if dispatcher == "hybridep":
        kernel = "hep_dispatch" if phase == "dispatch" else "hep_combine"
        if phase == "dispatch" and not backward:
            with t.range("metadata_preprocess_core in hybrid-ep"):
                t.kernel("hep_scan", stream="ep")
        with t.range(f"{phase}_preprocess in hybrid-ep"):
            t.cpu(900)
        with t.range(f"{phase}_core in hybrid-ep"):
            t.api("cudaStreamWaitEvent_v3020")
            t.kernel(kernel, stream="ep", wait="off")
        with t.range(f"{phase}_postprocess in hybrid-ep"):
            t.cpu(700)
        return
    with t.range(f"deepep_{phase}"):
        if phase == "dispatch":
            t.kernel("dep_layout")
            t.kernel("dep_notify", stream="ep")
        t.api("cudaStreamWaitEvent_v3020")
        t.kernel("dep_dispatch" if phase == "dispatch" else "dep_combine", stream="ep", wait="off")


def _forward_layer(t: Template, layer: int, dispatcher: str) -> None:
    with t.range(f"layers.{layer}.self_attention"):
        t.op("aten::rms_norm", kernels=("rmsnorm",), alloc=True)
        t.linear("gemm_qkv")
        t.op("flash_attn_3::fwd", kernels=("fa_prep", "fa_fwd"), alloc=True)
        t.linear("gemm_proj")
        t.op("aten::add_", kernels=("add",))
    with t.range(f"layers.{layer}.mlp"):
        t.op("aten::rms_norm", kernels=("rmsnorm",), alloc=True)
        t.linear("gemm_router")
        t.op("te::fused_topk_with_score_function_fwd", kernels=("topk",), alloc=True)
        _ep_dispatch(t, dispatcher, "dispatch", backward=False)
        t.op("te::moe_permute_fwd", kernels=("permute",), alloc=True)
        t.op("te::grouped_gemm", kernels=("grouped",), alloc=True)
        t.op("aten::silu", kernels=("silu",), alloc=True)
        t.op("te::grouped_gemm", kernels=("grouped",), alloc=True)
        t.op("te::moe_unpermute_fwd", kernels=("unpermute",), alloc=True)
        _ep_dispatch(t, dispatcher, "combine", backward=False)
        t.op("aten::add_", kernels=("add",))


def _backward_layer(t: Template, dispatcher: str) -> None:
    t.backward("AddBackward0")
    _ep_dispatch(t, dispatcher, "dispatch", backward=True)  # combine's backward
    t.backward("UnpermuteBackward", ("te::moe_permute_fwd", "permute"))
    t.backward(
        "GroupedGemmBackward", ("te::grouped_gemm", "grouped"), ("te::grouped_gemm", "grouped")
    )
    t.backward("SiluBackward0", ("aten::silu_backward", "silu"), ("aten::mul", "mul"))
    t.backward(
        "GroupedGemmBackward", ("te::grouped_gemm", "grouped"), ("te::grouped_gemm", "grouped")
    )
    t.backward("PermuteBackward", ("te::moe_unpermute_fwd", "unpermute"))
    _ep_dispatch(t, dispatcher, "combine", backward=True)  # dispatch's backward
    t.backward("FusedTopkBackward", ("te::fused_topk_with_score_function_bwd", "topk_bwd"))
    t.backward("MmBackward0", ("aten::mm", "gemm_router"), ("aten::mm", "gemm_router"))
    t.backward("RmsNormBackward", ("te::rmsnorm_bwd", "rmsnorm_bwd"), ("aten::sum", "reduce"))
    t.backward("AddBackward0")
    t.backward("MmBackward0", ("aten::mm", "gemm_dgrad"), ("aten::mm", "gemm_wgrad"))
    t.backward("FlashAttnFuncBackward", ("flash_attn_3::bwd", "fa_bwd"))
    t.backward("MmBackward0", ("aten::mm", "gemm_dgrad"), ("aten::mm", "gemm_wgrad"))
    t.backward("RmsNormBackward", ("te::rmsnorm_bwd", "rmsnorm_bwd"), ("aten::sum", "reduce"))
    t.nccl("ncclReduceScatter", "reduce_scatter", wait="never")


def build(layers: int, dispatcher: str) -> Template:
    """One iteration: input copy, PP recv, forward, PP send, backward with DP reduce-scatters,
    grad-norm all-reduce, optimizer, param all-gather, zero-grad memset, device sync."""
    if dispatcher not in ("hybridep", "deepep"):
        raise ValueError(f"unknown dispatcher {dispatcher!r}")
    t = Template()
    with t.range("iteration {it}"):
        with t.range("aten::copy_", op=True):
            t.copy("memcpy", 22, "copy")
        t.nccl("ncclGroupEnd", "sendrecv", wait="always", grouped=("ncclRecv",))
        for layer in range(layers):
            _forward_layer(t, layer, dispatcher)
        t.nccl("ncclGroupEnd", "sendrecv", wait="always", grouped=("ncclSend",))
        t.thread = AUTOGRAD
        for _ in range(layers):
            _backward_layer(t, dispatcher)
        t.thread = MAIN
        t.nccl("ncclAllReduce", "all_reduce", wait="always")
        with t.range("optimizer.step"):
            t.op("apex::multi_tensor_l2norm", kernels=("l2norm",))
            for _ in range(4):
                t.op("apex::multi_tensor_adam", kernels=("adam",))
        t.nccl("ncclAllGather", "all_gather", wait="always")
        with t.range("aten::zero_", op=True):
            t.copy("memset", 40, "compute")
        t.api("cudaDeviceSynchronize_v3020", kind="sync")
    assert {s.api_class for s in t.slots if s.kind == "kernel"} <= {RUNTIME, DRIVER}
    return t
