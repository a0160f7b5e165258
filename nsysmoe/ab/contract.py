"""The measurement contract (seed workflow, Phase 0): only a comparison that holds is "matched".

Same GPU model and count, same ranks, same dispatcher, the same kernels (name multiset and
counts), the same NVTX range set, the same window length, CUDA graphs traced the same way, and
the same launch (contract settings, options, performance variables, versions, capture mode):
only the variable under test may change (:mod:`nsysmoe.ab.variables`). Every difference is a row
marked *variable*, *consequence* (the variable explains it), *incidental* or *unexpected*; the
contract is matched when nothing is unexpected.
"""

from __future__ import annotations

import re

import polars as pl

from nsysmoe.ab.settings import Setting, differing, settings
from nsysmoe.ab.variables import SM_SETTINGS, declared, inferred, scope_of
from nsysmoe.results import Check, Contract, Role, Side, Variable

SHOW = 3  # differing names listed per check
#: NVTX ranges of Megatron's EP A2A overlap schedule (--overlap-moe-expert-parallel-comm)
OVERLAP_SCHEDULE = re.compile(
    r"^(?:pre_dispatch_computation|moe_dispatch|mlp|moe_combine|mtp_post_process|attn|post_attn)"
    r" (?:forward|backward|wgrad)$|^layer_\d+[fb](?:-layer_\d+[fb])?$|^delayed_expert_wgrad$"
    r"|^\w+ wgrad$"
)


def _role(differs: bool, explained: bool) -> Role:
    return "same" if not differs else ("consequence" if explained else "unexpected")


def _same(name: str, off: object, on: object, explained: bool = False) -> Check:
    def number(v: object) -> int | float | None:
        return v if isinstance(v, int | float) and not isinstance(v, bool) else None

    return Check(name, str(off), str(on), _role(off != on, explained),
                 off_value=number(off), on_value=number(on))  # fmt: skip


def kernel_checks(off: Side, on: Side, variables: tuple[Variable, ...],
                  scope: frozenset[str]) -> list[Check]:  # fmt: skip
    """The kernel multiset: one row, or one per role where names differ in count (a name of a
    varied channel is the variable; one the variable may change, a consequence)."""
    def counts(side: Side, col: str) -> pl.DataFrame:
        return side.kernel_names.group_by("name").agg(pl.col("count").sum().alias(col))

    joined = counts(off, "off").join(counts(on, "on"), on="name", how="full",
                                     coalesce=True).fill_null(0)  # fmt: skip
    total_off, total_on = int(joined["off"].sum()), int(joined["on"].sum())
    diff = joined.filter(pl.col("off") != pl.col("on"))
    if diff.is_empty():
        return [Check("kernels", f"{total_off:,}", f"{total_on:,}", off_value=total_off,
                      on_value=total_on)]  # fmt: skip
    channels = sorted({v.key for v in variables if v.kind == "channel"})
    varied = (pl.col("channel").str.contains("^(?:" + "|".join(map(re.escape, channels))
                                             + r")(?:\.|$)") if channels else pl.lit(False))
    allowed = [c for k, cls in (("kernels:comm", ("comm",)),
                                ("kernels:compute", ("gemm", "attention"))) if k in scope
               for c in cls]  # fmt: skip
    explained = pl.col("class").is_in(allowed) | (
        pl.lit("kernels:other" in scope) & ~pl.col("class").is_in(("comm", "gemm", "attention")))
    meta = pl.concat([off.kernel_channels, on.kernel_channels]).select("name", "class", "channel")
    roles = (
        diff.select("name").join(meta.unique(), on="name", how="left")
        .group_by("name")
        .agg(varied.fill_null(False).all().alias("v"), explained.all().alias("c"))
        .select("name", pl.when("v").then(pl.lit("variable")).when("c")
                .then(pl.lit("consequence")).otherwise(pl.lit("unexpected")).alias("role"))
    )
    diff = diff.join(roles, on="name").with_columns(
        (pl.col("on") - pl.col("off")).abs().alias("gap"))
    out = []
    groups = [r for r in ("variable", "consequence", "unexpected") if r in set(diff["role"])]
    for r in groups:
        part = diff.filter(pl.col("role") == r)
        top = part.sort(["gap", "name"], descending=[True, False]).head(SHOW)
        examples = ", ".join(f"{_short(x['name'])} {x['off']}→{x['on']}"
                             for x in top.iter_rows(named=True))  # fmt: skip
        why = {"variable": f" (channel {', '.join(channels)}: the variable under test)",
               "consequence": " (the variable under test changes these)",
               "unexpected": ""}[r]  # fmt: skip
        values = ((total_off, total_on) if len(groups) == 1 else
                  (int(part["off"].sum()), int(part["on"].sum())))  # fmt: skip
        shown = ((f"{total_off:,}", f"{total_on:,}") if len(groups) == 1 else
                 (f"{values[0]:,} of {total_off:,}", f"{values[1]:,} of {total_on:,}"))
        out.append(Check("kernels", *shown, r,  # type: ignore[arg-type]
                         f"{_count(len(part), 'kernel name')} in count{why} (e.g. "
                         f"{examples})", *values))
    return out


