"""The settings that define a MoE measurement contract, parsed from the recorded command line.

Megatron-LM takes them as options (``--expert-model-parallel-size 16``, ``--bf16``); Megatron
Bridge and other Hydra-style launchers as ``key=value`` overrides
(``model.expert_model_parallel_size=16``, ``comm_overlap.overlap_moe_expert_parallel_comm=True``).
Both spellings map to one canonical name (:data:`CONTRACT_KEYS`); a flag given without a value is
``true``. Values were redacted by the reader where they had to be.
"""

from __future__ import annotations

#: canonical contract key -> the option / override names that set it (last dotted part,
#: dashes as underscores)
CONTRACT_KEYS: dict[str, tuple[str, ...]] = {
    "dispatcher": ("moe_token_dispatcher_type",),
    "flex_backend": ("moe_flex_dispatcher_backend",),
    "deepep": ("moe_enable_deepep",),
    "overlap_moe_expert_parallel_comm": ("overlap_moe_expert_parallel_comm",),
    "delay_wgrad_compute": ("delay_wgrad_compute",),
    "ep": ("expert_model_parallel_size",),
    "tp": ("tensor_model_parallel_size",),
    "pp": ("pipeline_model_parallel_size",),
    "vpp": ("virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage"),
    "cp": ("context_parallel_size",),
    "etp": ("expert_tensor_parallel_size",),
    "micro_batch_size": ("micro_batch_size",),
    "global_batch_size": ("global_batch_size",),
    "seq_length": ("seq_length", "seq_len", "encoder_seq_length"),
    "num_experts": ("num_experts", "num_moe_experts"),
    "moe_router_topk": ("moe_router_topk",),
    "bf16": ("bf16",),
    "fp16": ("fp16",),
    "fp8": ("fp8", "fp8_format", "fp8_recipe"),
    "recompute_granularity": ("recompute_granularity",),
    "recompute_modules": ("recompute_modules",),
    "cuda_graph_impl": ("cuda_graph_impl",),
    "cuda_graph_scope": ("cuda_graph_scope",),
    "moe_router_load_balancing_type": ("moe_router_load_balancing_type",),
    "moe_router_force_load_balancing": ("moe_router_force_load_balancing",),
    "moe_shared_expert_overlap": ("moe_shared_expert_overlap",),
    "moe_permute_fusion": ("moe_permute_fusion",),
    "overlap_grad_reduce": ("overlap_grad_reduce",),
    "overlap_param_gather": ("overlap_param_gather",),
    "tp_comm_overlap": ("tp_comm_overlap",),
}
_BY_NAME = {name: key for key, names in CONTRACT_KEYS.items() for name in names}


def _canonical(name: str) -> str | None:
    return _BY_NAME.get(name.lstrip("-").rsplit(".", 1)[-1].replace("-", "_").lower())


def contract_config(argv: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The contract settings found on the command line, by canonical key (values as given;
    a repeated option keeps its last value, several values after one option are joined by
    spaces: ``--cuda-graph-scope attn moe_router``)."""
    out: dict[str, str] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        key = _canonical(name) if (arg.startswith("-") or eq) else None
        i += 1
        if key is None:
            continue
        if eq:
            out[key] = value
            continue
        values = []
        while i < len(args) and not args[i].startswith("-") and "=" not in args[i]:
            values.append(args[i])
            i += 1
        out[key] = " ".join(values) if values else "true"
    return out
