"""What a report says about collectives matched across ranks (:class:`~nsysmoe.results.
Collectives`): the clock each rank was put on, wait vs transfer per rank and channel and per rank
over all its channels, and the rank everyone waits for."""

from __future__ import annotations

import polars as pl

from nsysmoe.renderers.cells import count, ms, pct
from nsysmoe.renderers.document import Block, Lines, Table
from nsysmoe.results import Collectives

TOP_ROWS = 64


def collective_blocks(c: Collectives) -> list[Block]:
    """The wait/transfer table and the straggler and clock lines; with nothing matched, only
    the line on the instances left unmatched (none when there are none either)."""
    if not c.matched:
        return [Lines((unmatched_line(c),))] if not c.incomplete.is_empty() else []
    rows = tuple(
        (r["rank"], r["channel"], count(r["instances"]), ms(r["wait_ns"]), ms(r["transfer_ns"]),
         ms(r["exposed_wait_ns"]), ms(r["exposed_transfer_ns"]), pct(r["imbalance_pct"]))
        for r in c.waits.head(TOP_ROWS).iter_rows(named=True)
    )  # fmt: skip
    header = ("rank", "channel", "instances", "wait ms", "transfer ms", "exposed wait ms",
              "exposed transfer ms", "wait share")  # fmt: skip
    more = f" (first {TOP_ROWS} of {len(c.waits)})" if len(c.waits) > TOP_ROWS else ""
    title = (f"Collectives matched across ranks ({c.matched:,} instances): wait until the last "
             f"peer arrived vs transfer after{more}")  # fmt: skip
    lines = [
        f"straggler ({r['channel']}): {r['rank']} arrived last in {r['last_count']} of "
        f"{r['instances']} instances; the others waited {ms(r['caused_wait_ns'])} ms for it"
        for r in c.stragglers.iter_rows(named=True)
    ]
    if c.imbalanced:
        lines.append(f"Wall: imbalance / straggler — {pct(c.exposed_wait_pct)} of the exposed "
                     "collective time is ranks waiting for a late peer, not moving data; knobs: "
                     + "; ".join(c.knobs))  # fmt: skip
    elif c.exposed_wait_pct is not None:
        lines.append(f"{pct(c.exposed_wait_pct)} of the exposed collective time is waiting for "
                     "a late peer; the rest is transfer")  # fmt: skip
    if not c.incomplete.is_empty():
        lines.append(unmatched_line(c))
    if "correction_ns" in c.offsets.columns:
        spread = c.offsets["spread_ns"].max()
        corr = c.offsets["correction_ns"].drop_nulls()
        lines.append(f"clocks aligned by collective ends (--align collectives): corrections "
                     f"{ms(int(corr.min()))}…{ms(int(corr.max()))} ms, ends then within "
                     f"{ms(int(spread))} ms")  # fmt: skip
    elif not c.offsets.is_empty() and c.offsets["offset_ns"].max():
        lines.append(f"files put on one clock by their session starts (offsets up to "
                     f"{ms(int(c.offsets['offset_ns'].max()))} ms)")  # fmt: skip
    blocks: list[Block] = [Table(title, header, rows, (False, False) + (True,) * 6)]
    if (totals := total_table(c)) is not None:
        blocks.append(totals)
    elif not c.rank_totals.is_empty():
        lines.insert(0, "each rank has one channel here: its row is its total over channels")
    if lines:
        blocks.append(Lines(tuple(lines)))
    return blocks


def total_table(c: Collectives) -> Table | None:
    """Each rank over all its channels (:func:`~nsysmoe.measure.collectives.rank_totals`):
    "how long did this rank wait in all", where adding its channel rows would count time two
    channels share twice; None where no rank has two channels (its channel row is its total)."""
    t = c.rank_totals
    if t.is_empty() or int(t["channels"].max()) < 2:
        return None
    rows = tuple(
        (r["rank"], count(r["channels"]), count(r["instances"]), ms(r["wait_ns"]),
         ms(r["transfer_ns"]), ms(r["exposed_wait_ns"]), ms(r["exposed_transfer_ns"]),
         pct(r["imbalance_pct"]))
        for r in t.head(TOP_ROWS).iter_rows(named=True)
    )  # fmt: skip
    header = ("rank", "channels", "instances", "wait ms", "transfer ms", "exposed wait ms",
              "exposed transfer ms", "wait share")  # fmt: skip
    more = f" (first {TOP_ROWS} of {len(t)})" if len(t) > TOP_ROWS else ""
    title = ("Per rank, all channels together (each figure the union over the rank's channels: "
             f"time two channels share counts once){more}")  # fmt: skip
    return Table(title, header, rows, (False,) + (True,) * 7)


def unmatched_line(c: Collectives) -> str:
    """How many instances were left unmatched because launch counts differ, one named, and how
    many of them lie where a rank has some but not all of the launches between the same two
    neighbouring collectives (which of them it lacks is not told apart)."""
    first = c.incomplete.row(0, named=True)
    where = ", ".join(first["present_on"][:4]) + (" …" if len(first["present_on"]) > 4 else "")
    when = (f"of iteration {first['step']}" if first["step"] >= 0
            else "outside the iterations")  # fmt: skip
    line = (f"{len(c.incomplete):,} collective instances are not matched (launch counts differ "
            f"between ranks), e.g. {first['channel']} #{first['k']} {when}, on {where} "
            "only")  # fmt: skip
    unsure = c.incomplete.filter(pl.col("ambiguous_on").list.len() > 0)
    if not unsure.is_empty():
        ranks = sorted(set(unsure["ambiguous_on"].explode()))
        who = ", ".join(ranks[:4]) + (" …" if len(ranks) > 4 else "")
        line += (f"; {len(unsure):,} of them where {who} had some but not all of the launches "
                 "between the same two neighbouring collectives, which are not told apart (left "
                 "unmatched, not guessed)")  # fmt: skip
    return line + "; --format json lists them all"