def _names(names: set[str]) -> str:
    return ", ".join(sorted(names)[:SHOW]) + (", …" if len(names) > SHOW else "")


def nvtx_check(off: Side, on: Side, scope: frozenset[str], labels: tuple[str, str]) -> Check:
    """Same range names on both sides, except what the variable under test changes: the ranges
    Megatron's EP-overlap schedule emits exist only with overlap on."""
    a, b = set(off.nvtx["name"]), set(on.nvtx["name"])
    schedule = {n for n in a ^ b if OVERLAP_SCHEDULE.search(n)}
    explained_schedule = bool({"nvtx", "nvtx:schedule"} & scope)
    if not explained_schedule:
        schedule = set()
    only_off, only_on = a - b - schedule, b - a - schedule
    notes = []
    if only_off:
        notes.append(f"{len(only_off)} only in {labels[0]} ({_names(only_off)})")
    if only_on:
        notes.append(f"{len(only_on)} only in {labels[1]} ({_names(only_on)})")
    if schedule:
        notes.append(f"{len(schedule)} EP-overlap schedule ranges on one side only, expected "
                     f"({_names(schedule)})")  # fmt: skip
    role = _role(bool(a ^ b), "nvtx" in scope or not (only_off or only_on))
    return Check("NVTX ranges", f"{len(a)} names", f"{len(b)} names", role, "; ".join(notes),
                 len(a), len(b))


def window_check(off: Side, on: Side) -> Check:
    n_off, n_on = len(off.analysis.iterations), len(on.analysis.iterations)
    detail = "" if n_off or n_on else "no iterations on either side: whole windows compared"
    return Check("window length", f"{n_off} iterations", f"{n_on} iterations",
                 _role(n_off != n_on, False), detail, n_off, n_on)  # fmt: skip


def gpu_model_check(off: Side, on: Side) -> Check:
    a, b = ", ".join(sorted(set(off.gpu_models))), ", ".join(sorted(set(on.gpu_models)))
    detail = "GPU model not captured in the export" if "unknown" in (a, b) else ""
    return Check("GPU model", a, b, _role(a != b, False), detail)


def graph_check(off: Side, on: Side, scope: frozenset[str]) -> Check:
    """CUDA graphs traced the same way: whole-graph rows hide the communication inside them, so
    a side traced per graph and a side traced per node (or eager) measure different things."""
    a, b = off.analysis.graphs.traced, on.analysis.graphs.traced
    hidden = [label for label, g in ((off.name, off.analysis.graphs),
                                     (on.name, on.analysis.graphs)) if g.unknown_ns]  # fmt: skip
    detail = ""
    if hidden:
        detail = (f"whole-graph replays with unknown contents on {' and '.join(hidden)}: "
                  "communication inside them is not measured; record with "
                  "--cuda-graph-trace=node")  # fmt: skip
    return Check("CUDA graphs traced", a, b, _role(a != b, "graphs" in scope), detail)


def _shown(value: str | None) -> str:
    return "(not set)" if value is None else value


