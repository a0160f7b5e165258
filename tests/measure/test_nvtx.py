"""NVTX helpers (nsysmoe.measure.nvtx) against their plain one-expression forms."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.ab.side import MOE_PHASE_PATTERN
from nsysmoe.measure.nvtx import display_name, named_like
from nsysmoe.model import NVTX_SCHEMA

names = st.sampled_from([None, "", "AllReduce", "ncclAllReduce", "moe_dispatch forward",
                         "dispatch_core in hybrid-ep", "aten::mm", "step 3"])  # fmt: skip
domains = st.sampled_from([None, None, "NCCL", "HybridEP", "x"])


@given(st.lists(st.tuples(names, domains), max_size=30))
@settings(max_examples=150, deadline=None)
def test_named_like_is_the_filter_on_both_names(rows: list[tuple]) -> None:
    """A range matches by its bare name or by ``Domain:name`` (``NCCL:AllReduce`` matches
    where ``AllReduce`` alone does not); rows keep their order, a null name matches nothing."""
    nvtx = pl.DataFrame(
        [(1, 2, i, i + 1, n, d, "pushpop", False) for i, (n, d) in enumerate(rows)],
        schema=NVTX_SCHEMA, orient="row",
    )  # fmt: skip
    p = MOE_PHASE_PATTERN
    want = nvtx.filter(pl.col("name").str.contains(p) | display_name().str.contains(p))
    assert named_like(nvtx, p).equals(want)
