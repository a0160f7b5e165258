"""Communication per step phase: for the NVTX ranges that structure a step (forward/backward,
layers, Megatron's EP-overlap schedule, HybridEP's ``… in hybrid-ep``, any ``--phase REGEX``),
the communication each launched, and how much of it compute hid.

A communication kernel belongs to a phase when its launching CUDA API call lies inside a range of
that name on the same thread (:mod:`nsysmoe.enclosing`, as NVTX projection does); nested phases
each get it. Per GPU and phase name, over the window, with C_p = the communication kernels the
phase's ranges launched and K = every compute kernel of the GPU (launched anywhere):

* ``count``: those kernels; ``instances``: range instances that launched any
* ``comm_ns`` = |⋃C_p|, ``hidden_ns`` = |⋃C_p ∩ ⋃K|, ``exposed_ns``, ``hidden_pct``,
  ``comm_gemm_attn_ns`` — the definitions of :mod:`nsysmoe.measure.channels`, with the phase
  in the place of the channel (one sweep; a kernel in two phases is counted in each)

Ranges whose name gives a layer number (``layer_3f``, ``decoder.layers.3``) also add up per layer;
a range naming two (``layer_0f-layer_2b``: Megatron's overlapped forward/backward pair) counts
for both, since its name cannot say which of the two launched what.
"""

from __future__ import annotations

import polars as pl

from nsysmoe.classify import regex_error
from nsysmoe.enclosing import enclosing_pairs
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.channels import channel_table, coded_rows
from nsysmoe.measure.nvtx import display_name
from nsysmoe.measure.overlap import COMM, class_code, hidden_pct_expr
from nsysmoe.model import WHOLE_TRACE, Window

#: Megatron-Core's EP A2A overlap schedule (``--overlap-moe-expert-parallel-comm``)
OVERLAP_SCHEDULE = (
    r"^(?:pre_dispatch_computation|moe_dispatch|mlp|moe_combine|mtp_post_process|attn|post_attn)"
    r" (?:forward|backward|wgrad)$|^layer_\d+[fb](?:-layer_\d+[fb])?$|^delayed_expert_wgrad$"
    r"|^\w+ wgrad$"
)
#: The ranges measured by default: the schedule above, HybridEP's executor, forward/backward
#: steps, token dispatch/combine, and layer ranges.
DEFAULT_PHASES = (
    OVERLAP_SCHEDULE
    + r"| in hybrid-ep$"
    + r"|^(?i:forward|backward)(?:[-_ ](?i:backward|step|compute|pass))?$"
    + r"|^token_(?:dispatch|combine)\b"
    + r"|(?i:\blayers?[_. ]?\d+\b)"
)
LAYER = r"(?i)\blayers?[_. ]?(\d+)"
PHASE_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "device": pl.Int64, "phase": pl.String, "instances": pl.Int64,
    "count": pl.Int64, "comm_ns": pl.Int64, "hidden_ns": pl.Int64, "exposed_ns": pl.Int64,
    "hidden_pct": pl.Float64, "comm_gemm_attn_ns": pl.Int64,
}  # fmt: skip
LAYER_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "device": pl.Int64, "layer": pl.Int64, "count": pl.Int64,
    "comm_ns": pl.Int64, "hidden_ns": pl.Int64, "exposed_ns": pl.Int64,
    "hidden_pct": pl.Float64, "comm_gemm_attn_ns": pl.Int64,
}  # fmt: skip


def _all_gpus(table: pl.DataFrame, key: str, schema: dict[str, pl.DataType],
              order: list[pl.Expr | str], descending: list[bool]) -> pl.DataFrame:  # fmt: skip
    """A per-GPU table summed over GPUs per ``key``, exposed time and hidden % from the sums."""
    out = {k: v for k, v in schema.items() if k not in ("pid", "device")}
    if table.is_empty():
        return pl.DataFrame(schema=out)
    sums = [c for c in out if c not in (key, "exposed_ns", "hidden_pct")]
    hidden, comm = pl.col("hidden_ns"), pl.col("comm_ns")
    return (
        table.group_by(key).agg(pl.col(*sums).sum())
        .with_columns((comm - hidden).alias("exposed_ns"),
                      hidden_pct_expr(hidden, comm).alias("hidden_pct"))
        .sort(order, descending=descending)
        .select(list(out)).cast(out)
    )  # fmt: skip


