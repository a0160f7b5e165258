"""CSV, for tables a spreadsheet reads: the kernel audit table.

A text cell that begins with ``=``, ``+``, ``-``, ``@`` or a tab is a formula to a spreadsheet
(CSV injection): such cells get a leading ``'``, the usual neutraliser, here and nowhere else.
Other control characters in a cell are first shown as escapes, as in every other format
(:func:`nsysmoe.text.escape_char`; a leading carriage return is then the text ``\\x0d``): the
CSV may be printed to a terminal.
"""

from __future__ import annotations

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.results import KernelSummary
from nsysmoe.text import CONTROL, escape_char


def _visible(cell: str) -> str:
    """Controls shown as escapes; a tab or a newline stays (the CSV quotes a cell with one)."""
    return CONTROL.sub(lambda m: m.group() if m.group() in "\t\n" else escape_char(m.group()),
                       cell)  # fmt: skip


def render_csv(result: object) -> str:
    if not isinstance(result, KernelSummary):
        raise NsysmoeError("--format csv is for `nsysmoe kernels`; use json for analyses")
    shown = result.shown
    text = [c for c, t in shown.schema.items() if t == pl.String]
    formula = pl.col(text).str.contains(r"^[=+\-@\t]")  # of the cells as shown
    shown = shown.with_columns(pl.col(text).map_elements(_visible, return_dtype=pl.String,
                                                         skip_nulls=True))  # fmt: skip
    return shown.with_columns(
        pl.when(formula).then(pl.lit("'") + pl.col(text)).otherwise(pl.col(text)).name.keep()
    ).write_csv()
