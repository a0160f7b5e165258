"""The headline every report opens with: at most 12 lines that answer the question — the
window, step time, exposed and hidden communication, per channel, the wall and (A/B) the
verdicts and the contract. Everything else follows it as detail.

One table (its title says what and over which window) and a few sentences, each under 100
characters, so it reads the same in a terminal, a PR comment and the HTML page.
"""

from __future__ import annotations

import os

from nsysmoe.renderers.cells import gpus_phrase, ms, pct, source_text, versus, window_phrase
from nsysmoe.renderers.document import Block, Lines, Table
from nsysmoe.results import Comparison, MetricRow, RanksAnalysis, RanksComparison, TraceAnalysis

#: channels shown in a headline (the most exposed first); the rest are in the channel table
CHANNELS = 3


def display_path(path: str) -> str:
    """A path as a report may show it: relative to the working directory when under it, else
    the file name (no absolute local path lands in a PR)."""
    rel = os.path.relpath(os.path.abspath(path))
    return os.path.basename(path) if rel.startswith("..") or os.path.isabs(rel) else rel


def shown_source(a: TraceAnalysis, *, name_only: bool = False) -> str:
    """The trace's source line (:func:`~nsysmoe.renderers.cells.source_text`) with its path as
    :func:`display_path` shows it, or only the file name."""
    return source_text(a).replace(
        a.path, os.path.basename(a.path) if name_only else display_path(a.path), 1)


def _top_channels(*analyses: TraceAnalysis) -> list[str]:
    exposed: dict[str, int] = {}
    for a in analyses:
        for r in a.channel_totals.iter_rows(named=True):
            exposed[r["channel"]] = max(exposed.get(r["channel"], 0), r["exposed_ns"] or 0)
    return sorted(exposed, key=lambda ch: -exposed[ch])[:CHANNELS]


def _channel(a: TraceAnalysis, ch: str) -> dict | None:
    rows = a.channel_totals.filter(a.channel_totals["channel"] == ch)
    return rows.row(0, named=True) if len(rows) else None


def _exposed_hidden(r: dict | None) -> str:
    return "–" if r is None else f"{ms(r['exposed_ns'])} ({pct(r['hidden_pct'])})"


def trace_headline(a: TraceAnalysis) -> list[Block]:
    """One trace: step time, exposed communication and how much was hidden, the channels, the
    idle time, and the wall."""
    t = a.totals
    span = t.span_ns or 0
    rows: list[tuple[str, ...]] = []
    if a.median_step_ns is not None:
        rows.append(("median step time", ms(a.median_step_ns), ""))
    rows.append(("exposed communication", ms(t.exposed_ns),
                 f"{pct(t.hidden_pct)} of {ms(t.comm_ns)} ms hidden"))  # fmt: skip
    for ch in _top_channels(a):
        r = _channel(a, ch)
        if r is not None:
            rows.append((f"  {ch} exposed", ms(r["exposed_ns"]), f"{pct(r['hidden_pct'])} hidden"))
    rows.append(("GPU idle", ms(t.idle_ns), f"{pct(100 * t.idle_ns / span) if span else '–'} "
                 "of span"))  # fmt: skip
    scope = f"{len(a.gpus)} GPUs" if len(a.gpus) > 1 else "1 GPU"
    # the window heads the first column: no title line above the table
    table = Table("", (f"{scope}, {window_phrase(a)}", "ms", ""), tuple(rows),
                  (False, True, False))  # fmt: skip
    w = a.wall
    return [table, Lines((f"Dominant wall: {w.wall} — {w.reason}",))]


def comparison_headline(c: Comparison) -> list[Block]:
    """An A/B: the judged metrics with their verdicts, the channels' exposed time and hidden
    share, then the walls, what the step-time change is made of, and the contract."""
    a, b = c.off.analysis, c.on.analysis
    verdict = {v.key: v.outcome for v in c.verdicts}
    caveat = "" if c.contract.matched else "?"  # a verdict over a broken contract is a question

    def judged(key: str, label: str) -> tuple[str, ...]:
        cells = _cells(c.row(key))
        return (label, *cells, verdict.get(key, "") + (caveat if key in verdict else ""))

    rows = [judged("step_time_ns", "median step time (ms)"),
            judged("exposed_ns", "exposed communication (ms)"),
            judged("hidden_pct", "communication hidden by compute")]  # fmt: skip
    for ch in _top_channels(a, b):
        ra, rb = _channel(a, ch), _channel(b, ch)
        delta = ("–" if ra is None or rb is None else
                 f"{(rb['exposed_ns'] - ra['exposed_ns']) / 1e6:+,.3f}")  # fmt: skip
        rows.append((f"  {ch} exposed (ms; hidden)", _exposed_hidden(ra), _exposed_hidden(rb),
                     delta, ""))  # fmt: skip
    window = window_phrase(a) if window_phrase(a) == window_phrase(b) else (
        f"{window_phrase(a)} / {window_phrase(b)}")  # fmt: skip
    status = "contract matched" if c.contract.matched else "contract NOT matched"
    title = f"{versus(c.off.name, c.on.name)}, {gpus_phrase(a)}, {window}; {status}"
    table = Table(title, ("", c.off.name, c.on.name, "Δ", "verdict"), tuple(rows),
                  (False, True, True, True, False))  # fmt: skip
    return [table, Lines(tuple(_after(c)))]


