"""What each result's report says, as a :class:`~nsysmoe.renderers.document.Document`: one module
per result type, one :func:`document` entry dispatching on it."""

from __future__ import annotations

from dataclasses import replace
from functools import singledispatch

from nsysmoe.acceptance import Acceptance, AcceptedComparison
from nsysmoe.renderers.document import Details, Document, Lines, ReportOptions
from nsysmoe.renderers.names import side_labels
from nsysmoe.renderers.report import acceptance, comparison, compat, kernels, ranks, sweep, trace
from nsysmoe.results import (
    Comparison,
    CompatRun,
    KernelSummary,
    RanksAnalysis,
    RanksComparison,
    TraceAnalysis,
)
from nsysmoe.sweeps import Sweep


def document(result: object, options: ReportOptions | None = None) -> Document:
    """The report of ``result`` (a TraceAnalysis, Comparison, Acceptance, …) as blocks,
    showing as much as ``options`` says."""
    return _document(result, options or ReportOptions())


@singledispatch
def _document(result: object, options: ReportOptions) -> Document:
    raise TypeError(f"nsysmoe has no report for a {type(result).__name__}")


_document.register(TraceAnalysis, trace.document)
def _comparison(c: Comparison, options: ReportOptions) -> Document:
    """An A/B's report with its sides' names cut (:func:`side_labels`) and, when a name was cut,
    both in full once, at the end."""
    full = (c.off.name, c.on.name)
    shown = side_labels(*full)
    if shown == full:
        return comparison.document(c, options)
    c = replace(c, off=replace(c.off, name=shown[0]), on=replace(c.on, name=shown[1]))
    return comparison.document(c, options) + _in_full(shown, full)


def _runs_comparison(rc: RanksComparison, options: ReportOptions) -> Document:
    shown = side_labels(*rc.labels)
    if shown == rc.labels:
        return ranks.comparison_document(rc)
    return ranks.comparison_document(replace(rc, labels=shown)) + _in_full(shown, rc.labels)


def _in_full(shown: tuple[str, str], full: tuple[str, str]) -> Document:
    lines = tuple(f"{s}: {f}" for s, f in zip(shown, full, strict=True))
    return Document((Details("The sides' names in full", (Lines(lines, style="notes"),)),))


_document.register(Comparison, _comparison)
_document.register(RanksAnalysis, lambda r, options: ranks.document(r))
_document.register(RanksComparison, _runs_comparison)
_document.register(CompatRun, lambda r, options: compat.document(r))
_document.register(KernelSummary, kernels.document)
_document.register(Acceptance, lambda r, options: acceptance.document(r))
_document.register(AcceptedComparison,
                   lambda r, options: acceptance.bundle(r, _comparison(r.comparison, options)))
_document.register(Sweep, lambda r, options: sweep.document(r))
