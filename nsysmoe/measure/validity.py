"""Validity gates from the seeds: when a trace's timing is not what its command line says.

A dispatcher backend selected on the command line that left no kernel in the trace (``flex`` +
DeepEP, and no DeepEP kernel ran: the import failed or the run fell back) times another code
path, so "this is not a timing of DeepEP". Forced router load balancing
(``--moe-router-force-load-balancing``) is benchmark-only: routing is made even, so the
timing holds for perfectly balanced tokens, not for the model's own routing.
"""

from __future__ import annotations

from nsysmoe.results import Caveat, Dispatcher

TRUE = {"true", "1", "yes", "on"}
#: backend named on the command line -> the dispatcher its kernels reveal
BACKENDS: dict[str, Dispatcher] = {"deepep": "DeepEP", "hybridep": "HybridEP"}


def is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() in TRUE


def selected_backend(config: dict[str, str]) -> tuple[str, str] | None:
    """(backend, how the command line selected it) when it names a flex dispatcher backend."""
    backend = (config.get("flex_backend") or "").strip().lower()
    if backend in BACKENDS:
        how = f"moe_flex_dispatcher_backend={config['flex_backend']}"
        if "dispatcher" in config:
            how = f"moe_token_dispatcher_type={config['dispatcher']}, {how}"
        return backend, how
    if is_true(config.get("deepep")):
        return "deepep", "moe_enable_deepep"
    return None


def caveats(config: dict[str, str], dispatcher: Dispatcher) -> tuple[Caveat, ...]:
    """The caveats of one trace, from its contract settings and the dispatcher its kernels ran."""
    out = []
    if (chosen := selected_backend(config)) is not None:
        backend, how = chosen
        name = BACKENDS[backend]
        if dispatcher != name:
            out.append(Caveat("backend_not_in_use", (
                f"backend not in use: {how} on the command line, but no {name} kernel ran "
                f"(dispatcher seen: {dispatcher}): this is not a timing of {name} (a failed "
                "import or a fallback path ran instead)")))  # fmt: skip
    if is_true(config.get("moe_router_force_load_balancing")):
        out.append(Caveat("benchmark_only", (
            "benchmark-only: moe_router_force_load_balancing makes routing perfectly balanced; "
            "the timing is of even tokens per expert, not of the model's own routing")))
    return tuple(out)