def phase_totals(phases: pl.DataFrame) -> pl.DataFrame:
    """All GPUs together per phase (sums; hidden % of the sums), busiest first."""
    return _all_gpus(phases, "phase", PHASE_SCHEMA, ["comm_ns", "phase"], [True, False])


def layer_totals(layers: pl.DataFrame) -> pl.DataFrame:
    """All GPUs together per layer (sums; hidden % of the sums), in layer order."""
    return _all_gpus(layers, "layer", LAYER_SCHEMA, ["layer"], [False])


def phase_pattern(extra: str | None = None) -> str:
    """The default phase ranges, plus ``--phase REGEX`` (checked here: a bad one is an error)."""
    if not extra:
        return DEFAULT_PHASES
    try:
        pl.Series([""]).str.contains(extra)
    except pl.exceptions.PolarsError as exc:
        raise NsysmoeError(f"bad --phase pattern {extra!r}: {regex_error(exc)} (Rust regex "
                           "syntax: no look-around or back-references)") from None
    return f"{DEFAULT_PHASES}|(?:{extra})"


def memberships(
    kernels: pl.DataFrame, runtime: pl.DataFrame, nvtx: pl.DataFrame, pattern: str
) -> pl.DataFrame:
    """(row, range_id, phase): each communication kernel (``row`` = its index in ``kernels``)
    and every phase range whose name matches ``pattern`` that encloses its launching call.

    ``kernels`` may carry each row's launching call as ``api_tid``, ``api_start``, ``api_end``
    (the trace's shared launch join, :mod:`nsysmoe.measure.launch_calls`, when no (pid,
    corr_id) names two runtime rows); without them the calls are joined from ``runtime``."""
    schema = {"row": pl.UInt32, "range_id": pl.UInt32, "phase": pl.String}
    ranges = (
        nvtx.filter(~pl.col("cross_thread").fill_null(False), pl.col("name").str.contains(pattern))
        .select("tid", "start", "end", display_name().alias("phase"))
        .with_row_index("range_id")
    )
    comm = kernels.with_row_index("row").filter(pl.col("class") == COMM)
    if "api_tid" in kernels.columns:
        calls = comm.select(
            "row", pl.col("api_tid").alias("tid"), pl.col("api_start").alias("start"),
            pl.col("api_end").alias("end"),
        ).drop_nulls("start").with_row_index("call_id")  # fmt: skip
    else:
        calls = comm.select("row", "pid", "corr_id").join(
            runtime.select("pid", "corr_id", "tid", "start", "end"), on=["pid", "corr_id"]
        ).with_row_index("call_id")  # fmt: skip
    if ranges.is_empty() or calls.is_empty():
        return pl.DataFrame(schema=schema)
    pairs = enclosing_pairs(ranges.select("range_id", "tid", "start", "end"), calls)
    out = pairs.join(calls.select("call_id", "row"), on="call_id").join(
        ranges.select("range_id", "phase"), on="range_id"
    )  # fmt: skip
    return out.select("row", "range_id", "phase").unique().cast(schema)


