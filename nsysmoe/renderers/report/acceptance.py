"""The acceptance report: what the unprofiled training logs say, verdict first.

``nsysmoe steps LOG...`` (:func:`document`): the verdict (one log: its median step with the
mean's CI and grade; an A/B or a ladder: the last rung's accepted change), the per-side table,
each change's sentence, health, then where the numbers came from. An A/B of traces with its
logs (:func:`bundle`) is the seeds' evidence bundle in their order: the accepted verdict, the
change, proof it ran, the unprofiled step time and TFLOPS, health, the matched profile.
Every label, path, argument and note is plain text here; each format escapes it.
"""

from __future__ import annotations

from nsysmoe.acceptance import (
    ACCEPT_MIN_RUN,
    SCREEN_MIN_STEPS,
    Acceptance,
    AcceptanceSide,
    AcceptedComparison,
    Change,
)
from nsysmoe.model import iterations_phrase
from nsysmoe.renderers.cells import pct, plural, shorten, versus
from nsysmoe.renderers.document import (
    Block,
    Document,
    Heading,
    Lines,
    Section,
    Table,
    nested,
)
from nsysmoe.renderers.names import distinct_tails
from nsysmoe.renderers.report.comparison import ROLE_TEXT
from nsysmoe.renderers.report.headline import display_path
from nsysmoe.results import Comparison

#: the widest line a report writes (terminal, Markdown heading): under 100 columns
WIDTH = 99
#: bytes per GiB: peak memory is shown in GiB (JSON keeps the bytes)
GIB = 2**30
#: the evidence bundle's sections, in the seeds' order
SECTIONS = ("1 The change", "2 Proof it ran", "3 Unprofiled step time and TFLOPS", "4 Health",
            "5 Matched profile evidence")  # fmt: skip


def seconds_ms(s: float | None) -> str:
    """Seconds as milliseconds with µs precision, as every nsysmoe step time."""
    return "–" if s is None else f"{s * 1e3:,.3f}"


def number(v: float | None, unit: str = "") -> str:
    return "–" if v is None else f"{v:,.3f}{unit}"


def signed(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1f} %"


def gib(b: int | None) -> str:
    return "–" if b is None else f"{b / GIB:,.3f} GiB"


def _ci_ms(ci: tuple[float, float] | None) -> str:
    return "–" if ci is None else f"{seconds_ms(ci[0])} … {seconds_ms(ci[1])}"


def _fit(label: str, rest: str, width: int | None) -> str:
    """``label: rest`` within ``width`` columns, the label cut first (None: whole, where the
    text wraps: a Markdown or HTML heading, a page's title)."""
    if width is None:
        return f"{label}: {rest}"
    return f"{shorten(label, max(8, width - len(rest) - 2))}: {rest}"


# --- the verdict ---------------------------------------------------------------------------------

#: how the headline opens for each verdict, and what follows the window
_OPENING = {"accepted improvement": ("Accepted", "improvement"),
            "accepted regression": ("Accepted", "regression"),
            "screened improvement": ("Screened, not accepted", "improvement"),
            "screened regression": ("Screened, not accepted", "regression")}  # fmt: skip


def windows_phrase(sides: tuple[AcceptanceSide, ...]) -> str:
    """The sides' windows in a few words: "iterations 3–60, 58 steps" when they agree, else
    each side's, in order, parted by " / " ("iterations 10–50 / 5–50, 9 / 46 steps")."""
    spans = [iterations_phrase(s.window.first, s.window.last) for s in sides]
    steps = [f"{s.window.steps:,}" for s in sides]
    if len(set(spans)) > 1 and all(x.startswith("iterations ") for x in spans):
        spans = ["iterations " + " / ".join(x.removeprefix("iterations ") for x in spans)]
    def said(xs: list[str]) -> str:
        return xs[0] if len(set(xs)) == 1 else " / ".join(xs)

    return f"{said(spans)}, {said(steps)} step" + ("" if set(steps) == {"1"} else "s")


def change_verdict(acc: Acceptance, c: Change, width: int | None = WIDTH) -> str:
    """A change as the first line says it: "Accepted (unprofiled, iterations 3–60, 58 steps):
    improvement -6.2 % step time"; a screen or no change says it is not accepted. A ladder's
    line names its rung. Past ``width`` columns (the terminal's line; None: no limit) a
    change not accepted says its verdict and figure without the CI."""
    window = windows_phrase((acc.sides[c.base], acc.sides[c.to]))
    rung = "" if len(acc.sides) < 3 else (
        f", {acc.sides[c.base].label} → {acc.sides[c.to].label}")  # fmt: skip
    if c.verdict in _OPENING and c.median_step_pct is not None:
        opening, what = _OPENING[c.verdict]
        return (f"{opening} (unprofiled, {window}): {what} {c.median_step_pct:+.1f} % step "
                f"time{rung}")  # fmt: skip
    why = f" (a window needs {SCREEN_MIN_STEPS} steps)" if c.verdict == "too few steps" else ""
    line = f"Not accepted (unprofiled, {window}): {c.sentence}{why}{rung}"
    if width is not None and len(line) > width and c.median_step_pct is not None:
        line = f"Not accepted (unprofiled, {window}): {c.verdict} ({c.median_step_pct:+.1f} %)"
    return line


