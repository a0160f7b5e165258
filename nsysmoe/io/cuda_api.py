"""Which CUDA API calls matter for CUDA-graph accounting and for the dependency graph (syncs,
cross-stream waits, event records), told apart by name in every reader.

nsys names runtime calls with a version suffix (``cudaGraphLaunch_v10000``), Kineto without
(``cudaGraphLaunch``); driver calls drop the ``da`` (``cuGraphLaunch``). Only these calls get a
kind (:data:`nsysmoe.model.API_KINDS`); every other call's kind is null.
"""

from __future__ import annotations

import polars as pl

#: (kind, pattern searched in the API name), first match wins
API_PATTERNS: tuple[tuple[str, str], ...] = (
    ("graph_launch", r"^cu(?:da)?GraphLaunch"),
    ("capture_begin", r"^cu(?:da)?StreamBeginCapture"),
    ("capture_end", r"^cu(?:da)?StreamEndCapture"),
    ("stream_sync", r"^cu(?:da)?StreamSynchronize"),
    ("event_sync", r"^cu(?:da)?EventSynchronize"),
    ("device_sync", r"^(?:cudaDeviceSynchronize|cuCtxSynchronize|cudaThreadSynchronize)"),
    ("stream_wait", r"^cu(?:da)?StreamWaitEvent"),
    ("event_record", r"^cu(?:da)?EventRecord"),
    # a synchronous copy or memset (its name without "Async"): the call returns after the op
    ("blocking_copy", r"^cu(?:da)?Mem(?:cpy|set)"),
)
#: kinds whose pattern does not apply to a name holding this (the asynchronous variants)
NOT_ASYNC = {"blocking_copy": "Async"}


def api_kind(name: pl.Expr) -> pl.Expr:
    """The :data:`~nsysmoe.model.API_KINDS` value of each API name, null for any other call."""
    def hit(kind: str, pattern: str) -> pl.Expr:
        found = name.str.contains(pattern)
        return found & ~name.str.contains(NOT_ASYNC[kind]) if kind in NOT_ASYNC else found

    expr = pl.when(hit(*API_PATTERNS[0])).then(pl.lit(API_PATTERNS[0][0]))
    for kind, pattern in API_PATTERNS[1:]:
        expr = expr.when(hit(kind, pattern)).then(pl.lit(kind))
    return expr.otherwise(pl.lit(None, pl.String))
