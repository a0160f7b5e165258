"""Reports for many ranks: the per-rank table, the spread, stragglers, failures; and the summed
A/B of two runs."""

from __future__ import annotations

from collections.abc import Callable

from nsysmoe import __version__
from nsysmoe.compare.multi import RunComparison
from nsysmoe.multirank import RunAnalysis
from nsysmoe.render import markdown, terminal
from nsysmoe.render.comparison import metric_table
from nsysmoe.render.json import dumps
from nsysmoe.render.tables import Table, count, ms, pct

TOP_RANKS = 64


def rank_table(run: RunAnalysis) -> Table:
    header = ("rank (file:pid:device)", "kernels", "step ms", "comm ms", "hidden %",
              "exposed ms", "idle ms")  # fmt: skip
    rows = tuple(
        (r["rank"], count(r["kernels"]), ms(r["step_ns"]), ms(r["comm_ns"]), pct(r["hidden_pct"]),
         ms(r["exposed_ns"]), ms(r["idle_ns"]))
        for r in run.ranks.head(TOP_RANKS).iter_rows(named=True)
    )  # fmt: skip
    more = f" (first {TOP_RANKS} of {len(run.ranks)})" if len(run.ranks) > TOP_RANKS else ""
    return Table(f"Per rank{more}", header, rows, (False,) + (True,) * 6)


def spread_table(run: RunAnalysis) -> Table:
    def fmt(metric: str, v: float) -> str:
        return pct(v) if metric.endswith("pct") else ms(round(v))

    rows = tuple(
        (r["metric"], fmt(r["metric"], r["median"]), fmt(r["metric"], r["min"]), r["min_rank"],
         fmt(r["metric"], r["max"]), r["max_rank"])
        for r in run.spread.iter_rows(named=True)
    )  # fmt: skip
    header = ("metric (ms unless %)", "median", "min", "min rank", "max", "max rank")
    return Table("Across ranks", header, rows, (False, True, True, False, True, False))


def straggler_lines(run: RunAnalysis) -> list[str]:
    s = run.stragglers
    out = []
    if "by_step_time" in s:
        b = s["by_step_time"]
        out.append(f"straggler by step time: {b['rank']} ({ms(round(b['step_ns']))} ms, "
                   f"{b['vs_median_pct']:+.1f} % vs median)")  # fmt: skip
    if "by_comm_wait" in s:
        b = s["by_comm_wait"]
        wait = ms(round(b["others_wait_up_to_ns"]))
        out.append(
            f"straggler by communication wait: {b['rank']} has the least communication "
            f"({ms(round(b['comm_ns']))} ms); others wait up to {wait} ms more in collectives"
        )
    if len(run.ranks) < 2:
        return ["one rank: no straggler to find"]
    return out or ["no straggler: ranks agree"]


def failure_lines(failures) -> list[str]:  # noqa: ANN001
    return [f"FAILED {f.path}: {f.error}" for f in failures]


def _run_parts(run: RunAnalysis, fmt_table: Callable[[Table], str], quote: str) -> list[str]:
    head = f"{quote}{len(run.analyses)} traces, {len(run.ranks)} ranks"
    if run.analyses:
        head += f"; window: {run.analyses[0].window_text}"
    parts = [head]
    if run.analyses:
        parts += [fmt_table(rank_table(run)), fmt_table(spread_table(run)),
                  "\n".join(quote + line for line in straggler_lines(run))]  # fmt: skip
    if run.failures:
        parts.append("\n".join(quote + line for line in failure_lines(run.failures)))
    return parts


def render_run_terminal(run: RunAnalysis) -> str:
    return "\n\n".join(_run_parts(run, terminal.format_table, "")) + "\n"


def render_run_markdown(run: RunAnalysis) -> str:
    parts = _run_parts(run, markdown.format_table, "> ")
    return "### nsysmoe: many ranks\n\n" + "\n\n".join(parts) + "\n"


def render_run_json(run: RunAnalysis) -> str:
    doc = {"schema": "nsysmoe.run", "version": 1, "nsysmoe_version": __version__,
           **run.to_dict()}  # fmt: skip
    return dumps(doc)


def pair_table(rc: RunComparison) -> Table:
    rows = tuple(
        (f"{r['off']} ↔ {r['on']}", pct(r["hidden_pct_off"]), pct(r["hidden_pct_on"]),
         ms(r["exposed_ns_off"]), ms(r["exposed_ns_on"]), ms(r["step_ns_off"]),
         ms(r["step_ns_on"]), "ok" if r["matched"] else "DIFFERS")
        for r in rc.per_rank.iter_rows(named=True)
    )  # fmt: skip
    header = ("rank pair", "hidden % off", "on", "exposed ms off", "on", "step ms off", "on",
              "contract")  # fmt: skip
    return Table("Per rank pair", header, rows, (False,) + (True,) * 6 + (False,))


def _cmp_parts(rc: RunComparison, fmt_table: Callable[[Table], str], quote: str) -> list[str]:
    status = "matched" if rc.matched else "NOT matched"
    parts = [f"{quote}{len(rc.pairs)} rank pairs; measurement contract: {status}"]
    parts += [quote + "WARNING: " + n for n in rc.contract_notes]
    if rc.pairs:
        parts += [
            fmt_table(metric_table(rc.rows, rc.verdicts, scope="all ranks")),
            fmt_table(pair_table(rc)),
        ]
    if rc.failures:
        parts.append("\n".join(quote + line for line in failure_lines(rc.failures)))
    return parts


def render_runcmp_terminal(rc: RunComparison) -> str:
    return "\n\n".join(_cmp_parts(rc, terminal.format_table, "")) + "\n"


def render_runcmp_markdown(rc: RunComparison) -> str:
    parts = _cmp_parts(rc, markdown.format_table, "> ")
    return "### nsysmoe A/B: many ranks\n\n" + "\n\n".join(parts) + "\n"


def render_runcmp_json(rc: RunComparison) -> str:
    doc = {"schema": "nsysmoe.run_comparison", "version": 1, "nsysmoe_version": __version__,
           **rc.to_dict()}  # fmt: skip
    return dumps(doc)


RUN_RENDERERS = {"terminal": render_run_terminal, "markdown": render_run_markdown,
                 "json": render_run_json}  # fmt: skip
RUNCMP_RENDERERS = {"terminal": render_runcmp_terminal, "markdown": render_runcmp_markdown,
                    "json": render_runcmp_json}  # fmt: skip