def side_verdict(s: AcceptanceSide, width: int | None = WIDTH) -> str:
    """One log's first line: its median step with the mean's 95 % CI, and its grade; the label
    cut to fit ``width`` columns (None: whole)."""
    if s.median_step_s is None and s.median_tokens_per_s is not None:
        rest = (f"median {number(s.median_tokens_per_s)} tokens/s/GPU (no step time logged); "
                f"{s.window.grade}")  # fmt: skip
    else:
        ci = s.ci95_mean_step_s
        spread = "" if ci is None else f", 95 % CI {_ci_ms(ci)}"
        rest = (f"median step {seconds_ms(s.median_step_s)} ms (mean "
                f"{seconds_ms(s.mean_step_s)}{spread} ms); {s.window.grade}")  # fmt: skip
    return _fit(s.label, rest, width)


def change_line(acc: Acceptance, c: Change, against: str = "") -> str:
    """One change: which sides, its sentence, the median TFLOP/s change with its 95 % CI."""
    names = versus(acc.sides[c.base].label, acc.sides[c.to].label)
    tci = c.ci95_median_tflops_pct
    spread = "" if tci is None else f" (95 % CI {tci[0]:+.1f} … {tci[1]:+.1f} %)"
    tflops = "" if c.median_tflops_pct is None else (
        f"; TFLOP/s/GPU {c.median_tflops_pct:+.1f} %{spread}")  # fmt: skip
    return f"{names}{against}: {c.sentence}{tflops}"


def change_lines(acc: Acceptance) -> tuple[str, ...]:
    """Each rung against the one before, then (a ladder) against the base."""
    out = [change_line(acc, c) for c in acc.changes]
    out += [change_line(acc, c, " (against the base)") for c in acc.vs_base if c.base != c.to - 1]
    return tuple(out)


# --- the sides -----------------------------------------------------------------------------------


def side_table(acc: Acceptance) -> Table:
    """One row per side: its window (iterations, steps and samples), median and mean step with
    the mean's 95 % CI, grade (TFLOP/s: :func:`tflops_table`)."""
    rows = tuple(
        (s.label, iterations_phrase(s.window.first, s.window.last).removeprefix("iterations "),
         f"{s.window.steps:,} ({s.window.samples:,})", seconds_ms(s.median_step_s),
         seconds_ms(s.mean_step_s), _ci_ms(s.ci95_mean_step_s), s.window.grade)
        for s in acc.sides
    )  # fmt: skip
    header = ("log", "iterations", "steps (samples)", "median step (ms)", "mean (ms)",
              "95 % CI of the mean (ms)", "grade")  # fmt: skip
    title = (f"Unprofiled steady windows (bootstrap CI: {acc.resamples:,} resamples, seed "
             f"{acc.seed})")  # fmt: skip
    return Table(title, header, rows, (False, False, True, True, True, True, False))


def tflops_table(acc: Acceptance) -> Table | None:
    """Model TFLOP/s per GPU over the same windows: median, mean and the mean's 95 % CI (None
    where no log reports TFLOP/s)."""
    if all(s.median_tflops is None for s in acc.sides):
        return None
    rows = tuple(
        (s.label, number(s.median_tflops), number(s.mean_tflops),
         "–" if (ci := s.ci95_mean_tflops) is None else f"{number(ci[0])} … {number(ci[1])}")
        for s in acc.sides
    )  # fmt: skip
    return Table("Model TFLOP/s per GPU (the same windows)",
                 ("log", "median", "mean", "95 % CI of the mean"), rows,
                 (False, True, True, True))  # fmt: skip


def grade_line() -> str:
    """The seeds' rule, said once under the table."""
    return (f"grade: acceptance = a run of at least {ACCEPT_MIN_RUN} iterations; screening = a "
            f"shorter run (accepts nothing); too few = under {SCREEN_MIN_STEPS} steps")


def throughput_lines(acc: Acceptance) -> tuple[str, ...]:
    """Sides measured by time per token (only throughput logged) say so, with the figure."""
    return tuple(
        f"{s.label}: no step time logged; changes are of time per token (1 / tokens per second), "
        f"median {number(s.median_tokens_per_s)} tokens/s/GPU"
        for s in acc.sides if s.metric == "time per token"
    )  # fmt: skip


