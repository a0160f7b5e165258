"""Kernel names of an MoE training run as nsys 2024.5 prints them (demangled, short, launch).

Names follow real exports (``(int)4``-style template arguments, ``ncclDevKernelArgsStorage``);
several kernels share a ``shortName`` (``device_kernel``, ``dispatch_kernel``) as in real traces.
"""

from __future__ import annotations

from dataclasses import dataclass

RUNTIME, DRIVER = 0, 1  # CUPTI_ACTIVITY_KIND_RUNTIME.eventClass


@dataclass(frozen=True, slots=True)
class KernelSpec:
    name: str
    short: str
    dur_us: float  # mean duration on the GPU
    grid: tuple[int, int, int] = (1320, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    registers: int = 24
    dynamic_smem: int = 0
    api: str = "cudaLaunchKernel_v7000"
    api_class: int = RUNTIME


_NCCL_ARGS = "(ncclDevKernelArgsStorage<(unsigned long)4096>)"
_GEMM = {"grid": (132, 1, 1), "block": (384, 1, 1), "registers": 168, "dynamic_smem": 213248}
_EP = {"grid": (32, 1, 1), "block": (544, 1, 1), "registers": 128, "dynamic_smem": 198656}
_NCCL = {"grid": (32, 1, 1), "block": (640, 1, 1), "registers": 96, "dynamic_smem": 82240,
         "api": "cuLaunchKernelEx", "api_class": DRIVER}  # fmt: skip
_EXEC_C = {"api": "cudaLaunchKernelExC_v11060"}
_FA3_FWD = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
    "flash::CollectiveMainloopFwdSm90<(int)2, cute::tuple<cute::C<(int)1>, cute::C<(int)1>, "
    "cute::C<(int)1>>, cute::tuple<cute::C<(int)128>, cute::C<(int)128>, cute::C<(int)128>>, "
    "(int)128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, (bool)1, (bool)0, (bool)0, "
    "(bool)0, (bool)0, (bool)0, (bool)1, (bool)1, (bool)0, (bool)0, (bool)0>, "
    "flash::CollectiveEpilogueFwd<cute::tuple<cute::C<(int)128>, cute::C<(int)128>, "
    "cute::C<(int)128>>, cute::tuple<cute::C<(int)1>, cute::C<(int)1>, cute::C<(int)1>>, "
    "cutlass::bfloat16_t, cutlass::arch::Sm90, (int)256, (bool)0, (bool)0, (bool)0, "
    "(bool)0>, flash::SingleTileScheduler<(bool)0, (bool)1, (bool)1, (int)128>>>>(T1::Params)"
)
_FA3_BWD = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<"
    "flash::CollectiveMainloopBwdSm90<(int)2, cute::tuple<cute::C<(int)1>, cute::C<(int)1>, "
    "cute::C<(int)1>>, cute::tuple<cute::C<(int)64>, cute::C<(int)128>, cute::C<(int)128>>, "
    "(int)128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, (bool)1, (bool)0, (bool)0, "
    "(bool)0, (bool)1, (bool)1, (bool)1, (int)2, (int)1, (int)2, (bool)1, (bool)0, (bool)0>, "
    "flash::CollectiveEpilogueBwd<cute::tuple<cute::C<(int)64>, cute::C<(int)128>, "
    "cute::C<(int)128>>, cutlass::bfloat16_t, cutlass::arch::Sm90, (int)256, (bool)0, "
    "(bool)0, (bool)0, (int)2, (int)1>, flash::SingleTileScheduler<(bool)0, (bool)0, "
    "(bool)1, (int)64>>>>(T1::Params)"
)
_GROUPED = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
    "GroupProblemShape<cute::tuple<int, int, int>>, cutlass::gemm::collective::"
    "CollectiveMma<cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecializedCooperative<(int)4, "
    "cute::tuple<cute::C<(int)2>, cute::C<(int)1>, cute::C<(int)1>>, cutlass::gemm::"
    "KernelPtrArrayTmaWarpSpecializedCooperative>, cute::tuple<cute::C<(int)256>, "
    "cute::C<(int)128>, cute::C<(int)64>>, cutlass::bfloat16_t, cute::tuple<long, "
    "cute::C<(int)1>, cute::C<(int)0>> *, cutlass::bfloat16_t, cute::tuple<long, "
    "cute::C<(int)1>, cute::C<(int)0>> *, cute::TiledMMA<cute::MMA_Atom<cute::SM90::GMMA::"
    "MMA_64x128x16_F32BF16BF16_SS<(cute::GMMA::Major)0, (cute::GMMA::Major)0, "
    "(cute::GMMA::ScaleIn)1, (cute::GMMA::ScaleIn)1>>>>, void, void>, void, void>>(T1::Params)"
)


