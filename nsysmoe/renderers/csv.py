"""CSV, for tables a spreadsheet reads: the kernel audit table.

A text cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula
to a spreadsheet (CSV injection): such cells get a leading ``'``, the usual neutraliser, here and
nowhere else.
"""

from __future__ import annotations

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.results import KernelSummary


def render_csv(result: object) -> str:
    if not isinstance(result, KernelSummary):
        raise NsysmoeError("--format csv is for `nsysmoe kernels`; use json for analyses")
    shown = result.shown
    text = [c for c, t in shown.schema.items() if t == pl.String]
    formula = pl.col(text).str.contains(r"^[=+\-@\t\r]")
    return shown.with_columns(
        pl.when(formula).then(pl.lit("'") + pl.col(text)).otherwise(pl.col(text)).name.keep()
    ).write_csv()