def label_line(acc: Acceptance) -> str:
    """The change's label (the seeds' "training-equivalent vs benchmark-only"): benchmark-only
    where a side forced load balancing, training-equivalent where declared, else neither."""
    forced = [s.label for s in acc.sides if s.benchmark_only]
    if forced:
        return (f"label: benchmark-only (forced load balancing on {', '.join(forced)}): a "
                "throughput comparison, not a training one")  # fmt: skip
    if acc.equivalent:
        return (f"label: training-equivalent, declared (--equivalent): per-iteration losses "
                f"compared, tolerance {acc.loss_tolerance * 100:g} % of the base's loss")
    return "label: not declared training-equivalent (--equivalent compares the losses)"


def health_lines(acc: Acceptance) -> tuple[str, ...]:
    """The label, then per side: loss finite, skipped and NaN iterations, peak memory; per
    declared-equivalent change: the largest per-iteration loss difference against the
    tolerance."""
    out = [label_line(acc)]
    for s in acc.sides:
        loss = {None: "no loss logged in the window", True: "loss finite over the window",
                False: "loss NOT finite (NaN or inf) in the window"}[s.loss_finite]  # fmt: skip
        out.append(f"{s.label}: {loss}; {_iterations(s.skipped_iterations, 'skipped')}, "
                   f"{_iterations(s.nan_iterations, 'NaN')}; peak memory "
                   f"{gib(s.peak_memory_bytes)}")  # fmt: skip
    if acc.equivalent:
        for c in acc.changes + tuple(c for c in acc.vs_base if c.base != c.to - 1):
            names = versus(acc.sides[c.base].label, acc.sides[c.to].label)
            if c.max_loss_diff is None:
                out.append(f"{names}: losses not compared (no common finite loss, or "
                           "benchmark-only)")  # fmt: skip
                continue
            rel, tol = c.max_loss_diff_pct, acc.loss_tolerance
            against = (f"tolerance {tol * 100:g} % of the base's loss" if rel is None else
                       f"at most {_small_pct(rel)} of the base's loss; tolerance {tol * 100:g} %")
            line = (f"{names}: largest loss difference per iteration {c.max_loss_diff:.6g} "
                    f"({against})")  # fmt: skip
            out.append(f"WARNING: {line}: above the tolerance" if c.loss_flagged else line)
    return tuple(out)


def _iterations(n: int | None, what: str) -> str:
    """"0 skipped iterations", "1 NaN iteration"; "NaN iterations not logged"."""
    return f"{what} iterations not logged" if n is None else plural(n, f"{what} iteration")


def _small_pct(p: float) -> str:
    return "under 0.01 %" if 0 < p < 0.005 else f"{p:.2f} %"


def shown_paths(paths: list[str]) -> list[str]:
    """The logs' paths as a report shows them (:func:`display_path`), or, where that leaves two
    alike, with as many parent folders as tells them apart (``off/golden_values.json``)."""
    shown = [display_path(p) for p in paths]
    return shown if len(set(shown)) == len(shown) else distinct_tails(paths)


def source_lines(acc: Acceptance) -> tuple[str, ...]:
    """Where each side's numbers came from: the log, whose lines, the window, the notes."""
    out = []
    for s, path in zip(acc.sides, shown_paths([s.path for s in acc.sides]), strict=True):
        rank = "" if s.rank is None else f", rank {s.rank}'s lines"
        out.append(f"{s.label}: {path} ({s.format}{rank}); {s.window.description}")
        out += [f"{s.label}: {n}" for n in s.notes]
    return tuple(out)


def config_table(acc: Acceptance) -> Table | None:
    """The training arguments whose values differ between the logs (missing on a side: –)."""
    if len(acc.sides) < 2:
        return None
    configs = [dict(s.config) for s in acc.sides]
    keys = sorted({k for c in configs for k in c})
    rows = tuple((k, *(shorten(c.get(k, "–"), 40) for c in configs)) for k in keys
                 if len({c.get(k) for c in configs}) > 1)  # fmt: skip
    if not rows and not any(configs):
        return None
    header = ("training argument", *(s.label for s in acc.sides))
    return Table("Training arguments that differ between the logs", header, rows,
                 (False,) * len(header))  # fmt: skip


def verdict_heading(acc: Acceptance) -> Heading:
    """The report's first line: the headline change's verdict, else the one log's summary; in
    the terminal fitted to one line, in Markdown and HTML whole (a heading wraps)."""
    def said(width: int | None) -> str:
        head = acc.headline
        return change_verdict(acc, head, width) if head else side_verdict(acc.sides[0], width)

    return Heading(said(None), terminal=said(WIDTH))


