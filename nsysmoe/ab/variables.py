"""The variable under test of an A/B, what it may change, and what the two sides are called.

``--vary NAME`` declares it: a contract setting (``overlap_moe_expert_parallel_comm``, in any
spelling: ``--overlap-moe-expert-parallel-comm`` too), another command-line option, an environment
variable, a version (``nsys``, ``driver``, ``cuda``), or a kernel channel (``nccl`` covers every
``nccl.*`` channel) whose kernel counts may change. Undeclared, the one setting that differs
(not incidental) is taken as the variable, and the reports say so.

A variable explains some differences (:data:`CONSEQUENCES`): switching the dispatcher changes
the communication kernels and the dispatcher seen; EP overlap adds its schedule's NVTX ranges;
a parallel size changes everything. Those are *expected consequences*; the rest is unexpected.
"""

from __future__ import annotations

from pathlib import Path

from nsysmoe.ab.settings import Setting, differing
from nsysmoe.errors import UsageError
from nsysmoe.measure.launch import CONTRACT_KEYS, canonical, option_name
from nsysmoe.results import Variable

#: what a difference in a contract setting may change: "kernels:comm", "kernels:compute"
#: (GEMM, attention), "kernels:other" (every other class), "nvtx:schedule" (Megatron's EP-overlap
#: schedule ranges), "nvtx" (any range), "dispatcher", "gpus" (GPU and rank count), "graphs",
#: "sms" (the blocks the dispatcher's kernels launch)
_ALL = frozenset({"kernels:comm", "kernels:compute", "kernels:other", "nvtx"})
#: the contract settings that set a dispatcher's SMs ("sms": the blocks its kernels launch)
SM_SETTINGS = ("moe_deepep_num_sms", "moe_hybridep_num_sms")
_DISPATCH = frozenset({"kernels:comm", "kernels:other", "nvtx", "dispatcher", "sms"})
_SIZES = _ALL | {"gpus", "dispatcher", "sms"}
CONSEQUENCES: dict[str, frozenset[str]] = {
    "dispatcher": _DISPATCH, "flex_backend": _DISPATCH, "deepep": _DISPATCH,
    "overlap_moe_expert_parallel_comm": frozenset({"nvtx:schedule"}),
    "delay_wgrad_compute": frozenset({"nvtx:schedule"}),
    **dict.fromkeys(("ep", "tp", "pp", "vpp", "cp", "etp"), _SIZES),
    **dict.fromkeys(("micro_batch_size", "global_batch_size", "seq_length", "num_experts",
                     "moe_router_topk", "moe_router_load_balancing_type",
                     "moe_router_force_load_balancing", "bf16", "fp16", "fp8",
                     "recompute_granularity", "recompute_modules"), _ALL),
    **dict.fromkeys(("cuda_graph_impl", "cuda_graph_scope"), _ALL | {"graphs"}),
    "moe_shared_expert_overlap": frozenset({"nvtx"}),
    "moe_permute_fusion": frozenset({"kernels:other"}),
    **dict.fromkeys(("overlap_grad_reduce", "overlap_param_gather"),
                    frozenset({"kernels:comm", "nvtx"})),
    "tp_comm_overlap": frozenset({"kernels:comm", "kernels:compute", "nvtx"}),
    **dict.fromkeys(SM_SETTINGS, frozenset({"sms"})),
}  # fmt: skip
#: environment variables by prefix -> what they may change
ENV_CONSEQUENCES = (("NCCL_", frozenset({"kernels:comm"})),
                    ("TORCH_NCCL_", frozenset({"kernels:comm"})),
                    ("NVSHMEM_", frozenset({"kernels:comm"})),
                    ("NVTE_", frozenset({"kernels:compute", "kernels:other"})))  # fmt: skip
#: short names for labels of a setting turned off and on ("overlap off" / "overlap on")
SHORT = {"overlap_moe_expert_parallel_comm": "overlap", "delay_wgrad_compute": "delayed wgrad",
         "tp_comm_overlap": "TP overlap", "overlap_grad_reduce": "grad-reduce overlap",
         "overlap_param_gather": "param-gather overlap", "deepep": "DeepEP",
         "moe_shared_expert_overlap": "shared-expert overlap",
         "moe_permute_fusion": "permute fusion",
         "moe_router_force_load_balancing": "forced balancing"}  # fmt: skip