def _labelled(comm: pl.DataFrame, compute: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """The rows the channel sweep measures (:func:`~nsysmoe.measure.channels.coded_rows`): the
    ``compute`` kernels (pid, device, start, end, class ``code``) as they are (``ch`` −1), and each
    (communication kernel ``row`` of ``comm``, label ``ch``) of ``labels`` once as a
    communication row of channel ``ch``: the channel sweep then measures per label."""
    coded = comm.select("pid", "device", "start", "end", class_code()).with_row_index("row")
    # in the kernels' (time) order: the sweep's sort is then near linear
    labelled = coded.join(labels.unique(), on="row", maintain_order="left").drop("row")
    return pl.concat([compute.with_columns(ch=pl.lit(-1, pl.Int64)),
                      labelled.cast({"ch": pl.Int64})])  # fmt: skip


def phase_tables(
    kernels: pl.DataFrame,
    runtime: pl.DataFrame,
    nvtx: pl.DataFrame,
    window: Window | None = None,
    pattern: str = DEFAULT_PHASES,
    *,
    launched: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per (GPU, phase) (:data:`PHASE_SCHEMA`) and per (GPU, layer) (:data:`LAYER_SCHEMA`)
    communication over ``window``; ``kernels`` must carry ``class``. ``launched``: each kernel
    row's launching call (api_tid, api_start, api_end; see :func:`memberships`), when known."""
    window = window or WHOLE_TRACE
    kernels = kernels.select("pid", "device", "start", "end", "class", "corr_id")
    if launched is not None:
        kernels = kernels.hstack(launched)
    # membership comes from the launch, the time from the window: the window's rows clipped
    # to it once, in two copies of only what is read: the communication kernels with their
    # launch, and the others' times and class (what the sweep's compute unions need)
    rows = window.select(kernels.lazy())  # collected twice: no copy of every column first
    comm = rows.filter(pl.col("class") == COMM).collect()
    compute = (rows.filter(pl.col("class") != COMM)
               .select("pid", "device", "start", "end", class_code()).collect())  # fmt: skip
    members = memberships(comm, runtime, nvtx, pattern)
    if members.is_empty():
        return pl.DataFrame(schema=PHASE_SCHEMA), pl.DataFrame(schema=LAYER_SCHEMA)
    gpu_of = comm.with_row_index("row").select("row", "pid", "device")
    instances = (members.join(gpu_of, on="row").group_by("pid", "device", "phase")
                 .agg(pl.col("range_id").n_unique().alias("instances")))  # fmt: skip
    layered = (
        members.with_columns(pl.col("phase").str.extract_all(LAYER).alias("layer"))
        .explode("layer")
        .with_columns(pl.col("layer").str.extract(r"(\d+)", 1).cast(pl.Int64, strict=False))
        .filter(pl.col("layer").is_not_null())
        .unique(["row", "layer"])
    )
    # phases and layers as the channels of ONE sweep ("P" + phase, "L" + layer; indices, no
    # string built per kernel): the sweep's cost does not grow with channels, and no figure
    # kept here (exposed_only_ns is not) mixes one channel with another
    phase_names = sorted(members["phase"].unique().to_list())
    layer_numbers = sorted(layered["layer"].unique().to_list())
    names = [f"P{p}" for p in phase_names] + [f"L{n}" for n in layer_numbers]
    labels = pl.concat([
        members.select("row", pl.col("phase").cast(pl.Enum(phase_names)).to_physical()
                       .cast(pl.Int64).alias("ch")),
        layered.select("row", pl.col("layer").replace_strict(
            layer_numbers, range(len(phase_names), len(names)), return_dtype=pl.Int64)
            .alias("ch")),
    ])  # fmt: skip
    coded = coded_rows(_labelled(comm, compute, labels), names)
    # the sweep reads only its coded arrays: the frames they came from go first (tens of MB
    # on a million kernels, alive through the sweep otherwise)
    del comm, compute, members, layered, labels
    both = channel_table(coded)
    del coded
    kind, label = pl.col("channel").str.head(1), pl.col("channel").str.slice(1)
    phases = both.filter(kind == "P").with_columns(label.alias("phase")).drop("channel")
    phases = phases.join(instances, on=["pid", "device", "phase"], how="left",
                         maintain_order="left")  # fmt: skip
    layers = (
        both.filter(kind == "L").with_columns(label.cast(pl.Int64).alias("layer"))
        .sort("pid", "device", "layer")
    )  # fmt: skip
    order = [pl.col("comm_ns"), pl.col("phase")]
    phases = phases.sort(["pid", "device", *order], descending=[False, False, True, False])
    return (phases.select(list(PHASE_SCHEMA)).cast(PHASE_SCHEMA),
            layers.select(list(LAYER_SCHEMA)).cast(LAYER_SCHEMA))  # fmt: skip