def document(acc: Acceptance) -> Document:
    """``nsysmoe steps``: the verdict first, the table, the changes, health, the sources."""
    blocks: list[Block] = [verdict_heading(acc)]
    if acc.headline and len(acc.sides) > 2:
        blocks.append(Lines((change_line(acc, acc.vs_base[-1], " (against the base)"),)))
    blocks += _measured(acc)
    if (config := config_table(acc)) is not None:
        blocks.append(config)
    return Document(tuple(blocks))


def _tables(acc: Acceptance) -> list[Block]:
    """The step-time table with the grading rule under it, then the TFLOP/s table."""
    tflops = tflops_table(acc)
    return [side_table(acc), Lines((grade_line(),), style="notes"),
            *([tflops] if tflops is not None else [])]  # fmt: skip


def _measured(acc: Acceptance) -> list[Block]:
    blocks: list[Block] = _tables(acc)
    if changes := change_lines(acc):
        blocks.append(Lines(changes))
    if more := throughput_lines(acc):
        blocks.append(Lines(more, style="notes"))
    return blocks + _health(acc)


def _health(acc: Acceptance) -> list[Block]:
    return [Lines(health_lines(acc)), Lines(source_lines(acc), style="notes")]


# --- the evidence bundle -------------------------------------------------------------------------


def bundle_head(ac: AcceptedComparison) -> list[Block]:
    """The accepted verdict, its CI and what the profile explains, the profiling overhead."""
    acc, link = ac.acceptance, ac.link
    change = acc.headline
    lines = [change_line(acc, change)] if change else []
    lines.append(link.sentence)
    off, on = (signed(p) for p in link.overhead_pct)
    names = [s.label for s in acc.sides]
    lines.append(f"profiling overhead (profiled steady step over the unprofiled median): "
                 f"{names[0]} {off}, {names[1]} {on}")
    if link.overhead_warning:
        warning = link.overhead_warning
        lines.append(f"WARNING: {warning}")
    return [verdict_heading(acc), Lines(tuple(lines))]


def change_blocks(ac: AcceptedComparison) -> list[Block]:
    """1: the labels, the variable under test, the contract's differences, the logs' config."""
    c = ac.comparison
    logs = shown_paths([s.path for s in ac.acceptance.sides])
    out = [f"{s.label}: log {log}; profile {display_path(side.analysis.path)}"
           + ("" if side.name == s.label else f" (its A/B side {side.name})")
           for s, log, side in zip(ac.acceptance.sides, logs, (c.off, c.on), strict=True)]
    out += [f"variable under test: {v.key} ({v.kind}, {'declared' if v.declared else 'inferred'}"
            f"): {v.off if v.off is not None else '–'} → {v.on if v.on is not None else '–'}"
            for v in c.contract.variables]  # fmt: skip
    if not c.contract.variables and c.contract.note:
        out.append(c.contract.note)
    blocks: list[Block] = [Lines(tuple(out), style="notes")]
    differ = tuple((ch.name, shorten(ch.off, 40), shorten(ch.on, 40), ROLE_TEXT[ch.role])
                   for ch in c.contract.checks if ch.role != "same")  # fmt: skip
    blocks.append(Table("Profiles: what differs between the sides (the measurement contract)",
                        ("check", c.off.name, c.on.name, ""), differ, (False,) * 4))
    if (config := config_table(ac.acceptance)) is not None:
        blocks.append(config)
    return blocks


def proof_table(c: Comparison) -> Table:
    """2: per side, from its profile: the dispatcher, CUDA graphs replayed, communication
    hidden by compute (the overlap's evidence)."""
    rows = []
    for side in (c.off, c.on):
        g = side.analysis.graphs
        graphs = "none traced" if not g.present else f"{g.replays:,} replays ({g.traced})"
        rows.append((side.name, side.dispatcher, graphs, pct(side.analysis.totals.hidden_pct)))
    return Table("Proof it ran (from each side's profile)",
                 ("side", "dispatcher", "CUDA graphs", "communication hidden"), tuple(rows),
                 (False, False, False, True))  # fmt: skip


def bundle(ac: AcceptedComparison, profile: Document) -> Document:
    """The evidence bundle: the accepted verdict, then the five sections in the seeds' order,
    the last being ``profile`` (the A/B's own report, unchanged but for its headings, demoted
    under that section's)."""
    acc = ac.acceptance
    blocks: list[Block] = [*bundle_head(ac), Section(SECTIONS[0]), *change_blocks(ac),
                           Section(SECTIONS[1]), proof_table(ac.comparison),
                           Section(SECTIONS[2]), *_tables(acc)]  # fmt: skip
    if changes := change_lines(acc):
        blocks.append(Lines(changes))
    if more := throughput_lines(acc):
        blocks.append(Lines(more, style="notes"))
    blocks += [Section(SECTIONS[3]), *_health(acc), Section(SECTIONS[4])]
    return Document(tuple(blocks)) + nested(profile)
