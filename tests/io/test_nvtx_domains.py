"""NVTX domain names: each range gets the name its process gave its domain (eventType 75).

The reader looks the (process, domain id) pair up in the few domain-create rows instead of
joining every range; this checks it against a dictionary built from the written rows, on the
cases a lookup could get wrong: the same domain id named differently in two processes, a
domain created twice (the last name counts), a registered empty name (an empty string, not a
missing name), an inline empty name (missing), and a range whose domain was never created.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsysmoe.io import load_trace
from tests.fixtures.generate import write_export
from tests.fixtures.spec import (
    NVTX_DOMAIN_CREATE,
    NVTX_PUSHPOP,
    ExportSpec,
    GpuInfo,
    Kernel,
    NvtxEvent,
    Process,
)

A, B = 1001, 1002


def _events() -> list[NvtxEvent]:
    create = NVTX_DOMAIN_CREATE
    return [
        NvtxEvent(A, A, create, 1, None, "NCCL", domain_id=1),
        NvtxEvent(B, B, create, 2, None, "MyLib", domain_id=1),  # same id, other process
        NvtxEvent(A, A, create, 3, None, "Old", domain_id=2),
        NvtxEvent(A, A, create, 4, None, "New", domain_id=2),  # created again: the last counts
        NvtxEvent(A, A, create, 5, None, "", registered=True, domain_id=3),  # registered ''
        NvtxEvent(B, B, create, 6, None, "", domain_id=4),  # inline '': no name
        *(
            NvtxEvent(pid, pid, NVTX_PUSHPOP, 10 + 10 * i, 15 + 10 * i, f"r{pid}.{d}", domain_id=d)
            for i, (pid, d) in enumerate(
                (p, d) for p in (A, B) for d in (0, 1, 2, 3, 4, 5)
            )
        ),
    ]


def _expected(events: list[NvtxEvent]) -> dict[str, str | None]:
    """Range name -> domain name, by brute force over the rows in time order."""
    names: dict[tuple[int, int], str | None] = {}
    for e in sorted(events, key=lambda e: e.start):
        if e.event_type == NVTX_DOMAIN_CREATE:
            names[(e.pid, e.domain_id)] = e.text if (e.text or e.registered) else None
    return {
        e.text: names.get((e.pid, e.domain_id))
        for e in events
        if e.event_type != NVTX_DOMAIN_CREATE
    }


@pytest.mark.parametrize("ddl", ["2.9.1", "3.13.2"])
def test_each_range_gets_its_process_domain_name(tmp_path: Path, ddl: str) -> None:
    events = _events()
    spec = ExportSpec(
        "domains",
        processes=[Process(A, "python3", ((A, "python3"),), (0,)),
                   Process(B, "python3", ((B, "python3"),), (0,))],  # fmt: skip
        gpus=[GpuInfo(0)],
        kernels=[Kernel(A, 0, 7, 10, 20, "k", "k", None, None, None, None)],
        nvtx=events,
    )
    trace = load_trace(write_export(tmp_path / "domains.sqlite", spec, ddl, shuffle=True, seed=5))
    got = dict(trace.nvtx.select("name", "domain").iter_rows())
    assert got == _expected(events)
    assert got["r1001.3"] == "" and got["r1002.4"] is None  # the two empty names differ
