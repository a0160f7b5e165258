"""The ``nsysmoe kernels`` audit table."""

from __future__ import annotations

from nsysmoe.renderers.cells import count, ms
from nsysmoe.renderers.document import Document, ReportOptions, Table
from nsysmoe.results import KernelSummary


def document(k: KernelSummary, options: ReportOptions = ReportOptions()) -> Document:  # noqa: B008
    shown = k.shown
    names = options.names(shown["name"].to_list(), 100)
    rows = tuple(
        (name, r["class"], r["subclass"], count(r["count"]), ms(r["sum_ns"]),
         f"{r['pct_of_kernel_time']:.2f}")
        for name, r in zip(names, shown.iter_rows(named=True), strict=True)
    )  # fmt: skip
    title = f"Kernels of {k.source} by total time ({len(shown)} of {len(k.table)} names)"
    header = ("kernel", "class", "subclass", "count", "sum ms", "% of kernel time")
    return Document((Table(title, header, rows, (False, False, False, True, True, True)),))
