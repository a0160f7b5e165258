"""The A/B report: the side-by-side table, the window, contract, verdicts, top changes."""

from __future__ import annotations

from collections.abc import Sequence

from nsysmoe.renderers.cells import (
    RANK_FIGURES,
    count,
    gpus_phrase,
    ms,
    pct,
    shorten,
    versus,
    warmup_hint,
)
from nsysmoe.renderers.document import (
    Block,
    Details,
    Document,
    Heading,
    Lines,
    ReportOptions,
    Table,
)  # fmt: skip
from nsysmoe.renderers.report.critical_path import composition_table
from nsysmoe.renderers.report.graphs import graph_lines
from nsysmoe.renderers.report.headline import comparison_headline, shown_source
from nsysmoe.renderers.report.trace import caveat_lines, iteration_table, notes
from nsysmoe.results import PCT_BASE_SHARE, Comparison, MetricRow, Verdict


def value(row: MetricRow, v: float | int | None) -> str:
    if row.unit == "pct":
        return pct(v)
    return count(v) if row.unit == "count" else ms(v)


def delta(row: MetricRow) -> tuple[str, str]:
    d = row.delta
    if d is None:
        return "–", "–"
    if row.unit == "pct":
        return f"{d:+.2f} pp", "–"
    text = f"{d:+,}" if row.unit == "count" else f"{d / 1e6:+,.3f}"
    return text, "–" if row.delta_pct is None else f"{row.delta_pct:+.1f} %"


def metric_table(
    rows: Sequence[MetricRow], verdicts: Sequence[Verdict], *, scope: str = "all GPUs",
    labels: tuple[str, str] = ("off", "on"),
) -> Table:
    """Off / on / Δ / Δ % / verdict per metric row (one A/B, or the sum over rank pairs)."""
    outcome = {v.key: v.outcome for v in verdicts}
    units = {"ns": " (ms)", "pct": "", "count": ""}
    cells = tuple(
        (r.label + units[r.unit], value(r, r.off), value(r, r.on), *delta(r),
         outcome.get(r.key, ""))
        for r in rows
    )  # fmt: skip
    header = (f"metric ({scope})", *labels, "Δ", "Δ %", "verdict")
    return Table(f"{versus(*labels)}, {scope}{floor_note(rows, labels[0])}", header, cells,
                 (False, True, True, True, True, False))  # fmt: skip


def floor_note(rows: Sequence[MetricRow], off: str) -> str:
    """Why a Δ % is left out (–) where the base is a sliver of the window, said once."""
    floors = {r.pct_floor for r in rows if r.pct_floored and r.delta is not None}
    if not floors:
        return ""
    floor = max(f for f in floors if f is not None)
    return (f"; Δ % where the base is at least {PCT_BASE_SHARE:g} % of {off}'s GPU-active time "
            f"({ms(floor)} ms)")


#: how each contract role reads in a report
ROLE_TEXT = {"same": "ok", "variable": "variable under test", "consequence": "expected",
             "incidental": "incidental", "unexpected": "DIFFERS"}  # fmt: skip


def contract_table(c: Comparison) -> Table:
    """Every clause and every difference, each marked: ok, the variable under test, an
    expected consequence of it, incidental, or DIFFERS (unexpected: breaks the contract)."""
    rows = tuple(
        (ch.name, shorten(ch.off, 40), shorten(ch.on, 40), ROLE_TEXT[ch.role],
         shorten(ch.detail, 110))
        for ch in c.contract.checks
    )  # fmt: skip
    title = "Measurement contract: " + ("matched" if c.contract.matched else "NOT matched")
    if c.contract.variables:
        title += "; variable under test: " + ", ".join(v.key for v in c.contract.variables)
    return Table(title, ("check", c.off.name, c.on.name, "", "detail"), rows, (False,) * 5)


def rank_line(c: Comparison) -> str:
    """Under ``--rank``, which process of each side every figure is of ("" without it)."""
    shown = [(side.name, side.analysis.rank) for side in (c.off, c.on)]
    said = [f"{name} pid {r.pid}" for name, r in shown if r is not None]
    if not said:
        return ""
    asked = next(r.rank for _, r in shown if r is not None)
    return f"rank {asked} only: {', '.join(said)}; {RANK_FIGURES.format('that')}"


