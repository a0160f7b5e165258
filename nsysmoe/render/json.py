"""Versioned JSON for CI (documented in the README, section "JSON output")."""

from __future__ import annotations

import json

from nsysmoe import __version__
from nsysmoe.result import JSON_SCHEMA, JSON_VERSION, TraceAnalysis


def to_document(analyses: list[TraceAnalysis]) -> dict[str, object]:
    return {
        "schema": JSON_SCHEMA,
        "version": JSON_VERSION,
        "nsysmoe_version": __version__,
        "traces": [a.to_dict() for a in analyses],
    }


def render_json(analyses: list[TraceAnalysis]) -> str:
    return dumps(to_document(analyses))


def dumps(doc: dict[str, object]) -> str:
    """Compact JSON (the C encoder; ``indent`` would force the pure-Python one, 10× slower on
    big documents); pipe through ``jq`` to read it."""
    return json.dumps(doc, separators=(",", ":")) + "\n"
