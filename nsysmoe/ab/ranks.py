"""A/B of two multi-rank runs: files paired by sorted order (rank i off vs rank i on), each pair
compared on its own, then summed into one table."""

from __future__ import annotations

import statistics
from pathlib import Path

import polars as pl

from nsysmoe.ab.verdict import JUDGED, judge, noise_floor
from nsysmoe.measure.collectives import across_files
from nsysmoe.measure.overlap import hidden_pct
from nsysmoe.results import Comparison, Failure, MetricRow, RanksComparison

#: rows whose cross-rank value is a median of per-rank values, not a sum
MEDIAN_KEYS = {"step_time_ns", "gemm_median_ns", "attention_median_ns"}


def _combine(key: str, unit: str, values: list[float | int | None]) -> float | int | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return statistics.median(vals) if key in MEDIAN_KEYS else sum(vals)


def summed_rows(pairs: tuple[Comparison, ...]) -> tuple[MetricRow, ...]:
    """Per metric: durations and counts summed over ranks, medians of the per-rank medians,
    every hidden % (all communication, each channel) recomputed from the summed union and
    exposed times. A row some pairs lack (a channel, CUDA graphs) counts as absent there."""
    templates: dict[str, MetricRow] = {}
    for p in pairs:
        for r in p.rows:
            if not r.key.startswith(("nvtx:", "nvtx_gpu:")):
                templates.setdefault(r.key, r)
    by_pair = [{r.key: r for r in p.rows} for p in pairs]
    rows = {}
    for key, t in templates.items():
        per = [rows_of[key] for rows_of in by_pair if key in rows_of]
        off = _combine(key, t.unit, [r.off for r in per])
        on = _combine(key, t.unit, [r.on for r in per])
        rows[key] = MetricRow(key, t.label, t.unit, off, on, t.better, t.note)

    def pct(c: float | None, e: float | None) -> float | None:
        return hidden_pct(c - e, c) if c and e is not None else None

    for key, t in templates.items():
        if t.unit == "pct" and key.endswith("hidden_pct"):
            prefix = key.removesuffix("hidden_pct")
            comm, exposed = rows.get(prefix + "comm_ns"), rows.get(prefix + "exposed_ns")
            if comm is not None and exposed is not None:
                note = "Σ hidden / Σ comm over ranks"
                rows[key] = MetricRow(key, t.label, "pct", pct(comm.off, exposed.off),
                                      pct(comm.on, exposed.on), t.better, note)  # fmt: skip
    return tuple(rows.values())


def per_rank(pairs: tuple[Comparison, ...]) -> pl.DataFrame:
    out = []
    for i, p in enumerate(pairs):
        out.append({
            "pair": i, "off": Path(p.off.analysis.path).name, "on": Path(p.on.analysis.path).name,
            "hidden_pct_off": p.row("hidden_pct").off, "hidden_pct_on": p.row("hidden_pct").on,
            "exposed_ns_off": p.row("exposed_ns").off, "exposed_ns_on": p.row("exposed_ns").on,
            "step_ns_off": p.row("step_time_ns").off, "step_ns_on": p.row("step_time_ns").on,
            "matched": p.contract.matched,
        })  # fmt: skip
    return pl.DataFrame(out)


def compare_runs(results: list[Comparison | Failure], n_off: int, n_on: int) -> RanksComparison:
    pairs = tuple(r for r in results if isinstance(r, Comparison))
    failures = tuple(r for r in results if isinstance(r, Failure))
    notes = []
    if n_off != n_on:
        notes.append(f"rank count differs: {n_off} files off, {n_on} on (paired the first "
                     f"{min(n_off, n_on)} by sorted name)")  # fmt: skip
    unmatched = [i for i, p in enumerate(pairs) if not p.contract.matched]
    if unmatched:
        first = pairs[unmatched[0]].contract.summary()
        notes.append(
            f"{len(unmatched)} of {len(pairs)} rank pairs break the measurement contract "
            f"(e.g. pair {unmatched[0]}: {first})"
        )
    if failures:
        notes.append(f"{len(failures)} pair(s) could not be analysed")
    if not pairs:
        return RanksComparison((), failures, (), (), pl.DataFrame(), False, tuple(notes))
    rows = summed_rows(pairs)
    verdicts = []
    for key, (col, relative) in JUDGED.items():
        off_it = pl.concat([p.off.analysis.iterations[col] for p in pairs])
        on_it = pl.concat([p.on.analysis.iterations[col] for p in pairs])
        verdicts.append(judge(next(r for r in rows if r.key == key),
                              noise_floor(off_it, on_it, relative=relative)))  # fmt: skip
    off = across_files(tuple(p.off.analysis for p in pairs))
    on = across_files(tuple(p.on.analysis for p in pairs))
    named = {(p.off.name, p.on.name) for p in pairs}
    labels = named.pop() if len(named) == 1 else ("off", "on")
    return RanksComparison(pairs, failures, rows, tuple(verdicts), per_rank(pairs),
                         not notes, tuple(notes), off, on, labels)  # fmt: skip
