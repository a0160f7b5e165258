"""Reports for many ranks: the per-rank table, the spread, stragglers, failures; and the summed
A/B of two runs."""

from __future__ import annotations

from collections.abc import Sequence

from nsysmoe.renderers.cells import count, ms, pct, versus
from nsysmoe.renderers.document import Block, Document, Heading, Lines, Table
from nsysmoe.renderers.report.collectives import collective_blocks
from nsysmoe.renderers.report.comparison import metric_table
from nsysmoe.renderers.report.graphs import graph_lines
from nsysmoe.renderers.report.headline import run_headline, runs_headline
from nsysmoe.renderers.report.trace import CHANNEL_HEADER, channel_cells
from nsysmoe.results import Failure, RanksAnalysis, RanksComparison

TOP_RANKS = 64


def rank_table(run: RanksAnalysis) -> Table:
    header = ("rank (file:pid:device)", "kernels", "iterations", "step ms", "comm ms", "hidden %",
              "exposed ms", "idle ms")  # fmt: skip
    rows = tuple(
        (r["rank"], count(r["kernels"]), count(r["iterations"]), ms(r["step_ns"]),
         ms(r["comm_ns"]), pct(r["hidden_pct"]), ms(r["exposed_ns"]), ms(r["idle_ns"]))
        for r in run.ranks.head(TOP_RANKS).iter_rows(named=True)
    )  # fmt: skip
    more = f" (first {TOP_RANKS} of {len(run.ranks)})" if len(run.ranks) > TOP_RANKS else ""
    return Table(f"Per rank{more}", header, rows, (False,) + (True,) * 7)


def metric_label(metric: str) -> str:
    """A spread metric as a report names it: its unit is the one its cells show (``exposed_ns``
    → "exposed ms", ``hidden_pct`` → "hidden %"); the JSON keeps the key and the ns."""
    for suffix, unit in (("_ns", "ms"), ("_pct", "%")):
        if metric.endswith(suffix):
            return f"{metric.removesuffix(suffix).replace('_', ' ')} {unit}"
    return metric


def spread_table(run: RanksAnalysis) -> Table:
    def fmt(metric: str, v: float) -> str:
        return pct(v) if metric.endswith("pct") else ms(round(v))

    rows = tuple(
        (metric_label(r["metric"]), fmt(r["metric"], r["median"]), fmt(r["metric"], r["min"]),
         r["min_rank"], fmt(r["metric"], r["max"]), r["max_rank"])
        for r in run.spread.iter_rows(named=True)
    )  # fmt: skip
    header = ("metric", "median", "min", "min rank", "max", "max rank")
    return Table("Across ranks", header, rows, (False, True, True, False, True, False))


def steps_text(steps: Sequence[int], most: int = 6) -> str:
    """Step numbers as ranges: ``0–3, 7, 9–11`` (the first ``most`` ranges, then "…")."""
    runs: list[list[int]] = []
    for n in sorted(steps):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [str(a) if a == b else f"{a}–{b}" for a, b in runs]
    return ", ".join(parts[:most]) + (", …" if len(parts) > most else "")


def missing_lines(run: RanksAnalysis) -> list[str]:
    """Ranks lacking iterations others have, said where the table would hide it."""
    out = []
    for m in run.missing_iterations:
        shown = ", ".join(m.ranks[:3]) + (f" and {len(m.ranks) - 3} more" if len(m.ranks) > 3
                                          else "")  # fmt: skip
        one = len(m.ranks) == 1
        what = (f"{'has' if one else 'have'} none of the {m.of} iterations other ranks have"
                if not m.has else
                f"{'lacks' if one else 'lack'} {len(m.missing)} of the {m.of} iterations other "
                f"ranks have ({steps_text(m.missing)})")  # fmt: skip
        out.append(f"iterations missing: {shown} {what}")
    if out:
        out.append("  a rank's step and per-iteration figures cover only the iterations it has")
    return out


