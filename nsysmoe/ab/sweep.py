"""N settings of one knob compared (``nsysmoe sweep``): per setting the step time, exposed
communication per channel, hidden %, SMs held, compute inflation; the step times as one ladder
(:func:`nsysmoe.measure.acceptance.accept`, the model of the training logs' acceptance: each
setting against the one before and against the base, bootstrap CI, run-to-run floor); the best
setting marked; and each setting's contract against the base, where only the knob may differ.

A setting is one export, or a run of many rank files (a folder). A run's figures are its ranks'
together, as one export of all their processes would give them: an iteration's step is the
median of every process's own period, over the iterations all of them hold; durations are
summed over ranks and divided by their iterations × GPUs; the SMs a channel held are the most on
any rank. Its contract is its rank files against the base's, paired by sorted name as in
``nsysmoe analyze OFF_DIR ON_DIR``, every pair checked, and its files against each other: one
setting is one value of the knob and of the dispatcher's blocks.

It takes side facts (each analysis on its own steady window: settings differ, and so may their
warm-ups) and reads nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from nsysmoe.ab.contract import both_settings, check_contract, variables_of
from nsysmoe.ab.side import Side, measure_side
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.io.logs import TrainingLog
from nsysmoe.io.logs.schema import to_schema
from nsysmoe.measure.acceptance import accept
from nsysmoe.measure.overlap import hidden_pct
from nsysmoe.results import Check, Contract, TraceAnalysis, Variable
from nsysmoe.sweeps import SETTING_SCHEMA, Sweep

#: the fewest settings a sweep takes (two are an A/B: ``nsysmoe analyze OFF ON``)
MIN_SETTINGS = 3

#: one setting's sides: an export's one, or a run's rank files' in sorted order
Run = Sequence[Side]


def check_settings(n: int, labels: tuple[str, ...] | None) -> None:
    """A usage error unless ``n`` settings (and as many labels, if given) make a sweep: said
    before any trace is read."""
    if n < MIN_SETTINGS:
        raise UsageError(f"a sweep takes {MIN_SETTINGS} settings or more, not {n}: compare two "
                         "with `nsysmoe analyze OFF ON`")  # fmt: skip
    if labels is not None and len(labels) != n:
        raise UsageError(f"--labels: {len(labels)} names for {n} settings; give one per "
                         "setting")  # fmt: skip


def detached_side(analysis: TraceAnalysis) -> Side:
    """The side facts of an analysis that carries its classified trace, then the analysis
    without it: a sweep holds N settings, not N traces in memory."""
    side = measure_side("setting", analysis)
    return replace(side, analysis=replace(analysis, source=None), projected=pl.DataFrame())


def sweep(runs: Sequence[Run], knob: str, labels: tuple[str, ...] | None = None,
          sources: Sequence[str | None] | None = None) -> Sweep:  # fmt: skip
    """The sweep of ``runs`` (each setting's sides, :func:`detached_side`; the first setting
    the base), ``knob`` the one setting that varies (a ``--vary`` name), ``labels`` the
    settings' names (default: the knob's value in each); ``sources``: what each setting was
    given as (an export, a folder, a glob; None, or by default: the export, or the folder its
    files share)."""
    check_settings(len(runs), labels)
    if not all(runs):
        raise ValueError("runs: every setting needs one side or more")
    given = sources if sources is not None else [None] * len(runs)
    paths = [_path(run) if p is None else p for run, p in zip(runs, given, strict=True)]
    base = runs[0]
    contracts, variables = [], []
    for run in runs[1:]:
        contract, variable = _run_contract(base, run, knob)
        contracts.append(contract)
        variables.append(variable)
    names = labels or _labels(knob, variables, runs, paths)
    steps = [_steps(run) for run in runs]
    settings = _settings(runs, steps, names, paths)
    best = settings["median_step_ns"].arg_min()
    settings = settings.with_columns(
        (pl.int_range(pl.len()) == best).alias("best") if best is not None
        else pl.lit(False).alias("best"))  # fmt: skip
    ladder = accept([_steps_log(p, s) for p, s in zip(paths, steps, strict=True)], list(names),
                    window=_common(steps))  # fmt: skip
    return Sweep(knob, tuple(tuple(s.analysis for s in run) for run in runs),
                 settings.select(list(SETTING_SCHEMA)).cast(SETTING_SCHEMA),
                 tuple(_sms_held(run) for run in runs), tuple(_exposed(run) for run in runs),
                 ladder, tuple(contracts), best)  # fmt: skip


def _run_contract(base: Run, run: Run, knob: str) -> tuple[Contract, Variable]:
    """A setting's contract against the base's: rank file i against the base's i-th (sorted
    by name), every pair checked; the first pair that breaks it stands for the setting (its
    note names the pair), else the first pair. A different number of rank files breaks it, and
    so does a run whose rank files disagree on the knob or on the dispatcher's blocks."""
    pairs = []
    for i, (b, side) in enumerate(zip(base, run, strict=False)):
        sets = both_settings(b, side)
        declared, note = variables_of(b, side, (knob,), sets)
        pairs.append((i, check_contract(b, side, declared, note, sets), declared[0]))
    i, contract, variable = next(((i, c, v) for i, c, v in pairs if not c.matched), pairs[0])
    if len(base) == len(run) == 1:
        return contract, variable
    pair = f"rank pair {i}: {_name(base[i])} vs {_name(run[i])}"
    checks = tuple(c if c.ok else replace(c, detail=f"{c.detail or c.off + ' vs ' + c.on}; {pair}")
                   for c in contract.checks)  # fmt: skip
    files = Check("rank files", str(len(base)), str(len(run)),
                  "same" if len(base) == len(run) else "unexpected",
                  "" if len(base) == len(run) else
                  f"paired the first {min(len(base), len(run))} by sorted name",
                  len(base), len(run))  # fmt: skip
    knob_values = ({v.off for _, _, v in pairs}, {v.on for _, _, v in pairs})
    within = (_within(f"{knob} across rank files", *knob_values),
              _within("dispatcher blocks across rank files", _blocks(base), _blocks(run)))
    where = (f"rank files paired by sorted name, {sum(c.matched for _, c, _ in pairs)} of "
             f"{len(pairs)} pairs matched; shown: {pair}")  # fmt: skip
    note = f"{contract.note}; {where}" if contract.note else where
    return replace(contract, checks=(files, *within, *checks), note=note), variable


