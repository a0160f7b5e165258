"""Which MoE token dispatcher a trace ran, from its kernels (docs/domain.md, dispatcher table):
the A/B contract compares it, and the wall verdict only advises dispatcher knobs where one ran."""

from __future__ import annotations

import polars as pl

from nsysmoe.results import Dispatcher

NONE: Dispatcher = "none detected"


def dispatcher_of(subclasses: set[str], names: pl.Series) -> Dispatcher:
    """The MoE token dispatcher the kernel names reveal (docs/domain.md, dispatcher table)."""
    if any(s.startswith("hybridep") for s in subclasses):
        return "HybridEP"
    if any(s.startswith("deepep") for s in subclasses):
        return "DeepEP"
    if bool(names.str.contains("SendRecv").any()):
        return "alltoall (NCCL SendRecv)"
    return NONE
