"""Kernel-name tables: time per name and class, for auditing the rules and the A/B's changes."""

from __future__ import annotations

import polars as pl

from nsysmoe.classify import CLASSES, UNCLASSIFIED
from nsysmoe.errors import NsysmoeError
from nsysmoe.model import Frame

TOP_UNCLASSIFIED = 10
#: the rows :func:`busiest_unclassified` reads: those no rule named
NO_RULE = pl.col("subclass") == UNCLASSIFIED[1]
_DUR = pl.col("end") - pl.col("start")


def busiest_unclassified(kernels: pl.DataFrame, top: int = TOP_UNCLASSIFIED) -> pl.DataFrame:
    """Names no rule recognised, by total time, so a user can audit and extend the rules."""
    return (
        kernels.filter(NO_RULE)
        .group_by("name")
        .agg(pl.len().cast(pl.Int64).alias("count"), _DUR.sum().alias("sum_ns"))
        .sort(["sum_ns", "name"], descending=[True, False])
        .head(top)
    )


def kernel_table(kernels: pl.DataFrame, klass: str | None = None) -> pl.DataFrame:
    """Classified kernel names by total time (name, class, subclass, count, sum_ns, mean_ns,
    pct_of_kernel_time), optionally of one class."""
    if klass and klass not in CLASSES:
        raise NsysmoeError(f"--class {klass!r}: unknown class; one of {', '.join(CLASSES)}")
    total = int((kernels["end"] - kernels["start"]).sum()) or 1
    table = (
        kernels.group_by("name", "class", "subclass")
        .agg(pl.len().cast(pl.Int64).alias("count"), _DUR.sum().alias("sum_ns"))
        .with_columns(
            (pl.col("sum_ns") // pl.col("count")).alias("mean_ns"),
            (100.0 * pl.col("sum_ns") / total).alias("pct_of_kernel_time"),
        )
        .sort(["sum_ns", "name"], descending=[True, False])
    )
    return table.filter(pl.col("class") == klass) if klass else table


def names_in_window(kernels: Frame) -> Frame:
    """name, class, count, sum_ns of (windowed) kernels, sorted by name: the A/B's kernel facts."""
    return (
        kernels.group_by("name", "class")
        .agg(pl.len().cast(pl.Int64).alias("count"), _DUR.sum().alias("sum_ns"))
        .sort("name")
    )


def compute_kernel_stats(kernels: Frame) -> Frame:
    """class, count, sum_ns, median_ns of GEMM and attention kernels (compute inflation)."""
    return (
        kernels.filter(pl.col("class").is_in(("gemm", "attention")))
        .group_by("class")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            _DUR.sum().alias("sum_ns"),
            _DUR.median().alias("median_ns"),
        )
    )