def _k(name: str, short: str, dur_us: float, **kw: object) -> KernelSpec:
    return KernelSpec(name, short, dur_us, **kw)  # type: ignore[arg-type]


K: dict[str, KernelSpec] = {
    # --- communication ------------------------------------------------------------------------
    "sendrecv": _k(f"ncclDevKernel_SendRecv{_NCCL_ARGS}", "ncclDevKernel_SendRecv", 240, **_NCCL),
    "reduce_scatter": _k(f"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL{_NCCL_ARGS}",
                         "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 300, **_NCCL),
    "all_gather": _k(f"ncclDevKernel_AllGather_RING_LL{_NCCL_ARGS}",
                     "ncclDevKernel_AllGather_RING_LL", 260, **_NCCL),
    "all_reduce": _k(f"ncclDevKernel_AllReduce_Sum_f32_RING_LL{_NCCL_ARGS}",
                     "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 900, **_NCCL),
    "hep_scan": _k("void hybrid_ep::scan<(int)32, (int)4, (int)256>(hybrid_ep::scan_param_t)",
                   "scan", 12, grid=(8, 1, 1), block=(256, 1, 1), registers=40),
    "hep_dispatch": _k(
        "void hybrid_ep::dispatch_kernel<unsigned short, (int)8, (int)2048, (int)128, (int)16, "
        "(int)8, (int)1, (bool)1, (bool)1>(hybrid_ep::dispatch_kernel_param_t<unsigned short>)",
        "dispatch_kernel", 360, **_EP),
    "hep_combine": _k(
        "void hybrid_ep::combine_kernel<(int)8, (int)2048, (int)128, (int)16, (int)8, (int)1, "
        "(bool)1>(hybrid_ep::combine_kernel_param_t)", "combine_kernel", 330, **_EP),
    "dep_notify": _k(
        "void deep_ep::intranode::notify_dispatch<(int)8>(const int *, int *, int, const int *, "
        "int *, int, int, const bool *, int *, int *, int, int, int, void **, int **, int)",
        "notify_dispatch", 25, grid=(9, 1, 1), registers=40, **_EXEC_C),
    "dep_dispatch": _k(
        "void deep_ep::intranode::dispatch<(int)8, (int)768, (int)8192>(int4 *, float *, int *, "
        "long *, float *, int *, int *, const int4 *, const float *, const long *, "
        "const float *, const bool *, const int *, int, int, int, int, int, int, int, int, "
        "void **, int, int, int)", "dispatch", 380, grid=(20, 1, 1), block=(768, 1, 1),
        registers=96, **_EXEC_C),
    "dep_combine": _k(
        "void deep_ep::intranode::combine<__nv_bfloat16, (int)8, (int)768, (int)4096>("
        "__nv_bfloat16 *, float *, const __nv_bfloat16 *, const float *, const __nv_bfloat16 *, "
        "const __nv_bfloat16 *, const int *, const int *, const int *, int, int, int, int, int, "
        "void **, int, int, int)", "combine", 340, grid=(20, 1, 1), block=(768, 1, 1),
        registers=96, **_EXEC_C),
    "dep_layout": _k(
        "void deep_ep::layout::get_dispatch_layout<(int)256, (int)32, (int)8>(const long *, "
        "int *, int *, int *, bool *, int, int, int, int)", "get_dispatch_layout", 14,
        grid=(9, 1, 1), block=(256, 1, 1), registers=32),
    # --- attention ----------------------------------------------------------------------------
    "fa_fwd": _k(_FA3_FWD, "device_kernel", 260, grid=(32, 16, 4), block=(384, 1, 1),
                 registers=168, dynamic_smem=197632, **_EXEC_C),
    "fa_bwd": _k(_FA3_BWD, "device_kernel", 560, grid=(64, 16, 4), block=(384, 1, 1),
                 registers=168, dynamic_smem=222208, **_EXEC_C),
    "fa_prep": _k("void flash::prepare_varlen_num_blocks_kernel<(int)128, (int)128, (bool)1>"
                  "(int, int, int, const int *, const int *, const int *, const int *, "
                  "const int *, const int *, int, int, int, int, int, cutlass::FastDivmod, "
                  "cutlass::FastDivmod, int *, int *, bool)", "prepare_varlen_num_blocks_kernel",
                  6, grid=(1, 1, 1), block=(1024, 1, 1), registers=32),
    # --- GEMM ---------------------------------------------------------------------------------
    "gemm_qkv": _k("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN",
                   "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", 180, **_GEMM),
    "gemm_proj": _k("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN",
                    "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN", 110, **_GEMM),
    "gemm_dgrad": _k("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
                     "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 170, **_GEMM),
    "gemm_wgrad": _k("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_NTN",
                     "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_NTN", 190, **_GEMM),
    "gemm_router": _k("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT",
                      16, **_GEMM),
    "grouped": _k(_GROUPED, "device_kernel", 240, **_GEMM, **_EXEC_C),
    # --- MoE glue -----------------------------------------------------------------------------
    "topk": _k(
        "void transformer_engine::fused_router::fused_topk_with_score_function_forward_kernel<"
        "__nv_bfloat16>(const __nv_bfloat16 *, int, int, int, bool, int, int, int, float, "
        "const __nv_bfloat16 *, __nv_bfloat16 *, bool *, __nv_bfloat16 *)",
        "fused_topk_with_score_function_forward_kernel", 14),
    "topk_bwd": _k(
        "void transformer_engine::fused_router::fused_topk_with_score_function_backward_kernel<"
        "__nv_bfloat16>(const bool *, const __nv_bfloat16 *, const __nv_bfloat16 *, "
        "__nv_bfloat16 *, int, int, int, bool, int, float)",
        "fused_topk_with_score_function_backward_kernel", 12),
    "permute": _k(
        "void transformer_engine::moe_permute_kernel<__nv_bfloat16, float, (int)128, (bool)1>("
        "const __nv_bfloat16 *, __nv_bfloat16 *, const int *, const float *, float *, "
        "const int *, int, int, int, int)", "moe_permute_kernel", 30),
    "unpermute": _k(
        "void transformer_engine::moe_unpermute_kernel<__nv_bfloat16, float, (bool)1>("
        "const __nv_bfloat16 *, __nv_bfloat16 *, const int *, const float *, int, int, int)",
        "moe_unpermute_kernel", 28),
    # --- elementwise --------------------------------------------------------------------------
    "rmsnorm": _k(
        "void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<transformer_engine::"
        "normalization::Kernel_traits<float, __nv_bfloat16, __nv_bfloat16, float, int, (int)4096, "
        "(int)1, (int)1, (int)4, (int)16, (int)8, (int)4, (int)32>>(transformer_engine::"
        "normalization::FwdParams)", "rmsnorm_fwd_tuned_kernel", 22),
    "rmsnorm_bwd": _k(
        "void transformer_engine::normalization::rmsnorm_bwd_tuned_kernel<transformer_engine::"
        "normalization::Kernel_traits<float, __nv_bfloat16, __nv_bfloat16, float, int, (int)4096, "
        "(int)1, (int)1, (int)4, (int)16, (int)8, (int)4, (int)32>>(transformer_engine::"
        "normalization::BwdParams)", "rmsnorm_bwd_tuned_kernel", 34),
    "add": _k(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<"
        "c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)",
        "vectorized_elementwise_kernel", 18),
    "silu": _k(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::"
        "silu_kernel(at::TensorIteratorBase &)::[lambda() (instance 1)]::operator ()() const::"
        "[lambda() (instance 4)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], "
        "std::array<char *, (unsigned long)2>>(int, T2, T3)", "vectorized_elementwise_kernel", 26),
    "mul": _k(
        "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::"
        "gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
        "c10::BFloat16, at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase "
        "&, const T1 &)::[lambda(int) (instance 1)]>(int, T3)", "elementwise_kernel", 20),
    "softmax": _k(
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<(int)4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)",
        "cunn_SoftMaxForward", 8),
    "reduce": _k(
        "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, "
        "at::native::MeanOps<float, float, float, float>, unsigned int, float, (int)4, (int)4>>"
        "(T3)", "reduce_kernel", 9),
    "adam": _k(
        "void multi_tensor_apply_kernel<TensorListMetadata<(int)4>, AdamFunctor<float, (int)4>, "
        "float, float, float, float, float, float, adamMode_t, float>(long, int *, T1, T2, T3...)",
        "multi_tensor_apply_kernel", 160, grid=(320, 1, 1), block=(512, 1, 1), registers=40),
    "l2norm": _k(
        "void multi_tensor_apply_kernel<TensorListMetadata<(int)1>, L2NormFunctor<float, (int)512, "
        "(int)1>, float *, float *, bool, float *, float *, int>(long, int *, T1, T2, T3...)",
        "multi_tensor_apply_kernel", 60, grid=(320, 1, 1), block=(512, 1, 1), registers=38),
}  # fmt: skip
