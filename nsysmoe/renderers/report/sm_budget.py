"""What a report says about the SM budget (:class:`~nsysmoe.results.SmBudget`): the SMs each
channel's kernels hold, what that leaves compute, and what hiding communication cost compute."""

from __future__ import annotations

import polars as pl

from nsysmoe.renderers.cells import count, ms, pct
from nsysmoe.renderers.document import Block, Details, Lines, ReportOptions, Table
from nsysmoe.results import SmBudget

#: the most inflation rows a report shows (JSON has all)
TOP_INFLATION = 15


def held_phrase(channels: pl.DataFrame) -> str | None:
    """"ep.dispatch holds 20 of 132 SMs (20 blocks), …": each channel over the GPUs, with the
    range where GPUs differ; None where no channel's SMs are known."""
    if channels.is_empty():
        return None
    known = channels.filter(pl.col("sms_held").is_not_null())
    parts = []
    for (channel,), rows in known.group_by("channel", maintain_order=True):
        held, sms = sorted(set(rows["sms_held"])), sorted(set(rows["sm_count"]))
        blocks = sorted(set(rows["blocks"]))
        held_text = str(held[0]) if len(held) == 1 else f"{held[0]}–{held[-1]}"
        sms_text = str(sms[0]) if len(sms) == 1 else f"{sms[0]}–{sms[-1]}"
        shape = f"{blocks[0]} blocks" if len(blocks) == 1 else f"{blocks[0]}–{blocks[-1]} blocks"
        parts.append(f"{channel} holds {held_text} of {sms_text} SMs ({shape})")
    lost = channels.filter(pl.col("sms_held").is_null())
    no_sms = sorted(set(lost.filter(pl.col("sm_count").is_null())["channel"]))
    no_grid = sorted(set(lost.filter(pl.col("sm_count").is_not_null())["channel"]) - set(no_sms))
    if no_sms:
        parts.append(f"{', '.join(no_sms)}: SM count unknown")
    if no_grid:
        parts.append(f"{', '.join(no_grid)}: grid unknown")
    return "; ".join(parts)


def sm_lines(sm: SmBudget) -> list[str]:
    """The SM budget and the cost of hiding, in two sentences (none without communication)."""
    out = []
    if held := held_phrase(sm.channels):
        line = f"SMs: {held}"
        share = sm.gpus.filter(pl.col("comm_sms_avg").is_not_null()) if not sm.gpus.is_empty() \
            else sm.gpus  # fmt: skip
        if not share.is_empty():
            avg = float(share["comm_sms_avg"].mean())
            left = float(share["sms_left"].mean())
            line += (f". While communication ran it held {avg:.1f} SMs on average, leaving "
                     f"{left:.1f} for compute ({pct(float(share['comm_sm_pct'].mean()))} of "
                     "the GPU's SM-time over the window)")  # fmt: skip
        sized = _sized_for_what_is_left(sm.beside)
        out.append(line + (f"; {sized}" if sized else "") + ".")
    if not sm.inflation.is_empty():
        out.append(cost_line(sm))
    return out


def _longer(ns: int | None) -> str:
    if ns is None:
        return "could not be compared"
    return f"took {ms(abs(ns))} ms {'longer' if ns >= 0 else 'less'} overlapped than alone"


def cost_line(sm: SmBudget) -> str:
    """What hiding cost compute, kernel by kernel, with how much of it could be compared."""
    ok, shapes = sm.comparable_rows()
    ok_ga, shapes_ga = sm.comparable_rows(("gemm", "attention"))
    return (f"What hiding cost: {ms(sm.hidden_ns)} ms of communication ran under compute. Of "
            f"the {count(shapes)} compute kernel shapes (name and grid) that ran beside it, "
            f"{count(ok)} could be compared with their runs alone: they {_longer(sm.extra_ns)}; "
            f"GEMM/attention ({count(ok_ga)} of {count(shapes_ga)}) "
            f"{_longer(sm.gemm_attn_extra_ns)}. The rest ran too few times either way, or their "
            "work varies.")


