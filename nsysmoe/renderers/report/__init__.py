"""What each result's report says, as a :class:`~nsysmoe.renderers.document.Document`: one module
per result type, one :func:`document` entry dispatching on it."""

from __future__ import annotations

from functools import singledispatch

from nsysmoe.renderers.document import Document
from nsysmoe.renderers.report import comparison, compat, kernels, ranks, trace
from nsysmoe.results import (
    Comparison,
    CompatRun,
    KernelSummary,
    RanksAnalysis,
    RanksComparison,
    TraceAnalysis,
)


@singledispatch
def document(result: object) -> Document:
    """The report of ``result`` (a TraceAnalysis, Comparison, RanksAnalysis, …) as blocks."""
    raise TypeError(f"nsysmoe has no report for a {type(result).__name__}")


document.register(TraceAnalysis, trace.document)
document.register(Comparison, comparison.document)
document.register(RanksAnalysis, ranks.document)
document.register(RanksComparison, ranks.comparison_document)
document.register(CompatRun, compat.document)
document.register(KernelSummary, kernels.document)