def setting_checks(off: dict[str, Setting], on: dict[str, Setting],
                   variables: tuple[Variable, ...]) -> list[Check]:  # fmt: skip
    """A row per differing setting; incidental ones folded into one row per group; a declared
    variable that does not differ is unexpected (nothing was varied), unless neither export
    recorded it."""
    varied = {v.key for v in variables}
    rows: list[Check] = []
    folded: dict[str, list[str]] = {}
    for key, s in differing(off, on):
        a, b = off.get(key), on.get(key)
        va, vb = _shown(a and a.value), _shown(b and b.value)
        if key in varied:
            rows.append(Check(_label(key, s.group), va, vb, "variable", "the variable under test"))
        elif s.incidental:
            folded.setdefault(s.group, []).append(key)
        elif s.group == "capture":
            rows.append(Check(_label(key, s.group), va, vb, "unexpected",
                              "nsys traced CUDA graphs another way (--cuda-graph-trace): the "
                              "two sides measure different things; record both the same way"))
        else:
            rows.append(Check(_label(key, s.group), va, vb, "unexpected"))
    for v in variables:
        name = _label(v.key, v.kind)
        if v.kind == "channel" or any(c.name == name for c in rows):
            continue
        if v.off is None and v.on is None:
            rows.append(Check(name, "(not recorded)", "(not recorded)",
                              "variable", "declared with --vary; neither export recorded it"))
        elif v.off == v.on:
            rows.append(Check(name, _shown(v.off), _shown(v.on), "unexpected",
                              "declared with --vary, but the same on both sides: nothing was "
                              "varied"))  # fmt: skip
    for group, keys in folded.items():
        rows.append(Check(f"other {group}", _count(len(keys), "name"), "", "incidental",
                          "bearing not on performance: " + _names(set(keys))))
    return rows


#: the channels whose kernels are the dispatcher's: the SMs it holds
DISPATCH_CHANNELS = ("ep.dispatch", "ep.combine")


def _blocks(side: Side, channel: str) -> str | None:
    """The blocks the channel's kernels launch most often, per GPU ("20", or "20, 24" where
    GPUs differ); None where the side has no such kernel or no launch shape."""
    df = side.analysis.sm.channels
    if df.width == 0:
        return None
    found = sorted(set(df.filter(pl.col("channel") == channel)["blocks"].drop_nulls()))
    return ", ".join(str(b) for b in found) or None


def sm_checks(off: Side, on: Side, variables: tuple[Variable, ...],
              scope: frozenset[str]) -> list[Check]:  # fmt: skip
    """The blocks the dispatcher's kernels launch (the SMs it holds), compared like a setting:
    from the grids always, whatever the launch metadata says. A difference is the variable where
    an SM setting is declared (``--vary moe_deepep_num_sms``), a consequence where the variable
    may change it (the dispatcher, a parallel size), else unexpected; a declared SM setting with
    the same blocks on both sides varied nothing."""
    declared = any(v.key in SM_SETTINGS for v in variables)
    out = []
    for channel in DISPATCH_CHANNELS:
        a, b = _blocks(off, channel), _blocks(on, channel)
        if a is None or b is None:
            continue  # on one side only, or no launch shape: the kernel checks say so
        if a == b:
            role: Role = "unexpected" if declared else "same"
            detail = ("declared with --vary, but the dispatcher's kernels launch the same "
                      "blocks on both sides: nothing was varied") if declared else ""  # fmt: skip
        elif declared:
            role, detail = "variable", "the variable under test (blocks = SMs held)"
        else:
            role = "consequence" if "sms" in scope else "unexpected"
            detail = ("the SMs the dispatcher's kernels hold differ; declare it with --vary "
                      "moe_deepep_num_sms (or moe_hybridep_num_sms) if it is what you varied"
                      if role == "unexpected" else "")  # fmt: skip
        out.append(Check(f"{channel} blocks", a, b, role, detail))
    return out


def _label(key: str, group: str) -> str:
    return f"--{key}" if group == "option" else key


def caveat_checks(off: Side, on: Side) -> list[Check]:
    """A backend selected but not in use on either side breaks the contract; benchmark-only
    routing on both sides is said (on one side only, its setting differs: a row of its own)."""
    def texts(side: Side, code: str) -> list[str]:
        return [c.text for c in side.analysis.caveats if c.code == code]

    out = []
    a, b = texts(off, "backend_not_in_use"), texts(on, "backend_not_in_use")
    if a or b:
        out.append(Check("backend in use", "no" if a else "yes", "no" if b else "yes",
                         "unexpected", (a or b)[0]))  # fmt: skip
    a, b = texts(off, "benchmark_only"), texts(on, "benchmark_only")
    if a and b:
        out.append(Check("benchmark-only routing", "yes", "yes", "same", a[0]))
    return out


