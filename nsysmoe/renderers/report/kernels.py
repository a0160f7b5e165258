"""The ``nsysmoe kernels`` audit table."""

from __future__ import annotations

from nsysmoe.renderers.cells import count, ms, shorten
from nsysmoe.renderers.document import Document, Table
from nsysmoe.results import KernelSummary


def document(k: KernelSummary) -> Document:
    shown = k.shown
    rows = tuple(
        (shorten(r["name"], 100), r["class"], r["subclass"], count(r["count"]), ms(r["sum_ns"]),
         f"{r['pct_of_kernel_time']:.2f}")
        for r in shown.iter_rows(named=True)
    )  # fmt: skip
    title = f"Kernels of {k.source} by total time ({len(shown)} of {len(k.table)} names)"
    header = ("kernel", "class", "subclass", "count", "sum ms", "% of kernel time")
    return Document((Table(title, header, rows, (False, False, False, True, True, True)),))