def _cells(r: MetricRow) -> tuple[str, str, str]:
    """Off, on and Δ of a judged row (ms, or % with Δ in points)."""
    if r.unit == "pct":
        return pct(r.off), pct(r.on), "–" if r.delta is None else f"{r.delta:+.2f} pp"
    return ms(r.off), ms(r.on), "–" if r.delta is None else f"{r.delta / 1e6:+,.3f}"


def _after(c: Comparison) -> list[str]:
    """Two lines: the walls with their evidence, and what the step-time change is made of (or,
    when the contract breaks, the warning instead)."""
    wa, wb = c.off.analysis.wall, c.on.analysis.wall
    ea, eb = wa.evidence, wb.evidence
    walls = "on both" if wa.wall == wb.wall else f"→ {wb.wall}"
    def share(e: dict, key: str) -> str:
        return "–" if e.get(key) is None else f"{e[key]:.1f} %"

    out = [f"Dominant wall: {wa.wall} {walls} (of span: exposed comm "
           f"{share(ea, 'exposed_comm_pct_of_span')} → {share(eb, 'exposed_comm_pct_of_span')}, "
           f"idle {share(ea, 'idle_pct_of_span')} → {share(eb, 'idle_pct_of_span')})"]
    if not c.contract.matched:
        names = ", ".join(dict.fromkeys(f.name for f in c.contract.failures))
        out.append(f"WARNING: contract NOT matched ({names} differ): the verdicts are questions")
        return out
    sc = c.step_change
    if sc.step_delta_ns is not None and sc.exposed_delta_ns is not None:
        line = (f"Step {sc.step_delta_ns / 1e6:+,.3f} ms: exposed comm "
                f"{sc.exposed_delta_ns / 1e6:+,.3f} ms per GPU")
        if sc.compute_delta_ns is not None:
            line += f", GEMM+attention {sc.compute_delta_ns / 1e6:+,.3f} ms (inflation"
            if sc.inflation_delta_ns is not None:
                line += f"; same kernels overlapped vs alone {sc.inflation_delta_ns / 1e6:+,.3f} ms"
            line += ")"
        out.append(line + " per iteration")
    return out


def run_headline(run: RanksAnalysis) -> list[Block]:
    """Many ranks of one run: the ranks' median step, exposed and hidden communication summed,
    the most exposed channels, and the straggler or the wall."""
    if not run.analyses:
        return []
    r = run.ranks
    exposed, comm = int(r["exposed_ns"].sum()), int(r["comm_ns"].sum())
    hidden = 100 * (comm - exposed) / comm if comm else None
    rows: list[tuple[str, ...]] = []
    steps = r["step_ns"].drop_nulls()
    if len(steps):
        rows.append(("median step time (over ranks)", ms(int(steps.median())),
                     f"{ms(int(steps.min()))}–{ms(int(steps.max()))} ms"))  # fmt: skip
    rows.append(("exposed communication (all ranks)", ms(exposed),
                 f"{pct(hidden)} of {ms(comm)} ms hidden"))  # fmt: skip
    for row in run.channel_totals.sort("exposed_ns", descending=True).head(CHANNELS).iter_rows(
            named=True):  # fmt: skip
        rows.append((f"  {row['channel']} exposed", ms(row["exposed_ns"]),
                     f"{pct(row['hidden_pct'])} hidden"))  # fmt: skip
    window = window_phrase(run.analyses[0])
    table = Table("", (f"{len(r)} ranks, {window}", "ms", ""), tuple(rows), (False, True, False))
    walls = {a.wall.wall for a in run.analyses}
    said = (f"Dominant wall: {walls.pop()} on every rank" if len(walls) == 1 else
            f"Dominant wall: differs across ranks ({', '.join(sorted(walls))})")  # fmt: skip
    if (s := run.stragglers.by_step_time) is not None:
        said += f"; straggler {s.rank} ({s.vs_median_pct:+.1f} % step)"
    return [table, Lines((said,))]


def runs_headline(rc: RanksComparison) -> list[Block]:
    """An A/B of two runs: the summed judged metrics with their verdicts."""
    if not rc.pairs:
        return []
    verdict = {v.key: v.outcome for v in rc.verdicts}
    caveat = "" if rc.matched else "?"
    rows = []
    for key, label in (("step_time_ns", "median step time (ms)"),
                       ("exposed_ns", "exposed communication (ms)"),
                       ("hidden_pct", "communication hidden by compute")):  # fmt: skip
        row = next((m for m in rc.rows if m.key == key), None)
        if row is None:
            continue
        said = verdict.get(key, "") + (caveat if key in verdict else "")
        rows.append((label, *_cells(row), said))
    status = "contract matched" if rc.matched else "contract NOT matched"
    windows = {window_phrase(side.analysis) for c in rc.pairs for side in (c.off, c.on)}
    window = windows.pop() if len(windows) == 1 else "windows differ per pair"
    title = f"{versus(*rc.labels)}, {len(rc.pairs)} rank pairs summed, {window}; {status}"
    return [Table(title, ("", *rc.labels, "Δ", "verdict"), tuple(rows),
                  (False, True, True, True, False))]  # fmt: skip
