"""What each result's report says, as a :class:`~nsysmoe.renderers.document.Document`: one module
per result type, one :func:`document` entry dispatching on it."""

from __future__ import annotations

from functools import singledispatch

from nsysmoe.renderers.document import Document, ReportOptions
from nsysmoe.renderers.report import comparison, compat, kernels, ranks, trace
from nsysmoe.results import (
    Comparison,
    CompatRun,
    KernelSummary,
    RanksAnalysis,
    RanksComparison,
    TraceAnalysis,
)


def document(result: object, options: ReportOptions | None = None) -> Document:
    """The report of ``result`` (a TraceAnalysis, Comparison, RanksAnalysis, …) as blocks,
    showing as much as ``options`` says."""
    return _document(result, options or ReportOptions())


@singledispatch
def _document(result: object, options: ReportOptions) -> Document:
    raise TypeError(f"nsysmoe has no report for a {type(result).__name__}")


_document.register(TraceAnalysis, trace.document)
_document.register(Comparison, comparison.document)
_document.register(RanksAnalysis, lambda r, options: ranks.document(r))
_document.register(RanksComparison, lambda r, options: ranks.comparison_document(r))
_document.register(CompatRun, lambda r, options: compat.document(r))
_document.register(KernelSummary, kernels.document)
