"""The report of a sweep (:class:`~nsysmoe.sweeps.Sweep`): the contract across every setting,
then one table — per setting the step time and its change against the base, the step split into
compute, exposed communication and idle, hidden %, the SMs communication held, the compute
inflation — the best marked, then exposed communication per channel and each setting's
contract rows that are not "ok". Labels and paths are plain text; each format escapes them."""

from __future__ import annotations

from nsysmoe.renderers.cells import ms, pct
from nsysmoe.renderers.document import Block, Details, Document, Heading, Lines, Table
from nsysmoe.renderers.report.comparison import ROLE_TEXT
from nsysmoe.sweeps import Sweep

#: the channels whose SMs the table shows (the dispatcher's), in this order
SM_COLUMNS = ("ep.dispatch", "ep.combine")


def _ms(v: float | None) -> str:
    return "–" if v is None else ms(round(v))


def document(s: Sweep) -> Document:
    title = f"nsysmoe sweep: {s.knob}, {len(s.runs)} settings"
    blocks: list[Block] = [Heading(title, terminal=title)]
    blocks.append(Lines(tuple(contract_lines(s))))
    blocks.append(settings_table(s))
    best = best_line(s)
    blocks.append(Lines(tuple(ladder_lines(s)) + ((best,) if best else ())))
    blocks.append(Details("Exposed communication per channel (ms per iteration per GPU)",
                          (channel_table(s),)))  # fmt: skip
    blocks += differences(s)
    blocks.append(Lines(tuple(path_lines(s)), style="notes"))
    return Document(tuple(blocks))


def path_lines(s: Sweep) -> list[str]:
    """Each setting's export, or its run's folder and rank files."""
    lines = []
    for r in s.settings.iter_rows(named=True):
        files = r["files"]
        ranks = "" if files == 1 else (f" ({files} rank files; each iteration the median of "
                                       "their processes' steps, over the iterations all hold)")
        lines.append(f"{r['label']}: {r['path']}{ranks}")
    return lines


def contract_lines(s: Sweep) -> list[str]:
    if s.matched:
        return [f"contract matched: every setting against {s.labels[0]}, only {s.knob} differs"]
    pairs = zip(s.labels[1:], s.contracts, strict=True)
    broken = [f"{label} ({c.summary()})" for label, c in pairs if not c.matched]
    return [f"WARNING: contract NOT matched: {'; '.join(broken)}: the comparison is a question, "
            "not a verdict"]


def settings_table(s: Sweep) -> Table:
    prefix = f"{s.knob}="
    short = all(label.startswith(prefix) for label in s.labels)
    header = ("setting", "step ms", "vs base", "compute", "exposed", "idle", "hidden %",
              "SMs held", "comm SMs", "inflation")  # fmt: skip
    rows = []
    for i, r in enumerate(s.settings.iter_rows(named=True)):
        held = "/".join("–" if s.sms_held[i].get(c) is None else str(s.sms_held[i][c])
                        for c in SM_COLUMNS)  # fmt: skip
        label = r["label"][len(prefix):] if short else r["label"]
        rows.append((f"{label} (best)" if r["best"] else label, _ms(r["median_step_ns"]),
                     "base" if i == 0 else _change(s, i), _ms(r["compute_ns"]),
                     _ms(r["exposed_ns"]), _ms(r["idle_ns"]), pct(r["hidden_pct"]), held,
                     "–" if r["comm_sms_avg"] is None else f"{r['comm_sms_avg']:.1f}",
                     _ms(r["inflation_extra_ns"])))  # fmt: skip
    title = ("Settings (ms per iteration per GPU; SMs held: by the dispatch/combine kernels; "
             "comm SMs: held on average while communication ran; inflation: compute "
             "overlapped vs alone)")  # fmt: skip
    return Table(title, header, tuple(rows), (False,) + (True,) * (len(header) - 1))


def _change(s: Sweep, i: int) -> str:
    pct = s.ladder.vs_base[i - 1].median_step_pct
    return "–" if pct is None else f"{pct:+.1f} %"


def ladder_lines(s: Sweep) -> list[str]:
    """Each setting's change against the base, as the logs' ladder words it."""
    return [f"{label} vs {s.labels[0]}: {c.sentence}"
            for label, c in zip(s.labels[1:], s.ladder.vs_base, strict=True)]  # fmt: skip


def best_line(s: Sweep) -> str | None:
    if s.best is None:
        return None
    r = s.settings.row(s.best, named=True)
    line = f"Best: {r['label']}, median step {_ms(r['median_step_ns'])} ms"
    if not s.matched:
        line += "; the contract is not matched, so this ranks settings that differ in more"
    return line + "."


def channel_table(s: Sweep) -> Table:
    channels = list(dict.fromkeys(c for e in s.exposed for c in e))
    rows = tuple((label, *(_ms(e.get(c)) for c in channels))
                 for label, e in zip(s.labels, s.exposed, strict=True))  # fmt: skip
    return Table("Exposed communication per channel", ("setting", *channels), rows,
                 (False,) + (True,) * len(channels))  # fmt: skip


def differences(s: Sweep) -> list[Block]:
    """Each setting's contract rows against the base that are not "ok"."""
    rows = tuple((label, ch.name, ch.off, ch.on, ROLE_TEXT[ch.role], ch.detail)
                 for label, c in zip(s.labels[1:], s.contracts, strict=True)
                 for ch in c.checks if ch.role not in ("same", "variable"))  # fmt: skip
    if not rows:
        return []
    table = Table(f"Contract against {s.labels[0]}: what differs",
                  ("setting", "check", s.labels[0], "setting's", "", "detail"), rows,
                  (False,) * 6)  # fmt: skip
    return [Details("Contract, setting by setting", (table,))]