def declared(
    names: tuple[str, ...], off: dict[str, Setting], on: dict[str, Setting], channels: set[str]
) -> tuple[Variable, ...]:
    """The ``--vary`` names as variables; a name that is nothing of either side is an error."""
    out = []
    for name in names:
        var = _resolve(name, off, on, channels)
        if var is None:
            differs = ", ".join(k for k, s in differing(off, on) if not s.incidental) or "none"
            raise UsageError(
                f"--vary {name}: not a contract setting, command-line option or environment "
                f"variable of either trace, nor one of their kernel channels "
                f"({', '.join(sorted(channels)) or 'none'}); settings that differ: {differs}")
        if all(v.key != var.key for v in out):
            out.append(var)
    return tuple(out)


def _resolve(name: str, off: dict[str, Setting], on: dict[str, Setting],
             channels: set[str]) -> Variable | None:  # fmt: skip
    def var(key: str, kind: str) -> Variable:
        a, b = off.get(key), on.get(key)
        return Variable(key, kind, a and a.value, b and b.value, True)  # type: ignore[arg-type]

    if (key := canonical(name)) is not None or name in CONTRACT_KEYS:
        return var(key or name, "config")
    for key in (name, name.upper()):  # an environment variable or a version, as named
        if (s := off.get(key) or on.get(key)) is not None and s.group in ("environment",
                                                                           "version"):
            return var(key, s.group)  # type: ignore[arg-type]
    if (s := off.get(option_name(name)) or on.get(option_name(name))) is not None:
        return var(option_name(name), "option")
    prefix = name.lower()
    if any(c == prefix or c.startswith(prefix + ".") for c in channels):
        return Variable(prefix, "channel", None, None, True)
    return None


def inferred(off: dict[str, Setting], on: dict[str, Setting]) -> Variable | None:
    """The one setting (contract setting, option or performance variable) that differs, if
    exactly one does."""
    candidates = [(k, s) for k, s in differing(off, on)
                  if s.group in ("config", "option", "environment") and not s.incidental]
    if len(candidates) != 1:
        return None
    key, s = candidates[0]
    a, b = off.get(key), on.get(key)
    return Variable(key, s.group, a and a.value, b and b.value, False)  # type: ignore[arg-type]


def scope_of(variables: tuple[Variable, ...]) -> frozenset[str]:
    """Everything the variables under test may change (see :data:`CONSEQUENCES`)."""
    out: set[str] = set()
    for v in variables:
        if v.kind == "config":
            out |= CONSEQUENCES.get(v.key, frozenset())
        elif v.kind == "option":  # an option nsysmoe does not know: it may change anything
            out |= _ALL
        elif v.kind == "environment":
            out |= next((c for p, c in ENV_CONSEQUENCES if v.key.startswith(p)), frozenset())
    return frozenset(out)


def labels(variables: tuple[Variable, ...], paths: tuple[str, str],
           given: tuple[str, str] | None) -> tuple[str, str]:  # fmt: skip
    """What the sides are called: ``--labels``, else the one setting varied ("overlap off" /
    "overlap on", "ep=8" / "ep=16"), else the file names less their common start."""
    if given is not None:
        return given
    settings = [v for v in variables if v.kind != "channel"]
    if len(settings) == 1 and settings[0].off != settings[0].on:
        v = settings[0]
        if {v.off or "false", v.on or "false"} == {"false", "true"}:
            short = SHORT.get(v.key, v.key.replace("_", " "))
            return tuple(f"{short} {'on' if x == 'true' else 'off'}"
                         for x in (v.off, v.on))  # type: ignore[return-value]
        return tuple(f"{v.key}={x}" if x is not None else f"{v.key} unset"
                     for x in (v.off, v.on))  # type: ignore[return-value]
    return file_labels(paths)


def file_labels(paths: tuple[str, str]) -> tuple[str, str]:
    """The two file (or folder) names without extension, less a common start that ends at a
    separator (``nersc-ddp-4gpu-baseline`` / ``…-bucketcap100mb`` → ``baseline`` /
    ``bucketcap100mb``); the parent folder's name when the names are the same."""
    a, b = (_stem(p) for p in paths)
    if a == b:
        a, b = (f"{Path(p).resolve().parent.name}/{_stem(p)}" for p in paths)
        if a == b:
            return "A", "B"
    cut = 0
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            break
        if x in "-_. /":
            cut = i + 1
    return (a[cut:] or a), (b[cut:] or b)


def _stem(path: str) -> str:
    p = Path(path.rstrip("/"))
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite",
                   ".nsys-rep"):
        if p.name.endswith(suffix):
            return p.name[: -len(suffix)]
    return p.name
