"""``drop_invalid``: the rows it keeps and the reasons it counts, against a row-by-row reading of
the cleaning policy; ``among`` is the same as filtering first."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from nsysmoe.io.clean import BEFORE, MISSING, NO_DEVICE, NO_PROCESS, drop_invalid

values = st.one_of(st.none(), st.integers(-3, 3))
rows = st.lists(st.tuples(values, values, values, values, st.one_of(st.none(), st.booleans())),
                max_size=30)  # fmt: skip


def frame(data: list[tuple]) -> pl.DataFrame:
    names = ["start", "end", "device", "pid", "keep"]
    schema = {n: pl.Int64 for n in names[:4]} | {"keep": pl.Boolean}
    return pl.DataFrame(data, schema=schema, orient="row").with_row_index("row")


def reason(start, end, device, pid, gpu: bool) -> str | None:
    if start is None or end is None:
        return MISSING
    if gpu and (device is None or pid is None):
        return NO_DEVICE
    if not gpu and pid is None:  # a CPU row of no process
        return NO_PROCESS
    if end < start:
        return "with end < start"
    return BEFORE if start < 0 else None


@given(rows, st.booleans())
def test_drop_invalid_follows_the_policy_row_by_row(data: list[tuple], gpu: bool) -> None:
    df = frame(data)
    dropped: dict[str, int] = {}
    kept = drop_invalid(df, "x", dropped, gpu=gpu)
    why = [reason(*r[:4], gpu) for r in data]
    assert kept["row"].to_list() == [i for i, w in enumerate(why) if w is None]
    for key, n in dropped.items():
        assert n == sum(1 for w in why if w is not None and key == f"x rows {w}")
    assert sum(dropped.values()) == sum(w is not None for w in why)


@given(rows, st.booleans())
def test_among_is_filtering_first(data: list[tuple], gpu: bool) -> None:
    """Rows ``among`` does not mark (false or null) are left out uncounted, in one pass."""
    df = frame(data)
    first: dict[str, int] = {}
    expected = drop_invalid(df.filter(pl.col("keep")), "x", first, gpu=gpu)
    among: dict[str, int] = {}
    got = drop_invalid(df, "x", among, gpu=gpu, among=pl.col("keep"))
    assert got.equals(expected) and among == first
