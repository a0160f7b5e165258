"""The settings that define a MoE measurement contract, parsed from the recorded command line.

Megatron-LM takes them as options (``--expert-model-parallel-size 16``, ``--bf16``); Megatron
Bridge and other Hydra-style launchers as ``key=value`` overrides
(``model.expert_model_parallel_size=16``, ``comm_overlap.overlap_moe_expert_parallel_comm=True``).
Both spellings map to one canonical name (:data:`CONTRACT_KEYS`); a flag given without a value is
``true``. Secret values arrive redacted (:func:`nsysmoe.io.load_trace` →
:func:`nsysmoe.io.redact.redact_trace`).
"""

from __future__ import annotations

import re

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
    # the SMs a dispatcher's kernels take (DeepEP default 20, HybridEP 16): also read from the
    # blocks its kernels launch (nsysmoe.ab.contract.sm_checks)
    "moe_deepep_num_sms": ("moe_deepep_num_sms",),
    "moe_hybridep_num_sms": ("moe_hybridep_num_sms",),
}
_BY_NAME = {name: key for key, names in CONTRACT_KEYS.items() for name in names}


def option_name(name: str) -> str:
    """An option or override name in one spelling: no leading dashes, dashes as underscores,
    lower case (``--Expert-Model-Parallel-Size`` and ``expert_model_parallel_size`` agree)."""
    return name.lstrip("-").replace("-", "_").lower()


def canonical(name: str) -> str | None:
    """The contract key an option or override name sets (its last dotted part), if any."""
    return _BY_NAME.get(option_name(name).rsplit(".", 1)[-1])


def parse_argv(argv: tuple[str, ...] | list[str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """A command line as (options, positionals): every ``--name V``, ``--name=V``, ``-n V`` and
    ``key=value`` by :func:`option_name` (a repeated option keeps its last value, several
    values after one option are joined by spaces: ``--cuda-graph-scope attn moe_router``; a
    flag without a value is ``true``), and the other words in order (program, script: a word
    ending in ``.py`` or ``.sh`` is never an option's value)."""
    options: dict[str, str] = {}
    positionals: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        name, eq, value = arg.partition("=")
        if eq and (arg.startswith("-") or _OVERRIDE.match(name)):
            options[option_name(name)] = value
            continue
        if not arg.startswith("-") or arg == "-" or _NUMBER.match(arg):
            positionals.append(arg)
            continue
        values = []
        while i < len(args) and not _starts_option(args[i]) and "=" not in args[i] \
                and not args[i].endswith(_SCRIPTS):  # fmt: skip
            values.append(args[i])
            i += 1
        options[option_name(arg)] = " ".join(values) if values else "true"
    return options, tuple(positionals)


_OVERRIDE = re.compile(r"^\+{0,2}[A-Za-z_][\w.-]*$")  # Hydra: key=value, +key=value, ++key=value
_NUMBER = re.compile(r"^-\d")
_SCRIPTS = (".py", ".sh")  # a word ending so is the script, not an option's value


def _starts_option(arg: str) -> bool:
    return arg.startswith("-") and arg != "-" and not _NUMBER.match(arg)


def contract_config(argv: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The contract settings found on the command line, by canonical key (values as given;
    see :func:`parse_argv`)."""
    options, _ = parse_argv(argv)
    out: dict[str, str] = {}
    for name, value in options.items():
        if (key := canonical(name)) is not None:
            out[key] = value
    return out