def _within(name: str, base: set[object], run: set[object]) -> Check:
    """Whether each side's rank files agree on one value (unknowns aside): one setting is one
    value of everything, the knob included."""
    def said(values: set[object]) -> str:
        known = sorted(str(v) for v in values if v is not None)
        return " / ".join(known) or "–"

    split = [v for v in (base, run) if len(v - {None}) > 1]
    return Check(name, said(base), said(run), "unexpected" if split else "same",
                 "a setting's rank files differ in it: they are not one setting" if split
                 else "")  # fmt: skip


def _blocks(run: Run) -> set[object]:
    """The most common block counts of the dispatcher's kernels over a run's rank files."""
    out: set[object] = set()
    for s in run:
        df = s.analysis.sm.channels
        if df.width:
            out |= set(df.filter(pl.col("channel").is_in(["ep.dispatch", "ep.combine"]))
                       ["blocks"].to_list())  # fmt: skip
    return out


def _name(side: Side) -> str:
    return os.path.basename(side.analysis.path)


def _path(run: Run) -> str:
    """An export's path, or the folder its rank files share."""
    paths = [s.analysis.path for s in run]
    if len(paths) == 1:
        return paths[0]
    try:
        return os.path.commonpath(paths) or os.curdir
    except ValueError:  # relative and absolute paths mixed
        return paths[0]


def _labels(knob: str, variables: list[Variable], runs: Sequence[Run],
            paths: list[str]) -> tuple[str, ...]:  # fmt: skip
    """"knob=value" from the launch where every setting records the knob; else the blocks of
    the dispatcher's kernels for an SM knob; else the file or folder names."""
    values = [variables[0].off, *(v.on for v in variables)]
    if all(v is not None for v in values) and len(set(values)) == len(values):
        return tuple(f"{knob}={v}" for v in values)
    blocks = [_sms_held(run).get("ep.dispatch") for run in runs]
    if "num_sms" in knob and all(b is not None for b in blocks) and len(set(blocks)) == len(blocks):
        return tuple(f"{b} SMs" for b in blocks)
    return distinct_names(paths)


def distinct_names(paths: list[str]) -> tuple[str, ...]:
    """Each path's shortest tail (file name, then parent/name, …) that no other path shares."""
    parts = [p.rstrip("/").split("/") for p in paths]
    for n in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-n:]) for p in parts]
        if len(set(names)) == len(names):
            return tuple(names)
    return tuple(f"{i + 1}: {p}" for i, p in enumerate(paths))  # the same path given twice


def _steps(run: Run) -> pl.DataFrame:
    """The setting's iterations (``step``, ``step_ns``): an export's own (its GPU period, the
    median over its processes); a run's the same over every process of its rank files — the
    median of their own periods, over the iterations every one of them holds — so a run split
    into a file per rank gives the step the one export of all its processes gives."""
    for s in run:
        if s.analysis.iterations.is_empty():
            raise NsysmoeError(
                f"{s.analysis.path}: no iterations in its window, so no step time to compare; "
                "a sweep compares each setting's steps: name its iteration ranges with "
                "--step-range REGEX, or record them as NVTX ranges")  # fmt: skip
    if len(run) == 1:
        return run[0].analysis.iterations.select("step", "step_ns")
    per = pl.concat([_process_steps(s.analysis).with_columns(pl.lit(i).alias("file"))
                     for i, s in enumerate(run)])  # fmt: skip
    ranks = per.select(pl.struct("file", "pid").n_unique()).item()
    steps = (per.group_by("step")
             .agg(pl.col("step_ns").median().cast(pl.Int64),
                  pl.struct("file", "pid").n_unique().alias("ranks"))
             .filter(pl.col("ranks") == ranks).sort("step").drop("ranks"))  # fmt: skip
    if steps.is_empty():
        raise NsysmoeError(f"{_path(run)}: its {len(run)} rank files share no iteration in "
                           "their steady windows, so the run has no step time; are they one "
                           "run's (iterations numbered alike)? Else pick one window with "
                           "--window")  # fmt: skip
    return steps