def _sized_for_what_is_left(beside: pl.DataFrame) -> str | None:
    """The compute kernel with the most time under communication, its grid against what was
    left ("its 112 blocks = 132 − 20 SMs held")."""
    known = (beside.filter(pl.col("comm_sms").is_not_null() & pl.col("blocks").is_not_null())
             if not beside.is_empty() else beside)  # fmt: skip
    if known.is_empty():
        return None
    r = known.row(0, named=True)
    fit = ("=" if r["blocks"] == r["sms_left"] else "≤" if r["blocks"] < r["sms_left"] else ">")
    return (f"the compute with the most time under it ({r['class']}, {count(r['count'])} "
            f"launches) launched {count(r['blocks'])} blocks {fit} the {r['sms_left']} SMs left "
            f"({r['sm_count']} − {r['comm_sms']})")


def sm_details(sm: SmBudget, labels: dict[tuple[int, int], str],
               options: ReportOptions | None = None) -> list[Block]:  # fmt: skip
    """The folded tables: per GPU and channel, compute beside communication, inflation."""
    if sm.channels.is_empty():
        return []
    options = options or ReportOptions()
    header = ("GPU", "channel", "kernels", "blocks", "min–max", "SMs held", "at least", "SMs")
    rows = tuple(
        (labels.get((r["pid"], r["device"]), f"{r['pid']}/{r['device']}"), r["channel"],
         count(r["count"]), count(r["blocks"]), f"{count(r['blocks_min'])}–"
         f"{count(r['blocks_max'])}", count(r["sms_held"]), count(r["sms_min"]),
         count(r["sm_count"]))
        for r in sm.channels.iter_rows(named=True)
    )  # fmt: skip
    blocks: list[Block] = [Table(
        "SMs each channel's kernels hold (held = min(blocks, SMs): one block per SM; at least = "
        "packed as the occupancy limits allow)", header, rows, (False, False) + (True,) * 6)]
    if not sm.beside.is_empty():
        names = options.names(sm.beside["name"].to_list(), 60)
        rows = tuple(
            (n, r["class"], count(r["blocks"]), count(r["comm_sms"]), count(r["sms_left"]),
             count(r["count"]), ms(r["beside_ns"]))
            for n, r in zip(names, sm.beside.iter_rows(named=True), strict=True)
        )  # fmt: skip
        blocks.append(Table("Compute beside communication (comm SMs: the most it held at once; "
                            "beside ms: the time under it)",
                            ("kernel", "class", "blocks", "comm SMs", "SMs left", "launches",
                             "beside ms"), rows, (False, False) + (True,) * 5))  # fmt: skip
    if not sm.inflation.is_empty():
        top = sm.inflation.head(TOP_INFLATION)
        names = options.names(top["kernel"].to_list(), 60)
        rows = tuple(
            (n, r["class"], count(r["blocks"]), count(r["n_overlapped"]), count(r["n_alone"]),
             ms(r["median_overlapped_ns"]), ms(r["median_alone_ns"]),
             ms(r["extra_ns"]) if r["comparable"] else (r["why"] or ""))
            for n, r in zip(names, top.iter_rows(named=True), strict=True)
        )  # fmt: skip
        more = len(sm.inflation) - len(top)
        title = ("Compute overlapped vs alone (median ms; extra = (overlapped − alone) × "
                 "overlapped launches)")  # fmt: skip
        if more > 0:
            title += f", top {len(top)} of {len(sm.inflation)}; --format json lists all"
        blocks.append(Table(title, ("kernel", "class", "blocks", "overlapped", "alone",
                                    "overlapped ms", "alone ms", "extra ms"), rows,
                            (False, False) + (True,) * 6))  # fmt: skip
    return [Details("SM budget and what hiding cost", tuple(blocks))]


def sm_block(sm: SmBudget) -> list[Block]:
    """The sentences as a block (none without them)."""
    lines = sm_lines(sm)
    return [Lines(tuple(lines))] if lines else []
