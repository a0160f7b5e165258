"""What a report says about collectives matched across ranks (:class:`~nsysmoe.results.
Collectives`): the clock each rank was put on, wait vs transfer per rank and channel, and the rank
everyone waits for."""

from __future__ import annotations

from nsysmoe.renderers.cells import count, ms, pct
from nsysmoe.renderers.document import Block, Lines, Table
from nsysmoe.results import Collectives

TOP_ROWS = 64


def collective_blocks(c: Collectives) -> list[Block]:
    """The wait/transfer table and the straggler and clock lines; none when nothing matched."""
    if not c.matched:
        return []
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
        first = c.incomplete.row(0, named=True)
        where = ", ".join(first["present_on"][:4])
        lines.append(f"{len(c.incomplete)} collective instances are missing on some ranks "
                     f"(launch counts differ) and are not matched, e.g. {first['channel']} "
                     f"#{first['k']} of iteration {first['step']} only on {where}; "
                     "--format json lists them all")  # fmt: skip
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
    if lines:
        blocks.append(Lines(tuple(lines)))
    return blocks