def _process_steps(a: TraceAnalysis) -> pl.DataFrame:
    """Each process's own period of each iteration (``pid``, ``step``, ``step_ns``); a file
    without them, its iterations as one process's."""
    pi = a.process_iterations
    if pi.is_empty():
        return a.iterations.select(pl.lit(None, pl.Int64).alias("pid"), "step", "step_ns")
    return pi.select("pid", "step", (pl.col("end_ns") - pl.col("start_ns")).alias("step_ns"))


def _gpu_steps(run: Run) -> int:
    """Iterations × GPUs over the run's files: what its durations are divided by."""
    return sum(len(s.analysis.iterations) * len(s.analysis.gpus) for s in run)


def _per_step_gpu(ns: float | None, n: int) -> float | None:
    return None if ns is None or not n else ns / n


def _settings(runs: Sequence[Run], steps: list[pl.DataFrame], labels: tuple[str, ...],
              paths: list[str]) -> pl.DataFrame:  # fmt: skip
    rows = []
    for run, it, label, path in zip(runs, steps, labels, paths, strict=True):
        n = _gpu_steps(run)
        totals = [s.analysis.totals for s in run]
        step = int(it["step_ns"].median())  # type: ignore[arg-type]
        exposed = _per_step_gpu(sum(t.exposed_ns for t in totals), n)
        idle = _per_step_gpu(sum(t.idle_ns for t in totals), n)
        compute = None if exposed is None or idle is None else step - exposed - idle
        gpus = [s.analysis.sm.gpus["comm_sms_avg"] for s in run if s.analysis.sm.gpus.width]
        held = pl.concat(gpus).drop_nulls() if gpus else pl.Series([], dtype=pl.Float64)
        extras = [s.analysis.sm.gemm_attn_extra_ns for s in run]  # unknown on one: unknown
        extra = None if None in extras else _per_step_gpu(sum(extras), n)  # type: ignore[arg-type]
        rows.append({"label": label, "path": path, "files": len(run),
                     "iterations": len(it), "gpus": sum(len(s.analysis.gpus) for s in run),
                     "median_step_ns": step, "compute_ns": compute, "exposed_ns": exposed,
                     "idle_ns": idle,
                     "hidden_pct": hidden_pct(sum(t.hidden_ns for t in totals),
                                              sum(t.comm_ns for t in totals)),
                     "comm_sms_avg": float(held.mean()) if held.len() else None,  # type: ignore[arg-type]
                     "inflation_extra_ns": extra})  # fmt: skip
    return pl.DataFrame(rows, schema={k: v for k, v in SETTING_SCHEMA.items() if k != "best"})


def _sms_held(run: Run) -> dict[str, int | None]:
    """Per channel, the most SMs it held on any GPU of the run (None where unknown on all)."""
    frames = [s.analysis.sm.channels.select("channel", "sms_held") for s in run
              if s.analysis.sm.channels.width]  # fmt: skip
    if not frames:
        return {}
    held = pl.concat(frames).group_by("channel", maintain_order=True).agg(pl.col("sms_held").max())
    return {r["channel"]: r["sms_held"] for r in held.iter_rows(named=True)}


def _exposed(run: Run) -> dict[str, float]:
    """Per channel, its exposed time per iteration per GPU over the run."""
    totals: dict[str, int] = {}
    for s in run:
        for r in s.analysis.channel_totals.iter_rows(named=True):
            totals[r["channel"]] = totals.get(r["channel"], 0) + (r["exposed_ns"] or 0)
    n = _gpu_steps(run)
    return {ch: _per_step_gpu(ns, n) or 0.0 for ch, ns in totals.items()}


def _steps_log(path: str, steps: pl.DataFrame) -> TrainingLog:
    """A setting's steady iterations as the samples of a log (one iteration each, its GPU step
    time), so the ladder of the logs' acceptance measures them."""
    table = to_schema(steps.select(pl.col("step").alias("iteration"),
                                   pl.lit(1).alias("iterations"),
                                   (pl.col("step_ns") / 1e9).alias("step_s")))  # fmt: skip
    return TrainingLog(path, "profile", table, None, (), 1, "mean", None, {}, ())


def _common(steps: list[pl.DataFrame]) -> tuple[int, int]:
    """A window holding every setting's iterations (each is already its own steady window)."""
    every = pl.concat([s["step"] for s in steps])
    return int(every.min()), int(every.max())  # type: ignore[arg-type]
