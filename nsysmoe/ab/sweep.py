"""N settings of one knob compared (``nsysmoe sweep``): per setting the step time, exposed
communication per channel, hidden %, SMs held, compute inflation; the step times as one ladder
(:func:`nsysmoe.measure.acceptance.accept`, the model of the training logs' acceptance: each
setting against the one before and against the base, bootstrap CI, run-to-run floor); the best
setting marked; and each setting's contract against the base, where only the knob may differ.

It takes analyses (each on its own steady window: settings differ, and so may their warm-ups),
each carrying its classified trace, and reads nothing else.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import polars as pl

from nsysmoe.ab.contract import both_settings, check_contract, variables_of
from nsysmoe.ab.side import Side, measure_side
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.io.logs import TrainingLog
from nsysmoe.io.logs.schema import to_schema
from nsysmoe.measure.acceptance import accept
from nsysmoe.results import TraceAnalysis, Variable
from nsysmoe.sweeps import SETTING_SCHEMA, Sweep

#: the fewest settings a sweep takes (two are an A/B: ``nsysmoe analyze OFF ON``)
MIN_SETTINGS = 3


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


def sweep(analyses: list[TraceAnalysis], knob: str, labels: tuple[str, ...] | None = None,
          sides: list[Side] | None = None) -> Sweep:  # fmt: skip
    """The sweep of ``analyses`` (the first the base), ``knob`` the one setting that varies (a
    ``--vary`` name), ``labels`` the settings' names (default: the knob's value in each);
    ``sides``: their :func:`detached_side`, where the caller took them already (then
    ``analyses`` may be detached)."""
    check_settings(len(analyses), labels)
    if sides is None:
        with ThreadPoolExecutor(max_workers=2) as pool:  # polars releases the GIL
            sides = list(pool.map(measure_side, ["setting"] * len(analyses), analyses))
    base = sides[0]
    contracts, variables = [], []
    for side in sides[1:]:
        sets = both_settings(base, side)
        declared, note = variables_of(base, side, (knob,), sets)
        contracts.append(check_contract(base, side, declared, note, sets))
        variables.append(declared[0])
    names = labels or _labels(knob, variables, sides)
    settings = _settings(sides, names)
    best = settings["median_step_ns"].arg_min()
    settings = settings.with_columns(
        (pl.int_range(pl.len()) == best).alias("best") if best is not None
        else pl.lit(False).alias("best"))  # fmt: skip
    ladder = accept([_steps_log(a) for a in analyses], list(names), window=_common(analyses))
    return Sweep(knob, tuple(analyses), settings.select(list(SETTING_SCHEMA)).cast(SETTING_SCHEMA),
                 tuple(_sms_held(s) for s in sides), tuple(_exposed(s) for s in sides), ladder,
                 tuple(contracts), best)  # fmt: skip


def _labels(knob: str, variables: list[Variable], sides: list[Side]) -> tuple[str, ...]:
    """"knob=value" from the launch where every setting records the knob; else the blocks of
    the dispatcher's kernels for an SM knob; else the file names."""
    values = [variables[0].off, *(v.on for v in variables)]
    if all(v is not None for v in values) and len(set(values)) == len(values):
        return tuple(f"{knob}={v}" for v in values)
    blocks = [_sms_held(s).get("ep.dispatch") for s in sides]
    if "num_sms" in knob and all(b is not None for b in blocks) and len(set(blocks)) == len(blocks):
        return tuple(f"{b} SMs" for b in blocks)
    return distinct_names([s.analysis.path for s in sides])


def distinct_names(paths: list[str]) -> tuple[str, ...]:
    """Each path's shortest tail (file name, then parent/name, …) that no other path shares."""
    parts = [p.rstrip("/").split("/") for p in paths]
    for n in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-n:]) for p in parts]
        if len(set(names)) == len(names):
            return tuple(names)
    return tuple(f"{i + 1}: {p}" for i, p in enumerate(paths))  # the same path given twice


def _per_step_gpu(side: Side, ns: float | None) -> float | None:
    n = len(side.analysis.iterations) * len(side.analysis.gpus)
    return None if ns is None or not n else ns / n


def _settings(sides: list[Side], labels: tuple[str, ...]) -> pl.DataFrame:
    rows = []
    for side, label in zip(sides, labels, strict=True):
        a = side.analysis
        step = a.median_step_ns
        exposed = _per_step_gpu(side, a.totals.exposed_ns)
        idle = _per_step_gpu(side, a.totals.idle_ns)
        compute = None if step is None or exposed is None or idle is None else (
            step - exposed - idle)  # fmt: skip
        share = a.sm.gpus
        sms = (float(share["comm_sms_avg"].drop_nulls().mean())
               if share.width and share["comm_sms_avg"].drop_nulls().len() else None)  # fmt: skip
        rows.append({"label": label, "path": a.path, "iterations": len(a.iterations),
                     "gpus": len(a.gpus), "median_step_ns": step, "compute_ns": compute,
                     "exposed_ns": exposed, "idle_ns": idle, "hidden_pct": a.totals.hidden_pct,
                     "comm_sms_avg": sms,
                     "inflation_extra_ns": _per_step_gpu(side, a.sm.gemm_attn_extra_ns),
                     })  # fmt: skip
    return pl.DataFrame(rows, schema={k: v for k, v in SETTING_SCHEMA.items() if k != "best"})


def _sms_held(side: Side) -> dict[str, int | None]:
    df = side.analysis.sm.channels
    if not df.width:
        return {}
    held = df.group_by("channel", maintain_order=True).agg(pl.col("sms_held").max())
    return {r["channel"]: r["sms_held"] for r in held.iter_rows(named=True)}


def _exposed(side: Side) -> dict[str, float]:
    return {r["channel"]: _per_step_gpu(side, r["exposed_ns"]) or 0.0
            for r in side.analysis.channel_totals.iter_rows(named=True)}  # fmt: skip


def _steps_log(a: TraceAnalysis) -> TrainingLog:
    """A profile's steady iterations as the samples of a log (one iteration each, its GPU step
    time), so the ladder of the logs' acceptance measures them."""
    it = a.iterations
    if it.is_empty():
        raise NsysmoeError(f"{a.path}: no iterations in its window, so no step time to compare; "
                           "a sweep compares each setting's steps: name its iteration ranges "
                           "with --step-range REGEX, or record them as NVTX ranges")  # fmt: skip
    table = to_schema(it.select(pl.col("step").alias("iteration"),
                                pl.lit(1).alias("iterations"),
                                (pl.col("step_ns") / 1e9).alias("step_s")))  # fmt: skip
    return TrainingLog(a.path, "profile", table, None, (), 1, "mean", None, {}, ())


def _common(analyses: list[TraceAnalysis]) -> tuple[int, int]:
    """A window holding every setting's iterations (each is already its own steady window)."""
    steps = [s for a in analyses for s in a.iterations["step"].to_list()]
    return min(steps), max(steps)