def channel_table(run: RanksAnalysis) -> Table:
    totals = run.channel_totals.iter_rows(named=True)
    rows = tuple((r["channel"], *channel_cells(r)) for r in totals)
    return Table("Communication by channel, all ranks", ("channel", *CHANNEL_HEADER), rows,
                 (False,) + (True,) * len(CHANNEL_HEADER))  # fmt: skip


def straggler_lines(run: RanksAnalysis) -> list[str]:
    out = []
    if (step := run.stragglers.by_step_time) is not None:
        out.append(f"straggler by step time: {step.rank} ({ms(round(step.step_ns))} ms, "
                   f"{step.vs_median_pct:+.1f} % vs median)")  # fmt: skip
    if (wait := run.stragglers.by_comm_wait) is not None:
        out.append(
            f"straggler by communication wait: {wait.rank} has the least communication "
            f"({ms(round(wait.comm_ns))} ms); others wait up to "
            f"{ms(round(wait.others_wait_up_to_ns))} ms more in collectives"
        )
    if len(run.ranks) < 2:
        return ["one rank: no straggler to find"]
    return out or ["no straggler: ranks agree"]


def failure_lines(failures: Sequence[Failure]) -> tuple[str, ...]:
    return tuple(f"FAILED {f.path}: {f.error}" for f in failures)


def document(run: RanksAnalysis) -> Document:
    head = f"{len(run.analyses)} traces, {len(run.ranks)} ranks"
    if run.analyses:
        head += f"; window: {run.analyses[0].window_choice.description}"
    blocks: list[Block] = [Heading("nsysmoe: many ranks"), *run_headline(run), Lines((head,))]
    if run.analyses:
        blocks.append(rank_table(run))
        if missing := missing_lines(run):
            blocks.append(Lines(tuple(missing)))
        blocks += [spread_table(run), Lines(tuple(straggler_lines(run)))]
        if not run.channel_totals.is_empty():
            blocks.append(channel_table(run))
        blocks += collective_blocks(run.collectives)
        active = sum(a.totals.active_ns for a in run.analyses)
        if graphs := graph_lines(run.graphs, active, "all ranks: "):
            blocks.append(Lines(tuple(graphs)))
    if run.failures:
        blocks.append(Lines(failure_lines(run.failures)))
    return Document(tuple(blocks))


def pair_table(rc: RanksComparison) -> Table:
    rows = tuple(
        (f"{r['off']} ↔ {r['on']}", pct(r["hidden_pct_off"]), pct(r["hidden_pct_on"]),
         ms(r["exposed_ns_off"]), ms(r["exposed_ns_on"]), ms(r["step_ns_off"]),
         ms(r["step_ns_on"]), "ok" if r["matched"] else "DIFFERS")
        for r in rc.per_rank.iter_rows(named=True)
    )  # fmt: skip
    off, on = rc.labels
    header = ("rank pair", f"hidden % {off}", on, f"exposed ms {off}", on, f"step ms {off}", on,
              "contract")  # fmt: skip
    return Table("Per rank pair", header, rows, (False,) + (True,) * 6 + (False,))


def comparison_document(rc: RanksComparison) -> Document:
    status = "matched" if rc.matched else "NOT matched"
    blocks: list[Block] = [
        Heading(f"nsysmoe A/B: many ranks, {versus(*rc.labels)}"),
        *runs_headline(rc),
        Lines((f"{len(rc.pairs)} rank pairs; measurement contract: {status}",)),
    ]
    blocks += [Lines(("WARNING: " + n,)) for n in rc.contract_notes]
    if rc.pairs:
        blocks += [metric_table(rc.rows, rc.verdicts, scope="all ranks", labels=rc.labels),
                   pair_table(rc)]  # fmt: skip
        for label, c in zip(rc.labels, (rc.collectives_off, rc.collectives_on), strict=True):
            for b in collective_blocks(c):
                blocks.append(b if isinstance(b, Lines) else
                              Table(f"{label}: {b.title}", b.header, b.rows, b.right))
    if rc.failures:
        blocks.append(Lines(failure_lines(rc.failures)))
    return Document(tuple(blocks))
