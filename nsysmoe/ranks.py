"""Many ranks: a per-rank table, the spread across ranks, and the straggler.

A rank is one GPU of one process (one file per rank, or several processes in one export).
Collectives spin while they wait for the slowest peer, so the straggler shows up twice: as the
rank with the longest step, and as the rank with the *least* communication time — the others
sit in their comm kernels waiting for it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from nsysmoe.measure.channels import CHANNEL_SCHEMA, channel_totals
from nsysmoe.measure.collectives import across_files
from nsysmoe.measure.graphs import combined
from nsysmoe.results import (
    Collectives,
    Failure,
    MissingIterations,
    RanksAnalysis,
    StepStraggler,
    Stragglers,
    TraceAnalysis,
    WaitStraggler,
)

SPREAD_METRICS = ("step_ns", "hidden_pct", "exposed_ns", "comm_ns", "idle_ns", "active_ns")


def rank_table(analyses: tuple[TraceAnalysis, ...]) -> pl.DataFrame:
    """One row per GPU of every file: its metrics, and its file's iteration count and median step
    exactly as the file's own analysis finds them (a lone iteration's GPU span included)."""
    frames = []
    for a in analyses:
        frames.append(
            a.gpus.with_columns(
                pl.lit(a.path).alias("file"),
                pl.format("{}:{}:{}", pl.lit(Path(a.path).name), "pid", "device").alias("rank"),
                pl.lit(len(a.iterations), pl.Int64).alias("iterations"),
                pl.lit(a.median_step_ns, pl.Int64).alias("step_ns"),
            )
        )
    table = pl.concat(frames, how="diagonal_relaxed")
    return table.select("rank", "file", pl.exclude("rank", "file"))


def missing_iterations(analyses: tuple[TraceAnalysis, ...],
                       ranks: pl.DataFrame) -> tuple[MissingIterations, ...]:  # fmt: skip
    """The ranks whose file lacks iterations another file has (one entry per missing set, in
    rank order): their step and per-iteration figures cover fewer iterations than the others'."""
    steps = [set(a.iterations["step"].to_list()) for a in analyses]
    every = set().union(*steps)
    groups: dict[tuple[int, ...], list[str]] = {}
    for a, have in zip(analyses, steps, strict=True):
        if missing := tuple(sorted(every - have)):
            labels = ranks.filter(pl.col("file") == a.path)["rank"].to_list()
            groups.setdefault(missing, []).extend(labels)
    return tuple(MissingIterations(tuple(labels), missing, len(every) - len(missing), len(every))
                 for missing, labels in groups.items())  # fmt: skip


def spread(ranks: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for metric in SPREAD_METRICS:
        col = ranks.select("rank", metric).drop_nulls(metric)
        if col.is_empty():
            continue
        lo, hi = col.sort(metric).row(0), col.sort(metric).row(-1)
        rows.append({"metric": metric, "median": float(col[metric].median()),
                     "min": float(lo[1]), "min_rank": lo[0], "max": float(hi[1]),
                     "max_rank": hi[0]})  # fmt: skip
    schema = {"metric": pl.String, "median": pl.Float64, "min": pl.Float64, "min_rank": pl.String,
              "max": pl.Float64, "max_rank": pl.String}  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row")


def stragglers(spread_table: pl.DataFrame) -> Stragglers:
    """The longest-step rank and the least-communication rank, where the ranks differ."""
    rows = {r["metric"]: r for r in spread_table.iter_rows(named=True)}
    step = wait = None
    if "step_ns" in rows and rows["step_ns"]["max"] > rows["step_ns"]["min"]:
        r = rows["step_ns"]
        step = StepStraggler(r["max_rank"], r["max"], 100.0 * (r["max"] / r["median"] - 1))
    if "comm_ns" in rows and rows["comm_ns"]["max"] > rows["comm_ns"]["min"]:
        r = rows["comm_ns"]
        wait = WaitStraggler(r["min_rank"], r["min"], r["max"] - r["min"])
    return Stragglers(step, wait)


def run_analysis(results: list[TraceAnalysis | Failure], align: bool = False) -> RanksAnalysis:
    """The per-rank table, spread and stragglers of one run's analyses; failures listed."""
    analyses = tuple(r for r in results if isinstance(r, TraceAnalysis))
    failures = tuple(r for r in results if isinstance(r, Failure))
    if not analyses:
        return RanksAnalysis((), failures, pl.DataFrame(), pl.DataFrame(), Stragglers(),
                             combined(()), channel_totals(pl.DataFrame()),
                             Collectives.none())  # fmt: skip
    ranks = rank_table(analyses)
    table = spread(ranks)
    graphs = combined([a.graphs for a in analyses])
    channels = channel_totals(pl.concat([a.channels.select(list(CHANNEL_SCHEMA))
                                         for a in analyses]))  # fmt: skip
    return RanksAnalysis(analyses, failures, ranks, table, stragglers(table), graphs, channels,
                         across_files(analyses, align),
                         missing_iterations(analyses, ranks))  # fmt: skip