def contract_lines(c: Comparison) -> list[str]:
    """How the variable under test was found (or how to declare one), and the warning."""
    out = [c.contract.note] if c.contract.note else []
    if not c.contract.matched:
        out.append(f"WARNING: {c.contract.summary()}")
    return out


def verdict_lines(c: Comparison) -> list[str]:
    caveat = "" if c.contract.matched else " [contract not matched]"
    out = []
    for v in c.verdicts:
        change = "n/a" if v.change is None else f"{v.change:+.2f} {v.unit}"
        if v.base_ns is not None and v.change is not None:  # the base was below its floor
            change += f" of {ms(v.base_ns)} ms, the floor the base was below"
        out.append(f"{v.label}: {v.outcome}{caveat} ({change}; noise floor ±{v.noise:.2f} "
                   f"{v.unit}, {v.noise_source})")  # fmt: skip
    return out


def step_change_lines(c: Comparison) -> list[str]:
    """What the step-time change is made of, and each side's wall."""
    sc, out = c.step_change, []
    if sc.step_delta_ns is not None and sc.exposed_delta_ns is not None:
        line = (f"Step time {sc.step_delta_ns / 1e6:+,.3f} ms per iteration; exposed "
                f"communication {sc.exposed_delta_ns / 1e6:+,.3f} ms per iteration per GPU")
        if sc.explained_pct is not None:
            line += f" ({sc.explained_pct:.0f} % of the step-time change)"
        if sc.compute_delta_ns is not None:
            line += (f"; beside it GEMM + attention kernels {sc.compute_delta_ns / 1e6:+,.3f} ms "
                     "per iteration per GPU (compute inflation: hidden communication shares SMs")
            if sc.inflation_delta_ns is not None:
                extra = sc.inflation_delta_ns / 1e6
                line += f"; the same kernels, name and grid, overlapped vs alone {extra:+,.3f} ms"
            line += ")"
        out.append(line)
    wa, wb = c.off.analysis.wall, c.on.analysis.wall
    change = "unchanged" if wa.wall == wb.wall else "changed"
    out.append(f"Dominant wall {change}: {c.off.name} {wa.wall} ({wa.reason}); {c.on.name} "
               f"{wb.wall} ({wb.reason})")
    return out


def per_gpu_table(c: Comparison) -> Table:
    """GPUs paired by position (pids differ between runs)."""
    rows = tuple(
        (str(r["gpu"]), f"{r['pid_off']}:{r['device_off']} ↔ {r['pid_on']}:{r['device_on']}",
         pct(r["hidden_pct_off"]), pct(r["hidden_pct_on"]), ms(r["exposed_ns_off"]),
         ms(r["exposed_ns_on"]), ms(r["comm_gemm_attn_ns_off"]), ms(r["comm_gemm_attn_ns_on"]))
        for r in c.per_gpu.iter_rows(named=True)
    )  # fmt: skip
    off, on = c.off.name, c.on.name
    header = ("#", f"pid:device {off} ↔ {on}", f"hidden % {off}", on, f"exposed ms {off}", on,
              f"comm∩GEMM/attn ms {off}", on)  # fmt: skip
    return Table("Per GPU", header, rows, (False, False) + (True,) * 6)


def kernel_change_table(c: Comparison, options: ReportOptions | None = None) -> Table:
    names = (options or ReportOptions()).names(c.kernel_changes["name"].to_list(), 80)
    rows = tuple(
        (name, r["class"], count(r["count_off"]), count(r["count_on"]),
         ms(r["sum_ns_off"]), ms(r["sum_ns_on"]), f"{r['delta_ns'] / 1e6:+,.3f}")
        for name, r in zip(names, c.kernel_changes.iter_rows(named=True), strict=True)
    )  # fmt: skip
    off, on = c.off.name, c.on.name
    header = ("kernel", "class", f"n {off}", f"n {on}", f"sum {off} ms", f"sum {on} ms", "Δ ms")
    return Table("Top kernel changes (sum of durations)", header, rows,
                 (False, False) + (True,) * 5)  # fmt: skip


def nvtx_change_table(c: Comparison) -> Table:
    rows = tuple(
        (shorten(r["name"], 80), count(r["count_off"]), count(r["count_on"]),
         ms(r["total_ns_off"]), ms(r["total_ns_on"]), f"{r['delta_ns'] / 1e6:+,.3f}")
        for r in c.nvtx_changes.iter_rows(named=True)
    )  # fmt: skip
    off, on = c.off.name, c.on.name
    header = ("NVTX range (CPU side, normalised)", f"n {off}", f"n {on}", f"{off} ms",
              f"{on} ms", "Δ ms")  # fmt: skip
    return Table("Top NVTX range changes", header, rows, (False,) + (True,) * 5)


