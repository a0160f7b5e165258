"""A/B of two multi-rank runs: files paired by sorted order (rank i off vs rank i on), each pair
compared on its own, then summed into one table."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import polars as pl

from nsysmoe.ab.metrics import MEDIAN_KEYS, with_pct_floor
from nsysmoe.ab.verdict import JUDGED, judge, noise_floor
from nsysmoe.measure.collectives import across_files, rank_label
from nsysmoe.measure.overlap import hidden_pct
from nsysmoe.results import (
    Collectives,
    Comparison,
    Failure,
    MetricRow,
    RanksComparison,
    RankValue,
    TraceAnalysis,
)

#: a pair's processes: the off file's and the on file's (:func:`_pid`)
Pids = tuple[int | None, int | None]


def _combine(key: str, unit: str, values: list[float | int | None]) -> float | int | None:
    """Over ranks: the median of the per-rank medians (:data:`MEDIAN_KEYS`), else the sum."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return statistics.median(vals) if key in MEDIAN_KEYS else sum(vals)


def summed_rows(pairs: tuple[Comparison, ...], pids: list[Pids]) -> tuple[MetricRow, ...]:
    """Per metric: durations and counts summed over ranks, medians of the per-rank medians,
    every hidden % (all communication, each channel) recomputed from the summed union and
    exposed times. A row some pairs lack (a channel, CUDA graphs) counts as absent there.
    ``per_rank``: pair i's own row as rank i (:func:`rank_values`; ``pids``: :func:`_pids`)."""
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
    return tuple(replace(r, per_rank=rank_values(pids, [rows_of.get(r.key) for rows_of in
                                                        by_pair])) for r in rows.values())


def _pid(a: TraceAnalysis) -> int | None:
    """The file's process, where it holds one (a file per rank), else None."""
    pids = a.gpus["pid"].unique()
    return int(pids[0]) if len(pids) == 1 else None


def _pids(pairs: tuple[Comparison, ...]) -> list[Pids]:
    """Each pair's processes, found once for every row that names them."""
    return [(_pid(p.off.analysis), _pid(p.on.analysis)) for p in pairs]


def rank_values(pids: list[Pids], per: list[MetricRow | None]) -> tuple[RankValue, ...]:
    """Rank i of a run is its i-th file by sorted name (pair i): its values of one row are the
    pair's own (None where the pair lacks the row), its pids the files' process where a file
    holds one (``pids``: :func:`_pids`)."""
    return tuple(
        RankValue(i, pid_off, pid_on, r.off if r else None, r.on if r else None)
        for i, ((pid_off, pid_on), r) in enumerate(zip(pids, per, strict=True))
    )


#: collective rows of an A/B of runs: (key, label, the rank total's field, better)
WAIT_ROWS = (
    ("collective_wait_ns", "collective wait for the last peer", "wait_ns", "lower"),
    ("collective_exposed_wait_ns", "collective wait, exposed", "exposed_wait_ns", "lower"),
    ("collective_transfer_ns", "collective transfer after the last arrival", "transfer_ns", None),
)


def _file_totals(c: Collectives, a: TraceAnalysis) -> dict[str, int] | None:
    """One file's ranks' totals over their channels (:attr:`Collectives.rank_totals`), summed
    over its GPUs, of each field of :data:`WAIT_ROWS`; None where none of them has a matched
    collective."""
    if c.rank_totals.is_empty():
        return None
    mine = set(a.gpus.select(rank_label(Path(a.path).name))["rank"])
    rows = c.rank_totals.filter(pl.col("rank").is_in(mine))
    return None if rows.is_empty() else {f: int(rows[f].sum()) for _, _, f, _ in WAIT_ROWS}


def wait_rows(pairs: tuple[Comparison, ...], pids: list[Pids], off: Collectives,
              on: Collectives) -> tuple[MetricRow, ...]:  # fmt: skip
    """Wait, exposed wait and transfer of the collectives matched across each run's ranks: each
    rank's total over its channels (overlapping channels counted once), summed over ranks, with
    every rank's own in ``per_rank``; none where neither run matched a collective. ``pids``:
    :func:`_pids`."""
    if off.rank_totals.is_empty() and on.rank_totals.is_empty():
        return ()
    files = [(_file_totals(off, p.off.analysis), _file_totals(on, p.on.analysis))
             for p in pairs]  # fmt: skip
    rows = []
    for key, label, field, better in WAIT_ROWS:
        per = tuple(RankValue(i, pid_off, pid_on, t_off and t_off[field], t_on and t_on[field])
                    for i, ((pid_off, pid_on), (t_off, t_on))
                    in enumerate(zip(pids, files, strict=True)))  # fmt: skip
        total = [None if c.rank_totals.is_empty() else int(c.rank_totals[field].sum())
                 for c in (off, on)]  # fmt: skip
        rows.append(MetricRow(key, label, "ns", *total, better,
                              "each rank's union over its channels, summed over ranks", per))
    return tuple(rows)


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
    off = across_files(tuple(p.off.analysis for p in pairs))
    on = across_files(tuple(p.on.analysis for p in pairs))
    pids = _pids(pairs)
    rows = summed_rows(pairs, pids) + wait_rows(pairs, pids, off, on)
    active = next((r.off for r in rows if r.key == "active_ns"), None)
    rows = with_pct_floor(rows, active)
    verdicts = []
    for key, (col, relative) in JUDGED.items():
        off_it = pl.concat([p.off.analysis.iterations[col] for p in pairs])
        on_it = pl.concat([p.on.analysis.iterations[col] for p in pairs])
        verdicts.append(judge(next(r for r in rows if r.key == key),
                              noise_floor(off_it, on_it, relative=relative)))  # fmt: skip
    named = {(p.off.name, p.on.name) for p in pairs}
    labels = named.pop() if len(named) == 1 else ("off", "on")
    return RanksComparison(pairs, failures, rows, tuple(verdicts), per_rank(pairs),
                         not notes, tuple(notes), off, on, labels)  # fmt: skip
