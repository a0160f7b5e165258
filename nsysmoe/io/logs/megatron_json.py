"""Megatron-LM's per-step metrics JSON (``golden_values*.json``, what its CI and functional tests
write): ``{metric: {"start_step", "end_step", "step_interval", "values": {step: value}}}``.

Each metric's values are keyed by step (older files hold a list, one value every
``step_interval`` steps from ``start_step``); metrics are joined on the step, a metric missing
at a step is null. The training arguments come from ``model_config.yaml`` beside the file (its
``MODEL_ARGS``); its ``--log-interval`` says what a value is: under ``--log-interval 1`` each
value is one iteration (a point sample, whatever ``step_interval`` is); under ``k`` > 1 each
value is Megatron's mean over the k iterations before it (a k larger than the steps between
timed values cannot be: ignored, with a note). The first step (initialisation,
often 10+ s) is kept: leaving out warm-up is the measure's job.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs.schema import (
    MAX_ITERATION,
    NO_ITERATIONS,
    TrainingLog,
    common_gap,
    drop_nonpositive,
    memory_note,
    memory_out_of_range,
    sampling_of,
    to_schema,
)

#: the metrics' names (Megatron's tensorboard scalars) -> LOG_SCHEMA columns
METRICS = {
    "iteration-time": "step_s",
    "lm loss": "loss",
    "mem-max-allocated-bytes": "mem_max_allocated_bytes",
    "throughput": "tflops",
    "loss-scale": "loss_scale",
    "grad-norm": "grad_norm",
    "batch-size": "global_batch",
}
#: a metrics JSON is a few kB per metric; anything far larger is not one (and is not read whole)
MAX_BYTES = 256 * 1024 * 1024
CONFIG_NAME = "model_config.yaml"


def looks_like_metrics_json(head: str) -> bool:
    """Whether a file's first characters are a Megatron metrics JSON: an object whose values
    are objects with ``"values"`` (and ``"start_step"`` or ``"step_interval"``)."""
    text = head.lstrip()
    return (text.startswith("{") and '"values"' in text
            and ('"start_step"' in text or '"step_interval"' in text))  # fmt: skip


def read_megatron_json(path: Path) -> TrainingLog:
    """Read a Megatron metrics JSON (and ``model_config.yaml`` beside it, where present)."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        what = "too large for a Megatron metrics JSON (a few kB per metric)"
        raise NsysmoeError(f"{path}: {size} bytes is {what}; pass the console log instead")
    try:
        data = json.loads(path.read_bytes().decode("utf-8", errors="replace"))
    except json.JSONDecodeError as err:
        where = f"{err.msg} at line {err.lineno} column {err.colno}"
        raise NsysmoeError(
            f"{path}: not valid JSON ({where}); pass the metrics JSON as Megatron wrote it"
        ) from None
    except (ValueError, RecursionError) as err:  # Python's 4300-digit limit; deep nesting
        what = "nested too deeply" if isinstance(err, RecursionError) else "an integer too long"
        raise NsysmoeError(f"{path}: not a metrics JSON Megatron writes ({what} to read); pass "
                           "the metrics JSON as Megatron wrote it") from None  # fmt: skip
    if not isinstance(data, dict):
        raise NsysmoeError(f"{path}: {NO_ITERATIONS}")
    notes: list[str] = []
    frames: list[pl.DataFrame] = []
    unreadable = off_steps = 0
    for key, column in METRICS.items():
        metric = data.get(key)
        if not isinstance(metric, dict) or "values" not in metric:
            continue
        steps, values, bad, off = _metric_values(metric)
        unreadable += bad
        off_steps += off
        frames.append(pl.DataFrame({"iteration": steps, column: values},
                                   schema={"iteration": pl.Int64, column: pl.Float64}))  # fmt: skip
    if not frames or all(frame.height == 0 for frame in frames):
        raise NsysmoeError(f"{path}: {NO_ITERATIONS}")
    if off_steps:
        notes.append(f"{off_steps} metric value(s) at a step that is not a whole number from 1 to "
                     "2**63-1 left out.")  # fmt: skip
    if unreadable:
        notes.append(f"{unreadable} metric value(s) that are not numbers read as null.")
    table = frames[0]
    for frame in frames[1:]:
        table = table.join(frame, on="iteration", how="full", coalesce=True)
    config = read_model_args(path.parent / CONFIG_NAME)
    if not config:
        notes.append(f"no {CONFIG_NAME} with MODEL_ARGS beside it: each value taken as one "
                     "iteration (--log-interval 1).")  # fmt: skip
    if "mem_max_allocated_bytes" in table.columns:
        memory = pl.col("mem_max_allocated_bytes")
        absurd = table.select(memory_out_of_range(memory).sum()).item()
        if absurd:
            notes.append(memory_note(absurd))
        table = table.with_columns(
            pl.when(memory_out_of_range(memory)).then(None).otherwise(memory.round(0)).alias(
                "mem_max_allocated_bytes"))  # fmt: skip
    table, log_interval, interval_notes = _cadence(to_schema(table), config.get("--log-interval"))
    notes += interval_notes
    table, nonpositive = drop_nonpositive(table)
    notes += nonpositive
    peak = table.get_column("mem_max_allocated_bytes").max()
    return TrainingLog(
        path=str(path), format="megatron-json", table=table, rank=None, ranks=(),
        log_interval=log_interval, sampling=sampling_of(table, log_interval),
        peak_memory_bytes=None if peak is None else int(peak),  # type: ignore[arg-type]
        config=config, notes=tuple(notes),
    )  # fmt: skip