#: CPU-side NVTX rows an A/B shows by default (the largest changes); GPU-busy phase rows are
#: always shown; ``--all-nvtx`` (or the JSON) has every row
TOP_NVTX_ROWS = 5


def shown_rows(rows: Sequence[MetricRow], all_nvtx: bool = False) -> tuple[MetricRow, ...]:
    """The metric rows of the full table: every row but CPU-side NVTX rows beyond the
    :data:`TOP_NVTX_ROWS` largest changes (unless ``all_nvtx``)."""
    if all_nvtx:
        return tuple(rows)
    cpu = [r for r in rows if r.key.startswith("nvtx:")]
    top = {r.key for r in sorted(cpu, key=lambda r: -abs(r.delta or 0))[:TOP_NVTX_ROWS]}
    return tuple(r for r in rows if not r.key.startswith("nvtx:") or r.key in top)


def document(c: Comparison, options: ReportOptions | None = None) -> Document:
    """The headline (:mod:`~nsysmoe.renderers.report.headline`), then the sources and windows,
    every metric, the verdicts' noise floors, the contract, and the folded detail."""
    options = options or ReportOptions()
    a, b = c.off.analysis, c.on.analysis
    off, on = c.off.name, c.on.name
    window_a, window_b = a.window_choice.description, b.window_choice.description
    width = max(len(off), len(on)) + 1
    head = (
        f"{off + ':':<{width}} {shown_source(a)}",
        f"{on + ':':<{width}} {shown_source(b)}",
        f"window: {off} {window_a}" + ("" if window_a == window_b else f"; {on} {window_b}"),
        f"dispatcher: {off} {c.off.dispatcher}; {on} {c.on.dispatcher}",
    )
    caveats = [line for side in (c.off, c.on)
               for line in caveat_lines(side.analysis, f"{side.name}: ")]  # fmt: skip
    ranks = rank_line(c)
    blocks: list[Block] = [
        Heading(f"nsysmoe A/B: {versus(off, on)}"),
        *([Lines((ranks,))] if ranks else []),
        *([Lines(tuple(caveats))] if caveats else []),
        *comparison_headline(c),
        Lines(head),
    ]
    rows = shown_rows(c.rows, options.all_nvtx)
    table = metric_table(rows, c.verdicts, labels=(off, on), scope=gpus_phrase(a))
    if len(rows) < len(c.rows):
        more = len(c.rows) - len(rows)
        table = Table(f"{table.title} ({more} more CPU-side NVTX rows: --all-nvtx or --format "
                      "json)", table.header, table.rows, table.right)  # fmt: skip
    blocks += [table, Lines(tuple(verdict_lines(c))), Lines(tuple(step_change_lines(c)))]
    if a.critical_path is not None and b.critical_path is not None:
        blocks.append(composition_table(a.critical_path, b.critical_path, (off, on)))
    blocks.append(contract_table(c))
    if lines := contract_lines(c):
        blocks.append(Lines(tuple(lines)))
    hints = tuple(f"{label}: {h}" for label, side in ((off, a), (on, b))
                  for h in warmup_hint(side))  # fmt: skip
    if hints:
        blocks.append(Lines(hints))
    graphs = tuple(line for label, side in ((off, a), (on, b))
                   for line in graph_lines(side.graphs, side.totals.active_ns, f"{label}: "))
    if graphs:
        blocks.append(Lines(graphs))
    if len(c.per_gpu) > 1:
        blocks.append(per_gpu_table(c))
    side_notes = tuple(f"{label}: {n}" for label, side in ((off, a), (on, b))
                       for n in notes(side) if not n.startswith("hint:"))  # fmt: skip
    if side_notes:
        blocks.append(Lines(side_notes, style="notes"))
    blocks += [kernel_change_table(c, options), nvtx_change_table(c)]
    iterations = [Table(f"{t.title} — {name}", t.header, t.rows, t.right)
                  for name, side in ((off, a), (on, b)) if not side.iterations.is_empty()
                  for t in (iteration_table(side),)]  # fmt: skip
    if iterations:
        blocks.append(Details("Per iteration", tuple(iterations)))
    return Document(tuple(blocks))
