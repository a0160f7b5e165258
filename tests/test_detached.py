"""An analysis detached from its classified trace (``detached=True``, or one sent back from a
worker) says so, in one sentence, wherever something is measured from that trace later
(:attr:`nsysmoe.results.TraceAnalysis.classified`)."""

from __future__ import annotations

import re

import pytest

from nsysmoe.ab.side import measure_side
from nsysmoe.api import analyze, example_paths
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.lanes import timeline
from nsysmoe.pipeline import analyze_process


def test_a_detached_analysis_says_so_wherever_its_trace_is_needed() -> None:
    path = example_paths()[0]
    attached = analyze(path)
    assert attached.classified is attached.source
    a = analyze(path, detached=True)
    said = f"^{re.escape(a.path)}: analysis was detached from its trace; re-analyse it$"
    pid = int(a.gpus["pid"][0])
    for use in (lambda: a.classified, lambda: measure_side("off", a), lambda: timeline(a),
                lambda: analyze_process(a, pid, steps=None)):  # fmt: skip
        with pytest.raises(NsysmoeError, match=said):
            use()