def _cadence(table: pl.DataFrame, text: str | None) -> tuple[pl.DataFrame, int, list[str]]:
    """Each row's ``iterations``, the log interval and any note on ``--log-interval`` (``text``),
    from the timed rows (a step time or TFLOP/s: Megatron writes them once per
    ``--log-interval``, each the mean of the interval's iterations before); rows that carry only
    per-step metrics (lm loss and memory are written every step) cover one iteration, so a
    window keeps them. An interval larger than the gap between timed values (or, for one timed
    value, than its step) cannot be (a mean would cover iterations another value covers, or
    that never ran): it is ignored, with a note, and the gap used."""
    timed = pl.col("step_s").is_not_null() | pl.col("tflops").is_not_null()
    rows = table.filter(timed)
    steps = (rows if rows.height else table).get_column("iteration")
    gap = common_gap(steps)
    bound = gap if steps.len() > 1 else int(steps.max() or 1)  # type: ignore[arg-type]
    interval, notes = _int_or_one(text), []
    if text is not None and not re.fullmatch(r"\s*\+?0*[1-9]\d*\s*", text):
        notes.append(f"--log-interval {_shown(text)} is not a whole number of at least 1: "
                     "ignored, each value taken as one iteration.")  # fmt: skip
        interval = 1
    elif text is not None and interval > bound:
        notes.append(f"--log-interval {_shown(text)} is larger than the {bound} iteration(s) "
                     f"between timed values: ignored, each a mean of {bound}.")  # fmt: skip
        interval = bound
    covered = pl.when(timed).then(pl.lit(interval, dtype=pl.Int64)).otherwise(pl.lit(1))
    table = table.with_columns(covered.cast(pl.Int64).alias("iterations"))
    return table, gap, notes


def _shown(text: str) -> str:
    """A config value for a note: at most 24 characters."""
    return text if len(text) <= 24 else f"{text[:20]}… ({len(text)} characters)"


def _metric_values(metric: dict[str, object]) -> tuple[list[int], list[float | None], int, int]:
    """One metric's (steps, values, count of values that are not numbers, count of values left
    out for their step: not a whole number from 1 to :data:`MAX_ITERATION`)."""
    raw = metric.get("values")
    if isinstance(raw, dict):
        pairs = [(_step(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        start = _int_or_one(metric.get("start_step"))
        every = max(_int_or_one(metric.get("step_interval")), 1)
        pairs = [(start + i * every, v) for i, v in enumerate(raw)]
    else:
        return [], [], 0, 0
    steps: list[int] = []
    values: list[float | None] = []
    bad = off = 0
    for step, value in pairs:
        if step is None or not 1 <= step <= MAX_ITERATION:
            off += 1
            continue
        number = _number(value)
        bad += number is None and value is not None
        steps.append(step)
        values.append(number)
    return steps, values, bad, off


def _step(key: str) -> int | None:
    try:
        return int(key)
    except ValueError:
        return None


def _number(value: object) -> float | None:
    """A value as a float: numbers, and the strings "nan"/"inf" Megatron writes for them."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer beyond a float's range
            return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _int_or_one(value: object) -> int:
    try:
        number = int(str(value))
    except ValueError:
        return 1
    return number if number >= 1 else 1


_KEY = re.compile(r"^\s+(--[A-Za-z0-9][\w.-]*)\s*:\s*(.*?)\s*$")
_YAML_WORDS = {"true": "True", "false": "False", "null": "None", "~": "None", "": "None"}


def read_model_args(path: Path) -> dict[str, str]:
    """``MODEL_ARGS`` of a Megatron functional test's ``model_config.yaml`` as "--key" -> text.

    A line reader for the one block these files hold (``  --key: value  # comment``), not a
    YAML parser, so no dependency: values stay as written, quotes dropped, YAML's true / false /
    null written as Python's True / False / None (as the console's arguments block prints
    them). Missing or unreadable: an empty dict."""
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    config: dict[str, str] = {}
    inside = False
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            inside = line.rstrip().rstrip(":").strip() == "MODEL_ARGS"
            continue
        match = _KEY.match(line) if inside else None
        if match:
            config[match.group(1)] = _yaml_text(match.group(2))
    return config


def _yaml_text(value: str) -> str:
    """A YAML scalar's text: comment and quotes off; true/false/null as Python writes them."""
    if value[:1] in ("'", '"') and value.count(value[0]) >= 2:
        return value[1 : value.index(value[0], 1)]
    value = re.sub(r"\s+#.*$", "", value).strip()
    return _YAML_WORDS.get(value.lower(), value)
