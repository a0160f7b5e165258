"""Rendering of the ``nsysmoe kernels`` audit table."""

from __future__ import annotations

import polars as pl

from nsysmoe.render import markdown, terminal
from nsysmoe.render.json import dumps
from nsysmoe.render.tables import Table, count, ms, shorten


def render_kernel_summary(table: pl.DataFrame, fmt: str, *, top: int, source: str) -> str:
    shown = table if top <= 0 else table.head(top)
    if fmt == "json":
        return dumps({"trace": source, "kernels": shown.to_dicts()})
    if fmt == "csv":
        return shown.write_csv()
    rows = tuple(
        (
            shorten(r["name"], 100),
            r["class"],
            r["subclass"],
            count(r["count"]),
            ms(r["sum_ns"]),
            f"{r['pct_of_kernel_time']:.2f}",
        )
        for r in shown.iter_rows(named=True)
    )
    title = f"Kernels of {source} by total time ({len(shown)} of {len(table)} names)"
    t = Table(
        title,
        ("kernel", "class", "subclass", "count", "sum ms", "% of kernel time"),
        rows,
        (False, False, False, True, True, True),
    )
    fmt_table = markdown.format_table if fmt == "markdown" else terminal.format_table
    return fmt_table(t) + "\n"
