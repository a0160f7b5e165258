"""Communication channels of the default rules, the nvtx-keyed EP rules, and the conv class.

Names come from ``shared/docs/kernel-taxonomy.md`` (``<…>`` where the document elides template
arguments), from the real traces under ``shared/traces`` and, where a comment says so, from the
public source or profile that prints them. The nvtx-keyed rules are checked on a tiny canonical
trace built here: Megatron's alltoall dispatcher moves EP tokens with NCCL SendRecv kernels that
only the phase range around their launch can tell from any other point-to-point traffic.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import model
from nsysmoe.api import analyze, load
from nsysmoe.classify import OTHER_CHANNEL, classify, classify_trace, default_rules
from nsysmoe.measure.channels import CHANNEL_ORDER
from nsysmoe.model import Trace
from nsysmoe.pipeline import prepare
from tests.fixtures.frames import kernel_frame

from .conftest import TRACES, require_shared

VOCABULARY = (
    "ep.dispatch", "ep.combine", "ep.sync",
    "nccl.allreduce", "nccl.reducescatter", "nccl.allgather", "nccl.broadcast", "nccl.sendrecv",
    "nccl.other", "tp.userbuffers", "other",
)  # fmt: skip

# channel -> (kernel name, subclass) pairs, classified by name alone
CHANNEL_NAMES: dict[str, list[tuple[str, str]]] = {
    "ep.dispatch": [
        # deepseek-v3-ep64-train trace (DeepSeek's internal DeepEP build), arguments cut
        (
            "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
            "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*)",
            "deepep",
        ),
        ("void deep_ep::intranode::dispatch<…>(…)", "deepep"),  # taxonomy §2 (DeepEP v1)
        ("void deep_ep::internode::dispatch<…>(…)", "deepep"),
        ("void deep_ep::legacy::intranode::dispatch<…>(…)", "deepep"),  # v2 legacy API
        ("void deep_ep::internode_ll::dispatch<…>(…)", "deepep.ll"),
        ("void deep_ep::legacy::internode_ll::dispatch<…>(…)", "deepep.ll"),
        ("void deep_ep::elastic::dispatch_impl<…>(…)", "deepep"),  # v2 elastic
        ("void deep_ep::elastic::hybrid_dispatch_impl<…>(…)", "deepep"),
        ("void deep_ep::elastic::dispatch_copy_epilogue_impl<…>(…)", "deepep"),
        ("hybrid_ep::dispatch_kernel", "hybridep"),
        ("EpDispatchIntraNodeKernel", "ep.other"),  # MoRI-EP / Primus-Turbo (collprof test)
        ("moeA2ADispatchKernel", "ep.other"),  # TRT-LLM MoE all-to-all
    ],
    "ep.combine": [
        (
            "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, "
            "float*, bool const*, int4 const*, float const*, int4 const*, int4 const*)",
            "deepep",
        ),
        ("void deep_ep::intranode::combine<…>(…)", "deepep"),
        ("void deep_ep::internode::combine<…>(…)", "deepep"),
        ("void deep_ep::internode_ll::combine<…>(…)", "deepep.ll"),
        ("void deep_ep::legacy::internode_ll::combine<…>(…)", "deepep.ll"),
        ("void deep_ep::elastic::combine_impl<…>(…)", "deepep"),
        ("void deep_ep::elastic::hybrid_combine_impl<…>(…)", "deepep"),
        ("void deep_ep::elastic::combine_reduce_epilogue_impl<…>(…)", "deepep"),
        ("hybrid_ep::combine_kernel", "hybridep"),
        ("EpCombineInterNodeKernel", "ep.other"),
    ],
    "ep.sync": [
        (
            "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int, "
            "int const*, int*, int const*, int*, int, bool const*)",
            "deepep.notify",
        ),
        (
            "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, "
            "int const*, int const*, int*, void*, void**, int**)",
            "deepep.notify",
        ),
        ("void deep_ep::intranode::notify_dispatch<…>(…)", "deepep.notify"),
        ("void deep_ep::intranode::cached_notify_dispatch<…>(…)", "deepep.notify"),
        ("void deep_ep::intranode::cached_notify_combine<…>(…)", "deepep.notify"),
        ("void deep_ep::internode::cached_notify<…>(…)", "deepep.notify"),
        ("void deep_ep::intranode::barrier<…>(…)", "deepep.aux"),
        ("void deep_ep::internode_ll::clean_low_latency_buffer<…>(…)", "deepep.aux"),
        ("void deep_ep::internode_ll::query_mask_buffer<…>(…)", "deepep.aux"),
        ("void deep_ep::internode_ll::update_mask_buffer<…>(…)", "deepep.aux"),
        ("void deep_ep::internode_ll::clean_mask_buffer<…>(…)", "deepep.aux"),
        ("void deep_ep::elastic::barrier_impl<…>(…)", "deepep.aux"),
        ("hybrid_ep::scan", "hybridep.aux"),  # metadata preprocessing
        ("hybrid_ep::device_sync_kernel", "hybridep.aux"),
        ("hybrid_ep::rdma_sync_kernel", "hybridep.aux"),
        ("hybrid_ep::update_expected_value_kernel", "hybridep.aux"),
        ("barrier_on_stream_kernel", "nvshmem"),
        ("sync_on_stream_kernel", "nvshmem"),
    ],
    "nccl.allreduce": [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "nccl"),  # nersc-ddp traces
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)",
            "nccl",
        ),  # nccl-allreduce-6ranks
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl"),
        ("ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16", "nccl"),
        # NCCL before 2.8 (coll##Kernel_##op##_##dtype), printed in a Paddle profiler summary
        ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "nccl"),
    ],
    "nccl.reducescatter": [("ncclDevKernel_ReduceScatter", "nccl")],  # taxonomy §1 coll list
    "nccl.allgather": [
        ("ncclDevKernel_AllGather_RING_LL", "nccl"),
        ("ncclDevKernel_AllGatherV", "nccl"),
    ],
    "nccl.broadcast": [
        (
            "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
            "nccl",
        ),  # nccl-ns-resolution trace
    ],
    "nccl.sendrecv": [
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)", "nccl"),
        (
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
            "nccl",
        ),  # dlrm-8ranks, trace-filter-2ranks
        ("ncclSendRecvKernel_copy_i8(ncclColl)", "nccl"),  # NCCL 2.7 src/enqueue.cc
    ],
    "nccl.other": [
        ("ncclDevKernel_Generic", "nccl"),  # runs any collective
        ("ncclDevKernel_Reduce", "nccl"),
    ],
    "tp.userbuffers": [
        ("userbuffers_fp16_sum_inplace_gpu_rr_rs_oop", "te_userbuffers"),
        ("kuserbuffers_pushrecv", "te_userbuffers"),
    ],
    "other": [
        # custom all-reduce is not NCCL: nccl.allreduce would name the wrong transport
        ("cross_device_reduce_1stage", "custom_ar"),  # vLLM/sglang
        ("cross_device_reduce_2stage", "custom_ar"),
        (
            "void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16, 2>"
            "(c10::BFloat16**, unsigned long, unsigned long, unsigned int**)",
            "custom_ar",
        ),
        ("one_shot_all_reduce_kernel", "custom_ar"),  # torch symm_mem CUDASymmetricMemoryOps.cu
        ("multimem_all_reduce_kernel", "custom_ar"),
        ("oneShotAllReduceKernel", "custom_ar"),  # TRT-LLM customAllReduceKernels.cu
        ("lowPrecisionTwoShotAllReduceKernel", "custom_ar"),
        (
            "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<"
            "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, "
            "false, false>",
            "custom_ar",
        ),
        ("void deep_ep::elastic::engram_fetch_impl<…>(…)", "deepep.aux"),  # not EP tokens
        ("void deep_ep::elastic::pp_send_impl<…>(…)", "deepep.aux"),
        ("nvshmemi_transfer_rma_p", "nvshmem"),
        ("void primus_turbo::deep_ep::internode::some_new_kernel<8>(void*)", "ep.other"),
    ],
}
CHANNEL_CASES = [(n, s, ch) for ch, pairs in CHANNEL_NAMES.items() for n, s in pairs]


def test_vocabulary_is_the_reports() -> None:
    assert VOCABULARY == CHANNEL_ORDER


@pytest.mark.parametrize(("name", "subclass", "channel"), CHANNEL_CASES)
def test_channel_by_name(name: str, subclass: str, channel: str) -> None:
    out = classify(pl.DataFrame({"name": [name]}), default_rules()).row(0, named=True)
    assert (out["class"], out["subclass"], out["channel"]) == ("comm", subclass, channel)


def test_every_comm_rule_names_a_vocabulary_channel() -> None:
    rules = default_rules().rules
    for rule in rules:
        if rule.klass == "comm":
            assert (rule.channel or OTHER_CHANNEL) in VOCABULARY, rule
        else:
            assert rule.channel == "", rule
    # every channel is reachable, and a rule that leaves it out is one whose note says why
    assert {r.channel or OTHER_CHANNEL for r in rules if r.klass == "comm"} == set(VOCABULARY)
    for rule in rules:
        if rule.klass == "comm" and not rule.channel:
            assert "channel other" in rule.note or "Channel other" in rule.note, rule


def test_compute_has_no_channel() -> None:
    names = ["nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "my_solver_kernel(float*, int)"]
    out = classify(pl.DataFrame({"name": names}), default_rules())
    assert out["channel"].to_list() == [None, None]


# --- nvtx-keyed rules: EP over NCCL send/recv ----------------------------------------------------

SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)"
SENDRECV_OLD = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL"
# HybridEP's intra-node routing-map all-gather: csrc/hybrid_ep/extension/allgather.cu's
# template<int SHARED_SIZE = 1024> ag_nvl_kernel(void**, void*, int, int64_t*, ...) demangled
AG_NVL = ("void ag_nvl_kernel<1024>(void**, void*, int, long*, unsigned long long*, "
          "unsigned long long*, int, int)")  # fmt: skip
T1, T2 = 101, 102  # launching threads

# NVTX ranges: (tid, start, end, name, domain)
RANGES = [
    (T1, 100, 200, "moe_dispatch forward", None),
    (T1, 300, 400, "moe_combine backward", None),
    (T1, 500, 600, "dispatch_core in hybrid-ep", None),  # HybridEP executor: not a phase
    (T1, 700, 800, "ncclSend", "NCCL"),  # NCCL's own range around every SendRecv
    (T1, 900, 1000, "layer_0f-layer_1b", None),  # Megatron layer pair, around a phase
    (T1, 910, 990, "moe_dispatch backward", None),
    (T1, 920, 980, "ncclGroupStart", "NCCL"),
    (T1, 1100, 1200, "token_combine", None),
    (T1, 1300, 1400, "mlp wgrad", None),  # another schedule node: not an EP phase
    (T1, 1500, 1600, "allgather_routing_map in hybrid-ep", None),
]
# kernels: (corr_id, name, launch start on its thread, thread, expected class/subclass/channel)
LAUNCHES = [
    (1, SENDRECV, 110, T1, ("comm", "nccl", "ep.dispatch")),
    (2, SENDRECV, 310, T1, ("comm", "nccl", "ep.combine")),
    (3, SENDRECV, 250, T1, ("comm", "nccl", "nccl.sendrecv")),  # outside any phase
    (4, SENDRECV, 510, T1, ("comm", "nccl", "nccl.sendrecv")),
    (5, SENDRECV, 710, T1, ("comm", "nccl", "nccl.sendrecv")),
    (6, SENDRECV, 110, T2, ("comm", "nccl", "nccl.sendrecv")),  # phase is on another thread
    (7, ALLREDUCE, 120, T1, ("comm", "nccl", "nccl.allreduce")),  # only send/recv is EP
    (8, SENDRECV, 930, T1, ("comm", "nccl", "ep.dispatch")),  # nested: layer > phase > group
    (9, SENDRECV_OLD, 1110, T1, ("comm", "nccl", "ep.combine")),  # pre-2.19 name
    (10, SENDRECV, 1310, T1, ("comm", "nccl", "nccl.sendrecv")),
    (11, ALLGATHER, 1510, T1, ("comm", "nccl", "ep.sync")),  # inter-node routing-map gather
    (12, ALLGATHER, 1700, T1, ("comm", "nccl", "nccl.allgather")),
    (13, AG_NVL, 1520, T1, ("comm", "hybridep.aux", "ep.sync")),
    (14, AG_NVL, 1710, T1, ("other", "unclassified", None)),  # generic name outside its range
]


def phase_trace() -> Trace:
    """One process, one GPU, the kernels of :data:`LAUNCHES` 1 µs apart, each launched by a
    1-ns call at its launch time on its thread, and the ranges of :data:`RANGES`."""
    kernels = kernel_frame(
        [(0, 0, 7, 10_000 + 1000 * c, 10_500 + 1000 * c, c, n, n, None, None)
         for c, n, *_ in LAUNCHES],
    )  # fmt: skip
    runtime = pl.DataFrame(
        [(0, tid, at, at + 1, c, None) for c, _, at, tid, _ in LAUNCHES],
        schema=model.RUNTIME_SCHEMA, orient="row",
    )  # fmt: skip
    nvtx = pl.DataFrame(
        [(0, tid, s, e, name, dom, "pushpop", False) for tid, s, e, name, dom in RANGES],
        schema=model.NVTX_SCHEMA, orient="row",
    )  # fmt: skip
    e = model.empty
    return Trace("synthetic", "nsys-sqlite", None, None, kernels, e(model.MEMOP_SCHEMA), runtime,
                 nvtx, e(model.GPU_SCHEMA), e(model.MEMORY_EVENT_SCHEMA))  # fmt: skip


def labels(kernels: pl.DataFrame) -> dict[int, tuple[str, str, str | None]]:
    return {c: (k, s, ch) for c, k, s, ch in
            kernels.select("corr_id", "class", "subclass", "channel").iter_rows()}  # fmt: skip


@pytest.mark.parametrize("how", ["classify_trace", "prepare"])
def test_ep_phase_rules(how: str) -> None:
    trace = phase_trace()
    out = classify_trace(trace, default_rules()) if how == "classify_trace" else prepare(trace)
    assert labels(out.kernels) == {c: want for c, *_, want in LAUNCHES}


def test_ep_phase_rules_need_the_launch_and_the_ranges() -> None:
    """Without runtime rows (or NVTX) no range encloses a launch: plain NCCL channels."""
    trace = phase_trace()
    bare = classify(trace.kernels, default_rules())
    assert set(bare.filter(pl.col("name") == SENDRECV)["channel"]) == {"nccl.sendrecv"}
    no_nvtx = classify(trace.kernels, default_rules(), runtime=trace.runtime,
                       nvtx=model.empty(model.NVTX_SCHEMA))  # fmt: skip
    assert set(no_nvtx.filter(pl.col("name") == SENDRECV)["channel"]) == {"nccl.sendrecv"}


def test_ep_phase_patterns_are_anchored() -> None:
    """The phase patterns take the whole bare range name, nothing that merely contains it."""
    nvtx_rules = [r for r in default_rules().rules if r.nvtx]
    by_channel = {r.channel: r.nvtx for r in nvtx_rules if r.subclass == "nccl"}
    dispatch, combine = by_channel["ep.dispatch"], by_channel["ep.combine"]
    assert all(re.fullmatch(dispatch, n) for n in
               ("moe_dispatch forward", "moe_dispatch backward", "token_dispatch"))  # fmt: skip
    assert all(re.fullmatch(combine, n) for n in
               ("moe_combine forward", "moe_combine backward", "token_combine"))  # fmt: skip
    for name in (
        "dispatch_core in hybrid-ep",
        "combine_core in hybrid-ep",
        "NCCL:ncclSend",
        "ncclSend",
        "ncclRecv",
        "ncclGroupStart",
        "mlp wgrad",
        "moe_dispatch",
        "pre_dispatch_computation forward",
        "layer_0f-layer_1b",
        "moe_dispatch forward, op_id = 3",
        "moe_combine forward",
    ):
        assert not re.search(dispatch, name), name
    for name in (
        "combine_core in hybrid-ep",
        "combine_postprocess in hybrid-ep",
        "moe_combine",
        "moe_dispatch forward",
        "token_combine_2",
    ):
        assert not re.search(combine, name), name


# --- real traces ---------------------------------------------------------------------------------

DEEPSEEK = "kineto/deepseek-v3-ep64-train/rank0.json.gz"


def real_traces() -> list[str]:
    if not (TRACES / "nsys").is_dir():
        return []
    found = sorted(TRACES.glob("**/*.sqlite")) + sorted(TRACES.glob("**/*.json.gz"))
    return [str(p.relative_to(TRACES)) for p in found]


@pytest.fixture(scope="module")
def deepseek_kernels() -> pl.DataFrame:
    return prepare(load(require_shared() / DEEPSEEK)).kernels


def test_deepseek_dispatch_combine_notify_are_separate(deepseek_kernels: pl.DataFrame) -> None:
    comm = deepseek_kernels.filter(pl.col("class") == "comm")
    kind = pl.col("name").str.extract(r"dpsk::ep::internode::(\w+)<")
    counts = comm.group_by(kind.alias("kernel"), "channel").len().sort("kernel")
    assert counts.rows() == [
        ("cached_notify", "ep.sync", 12),  # counts as in rank0.json.gz
        ("combine", "ep.combine", 8),
        ("dispatch", "ep.dispatch", 8),
        ("notify_dispatch", "ep.sync", 4),
    ]
    # every DeepEP kernel of the trace is in one of the three, and only there
    assert comm.height == 32 and set(comm["channel"]) == {"ep.dispatch", "ep.combine", "ep.sync"}


NCCL_CHANNEL = {"AllReduce": "nccl.allreduce", "Broadcast": "nccl.broadcast",
                "SendRecv": "nccl.sendrecv", "AllGather": "nccl.allgather",
                "ReduceScatter": "nccl.reducescatter"}  # fmt: skip


@pytest.mark.parametrize("relpath", real_traces() or ["(no shared traces)"])
def test_every_comm_kernel_of_a_real_trace_has_a_channel(relpath: str) -> None:
    kernels = prepare(load(require_shared() / relpath)).kernels
    comm = kernels.filter(pl.col("class") == "comm")
    assert comm["channel"].null_count() == 0
    assert set(comm["channel"]) <= set(VOCABULARY)
    assert (
        kernels.filter(pl.col("class") != "comm")["channel"].null_count()
        == kernels.filter(pl.col("class") != "comm").height
    )
    for name, channel in comm.select("name", "channel").unique().iter_rows():
        coll = re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)_", name)
        if coll:  # no Megatron phase ranges in these traces: the name's collective
            assert channel == NCCL_CHANNEL[coll.group(1)], name
        assert channel != "other", f"a real comm kernel with no known channel: {name[:100]}"


CNN_TRACES = [
    "nsys/nersc-ddp-4gpu-baseline.sqlite",  # ResNet DDP
    "nsys/nersc-ddp-4gpu-bucketcap100mb.sqlite",
    "kineto/nccl-ns-resolution/nccl_data.json.gz",  # cuDNN convolutions too
]
CONV_NAME = re.compile(
    r"xmma_cudnn::|implicit_gemm|[Cc]onvolve|cutlass_cudnn_|_alg\d_nd_\w+_engine|cudnn::cnn::|"
    r"ImplicitGemmConvolution|s1688(?:fprop|dgrad|wgrad)"
)


@pytest.mark.parametrize("relpath", CNN_TRACES)
def test_convolutions_are_matrix_math(relpath: str) -> None:
    path = require_shared() / relpath
    kernels = prepare(load(path)).kernels
    conv = kernels.filter(pl.col("name").str.contains(CONV_NAME.pattern))
    assert conv.height > 100
    assert set(conv.select("class", "subclass").unique().rows()) == {("gemm", "conv")}
    assert kernels.filter(pl.col("subclass") == "conv")["class"].unique().to_list() == ["gemm"]
    if relpath.startswith("nsys/nersc"):  # all-reduce runs under the convolutions
        assert analyze(path).totals.comm_gemm_attn_ns > 0


def test_cnn_conv_names_by_kind() -> None:
    """fprop, dgrad and wgrad, cuDNN 8 engines and xmma/CUTLASS implicit GEMM, from the traces."""
    names = [
        "void convolveNd_dgrad_float_engine<float, (int)3, (int)512, (int)6, (int)5, (int)3, "
        "(int)3, (int)3, (bool)0>(int, int, int, const T1 *, int, const T1 *, int, T1 *)",
        "void wgrad_alg1_nd_float_engine<float, float, (int)3, (int)0, (int)5, (int)7, (int)4, "
        "(int)3, (int)5, (bool)0, (bool)0>(int, int, int, const T1 *, int)",
        "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, "
        "int)",
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_"
        "stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",
        "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_"
        "stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_"
        "16x4_nhwc_align4>(cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4"
        "::Params)",
        "void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_infer::"
        "ComputeOffsetsParams)",
        # public TensorFlow/PyTorch profiles (cuDNN 7/8 names; trace files not kept here)
        "void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, true, "
        "false, true>(int, int, int, float const*, int, float*)",
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, "
        "float const*, int, float const*, int, float*)",
        "volta_scudnn_128x128_relu_small_nn_v1",
        "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
        "turing_fp16_s1688cudnn_fp16_128x128_ldg8_relu_f2f_exp_medium_nhwc_gelu_tn_v1",
    ]
    out = classify(pl.DataFrame({"name": names}), default_rules())
    assert out.select("class", "subclass").unique().rows() == [("gemm", "conv")]


def test_batch_norm_of_cudnn_is_not_conv() -> None:
    # cuDNN batch norm lives beside the convolutions (cudnn::detail::): memory-bound, norm
    name = "void cudnn::detail::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(int)"
    out = classify(pl.DataFrame({"name": [name]}), default_rules()).row(0, named=True)
    assert (out["class"], out["subclass"]) == ("elementwise", "norm")


# --- whole-graph rows ----------------------------------------------------------------------------


def test_no_default_rule_names_a_whole_graph_row() -> None:
    rules = default_rules().rules
    names = pl.Series(["[CUDA graph 3]", "[CUDA graph 12345]"])
    catch_all = rules[-1]
    assert (catch_all.klass, catch_all.subclass) == ("other", "unclassified")
    for rule in rules[:-1]:
        assert rule.pattern, f"a default rule with only an nvtx key matches any name: {rule}"
        assert not rule.search(names).any(), rule
    df = pl.DataFrame({"name": names, "graph": ["whole", "whole"]})
    out = classify(df, default_rules())
    assert out.select("class", "subclass", "channel").unique().rows() == [
        ("graph", "contents unknown", None)
    ]


def test_examples_keep_their_channels() -> None:
    """The shipped HybridEP example: dispatch and combine apart, the DP all-reduce on NCCL."""
    from nsysmoe.api import example_paths

    for path in example_paths("nsys"):
        kernels = prepare(load(Path(path))).kernels.filter(pl.col("class") == "comm")
        assert set(kernels["channel"]) == {"ep.dispatch", "ep.combine", "nccl.allreduce"}
