"""Versioned JSON for CI (documented in docs/json.md): one envelope for
every result type, the body being the result's own ``to_dict()``."""

from __future__ import annotations

import json

from nsysmoe._version import __version__
from nsysmoe.acceptance import ACCEPTANCE_SCHEMA, Acceptance, AcceptedComparison
from nsysmoe.results import (
    Comparison,
    CompatRun,
    KernelSummary,
    RanksAnalysis,
    RanksComparison,
    TraceAnalysis,
)
from nsysmoe.sweeps import Sweep

#: result type → (schema name, schema version) of its document
SCHEMAS: dict[type, tuple[str, int]] = {
    TraceAnalysis: ("nsysmoe.analysis", 1),
    Comparison: ("nsysmoe.comparison", 1),
    RanksAnalysis: ("nsysmoe.run", 1),
    RanksComparison: ("nsysmoe.run_comparison", 1),
    CompatRun: ("nsysmoe.compat", 1),
    KernelSummary: ("nsysmoe.kernels", 1),
    Acceptance: ACCEPTANCE_SCHEMA,  # logs alone (``nsysmoe steps``): the acceptance block itself
    AcceptedComparison: ("nsysmoe.comparison", 1),  # the A/B with its ``acceptance`` block added
    Sweep: ("nsysmoe.sweep", 1),
}


def envelope(result: object) -> dict[str, object]:
    """``schema``, ``version``, ``nsysmoe_version``, then the body (one trace's analysis as
    ``traces: [...]``, so several traces' documents share a shape)."""
    schema, version = SCHEMAS[type(result)]
    body = {"traces": [result.to_dict()]} if isinstance(result, TraceAnalysis) else result.to_dict()
    return {"schema": schema, "version": version, "nsysmoe_version": __version__, **body}


def render_json(result: object) -> str:
    return dumps(envelope(result))


def dumps(doc: dict[str, object]) -> str:
    """Compact JSON (the C encoder; ``indent`` would force the pure-Python one, 10× slower on
    big documents); pipe through ``jq`` to read it."""
    return json.dumps(doc, separators=(",", ":")) + "\n"
