"""What a report says about a trace's critical path (:class:`~nsysmoe.results.CriticalPath`):
what bounds the step (one line under the headline), what each knob could buy (the what-if
replays, ranked), the largest segments of the path and the dependency graph's facts; in an A/B,
how the path's composition changed."""

from __future__ import annotations

from nsysmoe.renderers.cells import count, ms, pct
from nsysmoe.renderers.document import Block, Details, Lines, ReportOptions, Table
from nsysmoe.results import CriticalPath, WhatIf

#: categories the bound-by line names beside ``unexplained`` (always named)
BOUND_BY = 3
#: the width a segment's name is shortened to (kept distinct; ``--wide``: in full)
NAME_WIDTH = 60


def bound_by_line(cp: CriticalPath | None) -> str | None:
    """``Step bound by: gemm 33 %, ep.dispatch 12 %, ep.combine 11 %, unexplained 26 %``: the
    largest categories of the path, and the share no known dependency explains; None without a
    path."""
    if cp is None or not (shares := cp.shares()):
        return None
    top = [f"{c} {share:.0f} %" for c, share in shares if c != "unexplained"][:BOUND_BY]
    unexplained = cp.unexplained_pct or 0.0
    return (f"Step bound by: {', '.join(top + [f'unexplained {unexplained:.0f} %'])} "
            "(critical path)")


def what_if_table(cp: CriticalPath) -> Table:
    """The replays, best gain first: scenario, the knob it stands for, the predicted step and
    the gain, marked ≤ where it is an upper bound on what the knob can buy."""
    rows = tuple(_what_if_row(w) for w in cp.what_if)
    step = ms(round(cp.what_if[0].measured_step_ns)) if cp.what_if else "–"
    return Table(f"What would pay most: the dependency graph replayed with one change, its "
                 f"predicted step and gain (measured step {step} ms, the window's mean; ≤: an "
                 "upper bound on the knob's gain)",
                 ("scenario", "knob", "step ms", "gain ms", "gain %"), rows,
                 (False, False, True, True, True))  # fmt: skip


def _what_if_row(w: WhatIf) -> tuple[str, ...]:
    gain = f"{w.gain_ns / 1e6:+,.3f}"
    share = "–" if w.gain_pct is None else f"{w.gain_pct:+.2f} %"
    mark = "≤ " if w.bound else ""
    return (w.scenario, w.knob, ms(round(w.predicted_step_ns)), mark + gain, mark + share)


def top_table(cp: CriticalPath, options: ReportOptions | None = None) -> Table:
    """The path's largest segments over the window: category, name (a kernel, or what the
    host was doing), process, time on the path and how many segments."""
    names = (options or ReportOptions()).names(cp.top["name"].cast(str).to_list(), NAME_WIDTH)
    rows = tuple(
        (r["category"], name, str(r["pid"]), ms(r["ns"]), count(r["count"]))
        for name, r in zip(names, cp.top.iter_rows(named=True), strict=True)
    )  # fmt: skip
    return Table("Critical path: the largest segments (the window's iterations together)",
                 ("category", "name", "pid", "ms", "count"), rows,
                 (False, False, True, True, True))  # fmt: skip


def facts_line(cp: CriticalPath) -> str:
    """The dependency graph's facts: edges by kind, edges dropped, cross-stream waits no record
    was tied to, how closely the identity replay reproduced the steps, the unexplained share."""
    kept = ", ".join(f"{k} {count(n)}" for k, n in cp.edges.items() if n)
    absent = [k for k, n in cp.edges.items() if not n]
    edges = kept + (f" (none: {', '.join(absent)})" if absent else "")
    dropped = ", ".join(f"{k} {count(n)}" for k, n in cp.dropped.items() if n) or "none"
    return (f"Dependency graph: edges {edges or 'none'}; dropped (the times contradict them): "
            f"{dropped}; cross-stream waits no event record matched: "
            f"{count(cp.unmatched_waits)}; identity replay off the measured steps by "
            f"{pct(cp.replay_error_pct)} (median over iterations); unexplained "
            f"{pct(cp.unexplained_pct)} of the path")


def advice_blocks(cp: CriticalPath | None) -> list[Block]:
    """Next to the wall's knobs: the ranked replays (none without a path or a scenario)."""
    return [what_if_table(cp)] if cp is not None and cp.what_if else []


def detail_blocks(cp: CriticalPath | None, options: ReportOptions | None = None) -> list[Block]:
    """The folded detail: the largest segments and the graph's facts."""
    if cp is None:
        return []
    inner: list[Block] = [top_table(cp, options)] if not cp.top.is_empty() else []
    return [Details("Critical path", (*inner, Lines((facts_line(cp),))))]


def composition_table(off: CriticalPath, on: CriticalPath,
                      labels: tuple[str, str] = ("off", "on")) -> Table:  # fmt: skip
    """An A/B: each category's share of the path on either side and the change in points,
    largest share first."""
    a, b = dict(off.shares()), dict(on.shares())
    cats = sorted(a.keys() | b.keys(), key=lambda c: (-max(a.get(c, 0.0), b.get(c, 0.0)), c))
    rows = tuple((c, pct(a.get(c, 0.0)), pct(b.get(c, 0.0)),
                  f"{b.get(c, 0.0) - a.get(c, 0.0):+.2f} pp") for c in cats)  # fmt: skip
    return Table("What bounds the step: the critical path's composition (% of the path)",
                 ("category", f"{labels[0]} %", f"{labels[1]} %", "change"), rows,
                 (False, True, True, True))  # fmt: skip