def variables_of(off: Side, on: Side, vary: tuple[str, ...] = (),
                 sets: Settings | None = None) -> tuple[tuple[Variable, ...], str]:  # fmt: skip
    """The variable under test (the ``--vary`` names, else the one setting that differs) and
    a note on how it was found."""
    s_off, s_on = sets or both_settings(off, on)
    channels = set(off.kernel_channels["channel"].drop_nulls()) | set(
        on.kernel_channels["channel"].drop_nulls())
    variables = declared(vary, s_off, s_on, channels)
    if variables:
        return variables, "declared with --vary"
    if (guess := inferred(s_off, s_on)) is not None:
        return (guess,), (f"{guess.key} taken as the variable under test: the only setting "
                          f"that differs (declare it with --vary {guess.key})")  # fmt: skip
    return (), ""


def check_contract(off: Side, on: Side, variables: tuple[Variable, ...] = (), note: str = "",
                   sets: Settings | None = None) -> Contract:  # fmt: skip
    """The contract of two sides given the variable under test (:func:`variables_of`)."""
    s_off, s_on = sets or both_settings(off, on)
    scope = scope_of(variables)
    if not off.analysis.launch.command and not on.analysis.launch.command:
        scope |= {"nvtx:schedule"}  # no launch recorded: the EP-overlap schedule is assumed
    graphs = off.analysis.graphs.present or on.analysis.graphs.present
    checks = [
        gpu_model_check(off, on),
        _same("GPU count", len(off.gpu_models), len(on.gpu_models), "gpus" in scope),
        _same("ranks", off.ranks, on.ranks, "gpus" in scope),
        _same("dispatcher", off.dispatcher, on.dispatcher, "dispatcher" in scope),
        *caveat_checks(off, on),
        *kernel_checks(off, on, variables, scope),
        nvtx_check(off, on, scope, (off.name, on.name)),
        window_check(off, on),
        *([graph_check(off, on, scope)] if graphs else []),
        *sm_checks(off, on, variables, scope),
        *setting_checks(s_off, s_on, variables),
    ]
    return Contract(tuple(checks), variables, note or _hint(checks, off, on))


def differing_channels(off: Side, on: Side) -> tuple[list[str], bool]:
    """The channels of communication kernels whose counts differ, and whether any kernel
    outside communication differs too."""
    def counts(side: Side) -> pl.DataFrame:
        return side.kernel_channels.group_by("name", "class", "channel").agg(pl.col("count").sum())

    joined = counts(off).join(counts(on), on=["name", "class", "channel"], how="full",
                              coalesce=True, nulls_equal=True).fill_null(0)  # fmt: skip
    diff = joined.filter(pl.col("count") != pl.col("count_right"))
    comm = diff.filter(pl.col("class") == "comm")
    return sorted(set(comm["channel"].drop_nulls())), len(comm) < len(diff)


Settings = tuple[dict[str, Setting], dict[str, Setting]]


def both_settings(off: Side, on: Side) -> Settings:
    """Each side's settings (:func:`nsysmoe.ab.settings.settings`), read once for the variable
    and the contract."""
    return settings(off.analysis), settings(on.analysis)


def _hint(checks: list[Check], off: Side, on: Side) -> str:
    """With no variable under test: how to declare one."""
    settings_differ = [c.name for c in checks if c.role == "unexpected" and c.name not in (
        "GPU model", "GPU count", "ranks", "dispatcher", "kernels", "NVTX ranges",
        "window length", "CUDA graphs traced", "backend in use")]  # fmt: skip
    if len(settings_differ) > 1:
        return (f"{len(settings_differ)} settings differ ({_names(set(settings_differ))}): "
                "declare the variable under test with --vary NAME (repeatable)")
    if not settings_differ and any(c.name == "kernels" and not c.ok for c in checks):
        channels, other = differing_channels(off, on)
        if channels and not other:
            return ("no recorded setting differs, but the kernels of "
                    f"{', '.join(channels)} do: if that change is what was tested, declare it "
                    f"with --vary {channels[0].split('.')[0]}")  # fmt: skip
        return ("no recorded setting differs, yet kernels beyond communication do: the two "
                "sides ran different work (another code version or model?)")
    return ""


def _count(n: int, what: str) -> str:
    return f"{n} {what} differs" if n == 1 else f"{n} {what}s differ"


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
