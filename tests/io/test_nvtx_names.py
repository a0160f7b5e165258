"""NVTX range names: a registered string (textId) where StringIds has the id, else the inline
text, '' where neither. The reader writes the few registered strings over the text column
instead of coalescing two text columns; this holds it to the coalesce, row by row, on random
mixes of ids found, ids missing, null ids, and empty or null text."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.io.nsys_sqlite import _registered_over

ROWS = st.lists(
    st.tuples(st.none() | st.integers(0, 9), st.sampled_from(["", "a", "aten::mm, op_id = 7"])),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ROWS, st.sets(st.integers(0, 9)))
def test_names_equal_a_row_by_row_coalesce(
    rows: list[tuple[int | None, str]], known: set[int]
) -> None:
    strings = pl.DataFrame(
        {"id": sorted(known), "value": [f"registered {i}" for i in sorted(known)]},
        schema={"id": pl.Int64, "value": pl.String},
    )
    ids = pl.Series([i for i, _ in rows], dtype=pl.Int64)
    text = pl.Series([t for _, t in rows], dtype=pl.String)
    expected = [f"registered {i}" if i in known else t for i, t in rows]
    assert _registered_over(ids, text, strings).to_list() == expected


def test_a_text_column_of_several_chunks_is_written_over_in_place_of_its_rows() -> None:
    text = pl.concat([pl.Series(["x", "y"]), pl.Series(["z"])], rechunk=False)
    ids = pl.Series([None, 3, None], dtype=pl.Int64)
    strings = pl.DataFrame({"id": [3], "value": ["NCCL"]})
    assert _registered_over(ids, text, strings).to_list() == ["x", "NCCL", "z"]
