"""What ``nsysmoe analyze`` does with its options: the policy under the CLI.

The arguments mean one mode, a value of its own (:func:`mode_of`): one trace (:class:`Single`),
an A/B (:class:`Pair`), many ranks (:class:`Ranks`), an A/B of many ranks (:class:`RanksPair`),
or another tool's view (:class:`Compat`). Each mode checks the options it refuses, once, and
runs; every mode's report but another tool's view goes through :func:`report` (figures,
``--fail-if``, the report cache), and :class:`Compat` renders its own (it refuses ``--plot``
and ``--fail-if`` and is never cached). Outputs are checked before any work; a cache that
cannot be used is a note, never an error. The CLI only turns its options into
:class:`~nsysmoe.options.Options` and an :class:`Outcome` into output and an exit code.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from nsysmoe import api, env, result_cache
from nsysmoe.acceptance import AcceptedComparison
from nsysmoe.classify import RuleSet, default_rules, load_rules
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.gate import Gate
from nsysmoe.io import cache
from nsysmoe.model import Iterations, Scope, Span, Whole, Window
from nsysmoe.options import (
    Options,
    StepsOptions,
    SweepOptions,
    check_not_inputs,
    check_output_not_input,
    check_writable,
)
from nsysmoe.parallel import Executor, default_jobs, expand, map_files, one_line, skipped_note
from nsysmoe.renderers import ReportOptions, render
from nsysmoe.results import Failure, KernelSummary

MAX_ROWS = 1 << 31  # ``kernels --top 0``: all rows
Progress = Callable[[int, str], Any]  # the CLI's progress bar (click's ProgressBar)


@dataclass(frozen=True)
class Outcome:
    """What to tell the user, in order: ``before`` (stderr notes), the report ``text``,
    ``after`` (stderr notes), then ``error`` (a ``--strict`` failure: exit 2) or ``failed``
    (``--fail-if`` conditions that hold: exit 1)."""

    text: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    error: str | None = None
    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """The options and what they resolve to once: the rules, the executor, the cache folder
    (None: no cache) and the report's result-cache name (:func:`nsysmoe.options.report_key`;
    None: not stored)."""

    options: Options
    rules: RuleSet
    executor: Executor
    cache_dir: Path | None = None
    report_key: str | None = None

    @property
    def scope(self) -> Scope:
        o = self.options
        if o.no_path and o.what_if:
            raise UsageError("--what-if replays the dependency graph that --no-critical-path "
                             "skips: drop one of them")  # fmt: skip
        return Scope(make_window(o.window, o.skip, o.step_range, o.whole_trace), o.rank,
                     o.step_range, o.raw_nvtx, o.phase, o.what_if, not o.no_path)  # fmt: skip


def make_window(
    window: Window | Iterations | None, skip: int | None, step_range: str | None,
    whole: bool = False,
) -> Span:
    """The steady iterations by default (the detected warm-up skipped:
    :func:`nsysmoe.measure.window.warmup`; the whole trace where there are none), the whole
    trace with ``whole`` (``--whole-trace``; ``--step-range`` then only names the iterations);
    asked-for iterations (``--window 5-20``) are taken as given, and iterations asked for in any
    way (``--skip``, ``--step-range``) must exist."""
    if whole and (window is not None or skip is not None):
        given = "--window" if window is not None else "--skip"
        raise UsageError(f"--whole-trace measures the whole trace; {given} asks for part of it: "
                         "drop one of them")  # fmt: skip
    if isinstance(window, Window):
        if skip is not None:
            raise UsageError("--skip counts iterations; it cannot trim a time --window")
        return window
    explicit = window is not None or skip is not None or step_range is not None
    if whole:
        return Whole()
    asked = window or Iterations()
    return replace(asked, skip=asked.skip if skip is None else skip, required=explicit)


class Mode(Protocol):
    """What the arguments mean: its input files, the options it refuses, and its run."""

    @property
    def paths(self) -> list[str]: ...

    def check(self, opts: Options) -> None: ...

    def run(self, req: Request) -> Outcome: ...


@dataclass(frozen=True)
class Single:
    """One trace: its report."""

    path: str

    @property
    def paths(self) -> list[str]:
        return [self.path]

    def check(self, opts: Options) -> None:
        """Training logs are refused (they accept an A/B: ``nsysmoe steps LOG`` summarises
        one); those of an A/B or of many ranks (``--align``, ``--vary``, ``--labels``,
        ``--strict``, ``--all-nvtx``, ``--jobs``) have nothing to act on here and are ignored;
        ``--dask`` is a note (one file is analysed here)."""
        _no_logs(opts, "one trace", "nsysmoe steps LOG summarises one log")

    def run(self, req: Request) -> Outcome:
        result = api.analyze(self.path, **_one_file(req))
        return report(req, result, Gate.of(req.options.fail_if, result), before=_dask_note(req))


@dataclass(frozen=True)
class Pair:
    """Two traces: an A/B with its contract and verdict."""

    off: str
    on: str

    @property
    def paths(self) -> list[str]:
        return [self.off, self.on]

    def check(self, opts: Options) -> None:
        """No option is refused: those of many ranks (``--align``, ``--jobs``) have nothing to
        act on here and are ignored; ``--dask`` is a note (the two files are analysed here)."""

    def run(self, req: Request) -> Outcome:
        o = req.options
        c = api.compare(self.off, self.on, **_one_file(req), vary=o.vary, labels=o.labels,
                        logs=o.logs, log_window=o.log_window, equivalent=o.equivalent,
                        loss_tolerance=o.loss_tolerance)  # fmt: skip
        contract = (c.comparison if isinstance(c, AcceptedComparison) else c).contract
        error = None
        if o.strict and not contract.matched:
            note = contract.note
            error = (f"--strict: measurement contract {contract.summary()}"
                     + (f"; {note}" if note else ""))  # fmt: skip
        return report(req, c, Gate.of(o.fail_if, c), error=error, before=_dask_note(req))


@dataclass(frozen=True)
class Ranks:
    """Many rank files of one run: per-rank table, spread, stragglers."""

    files: tuple[str, ...]

    @property
    def paths(self) -> list[str]:
        return list(self.files)

    def check(self, opts: Options) -> None:
        _no_rank(opts)
        _no_logs(opts, "one run of many ranks", "nsysmoe steps LOG summarises one log")

    def run(self, req: Request) -> Outcome:
        o = req.options
        run = api.analyze_many(list(self.files), rules=req.rules, scope=req.scope,
                               executor=req.executor, cache_dir=req.cache_dir,
                               align=o.align == "collectives")  # fmt: skip
        if not run.analyses:
            raise NsysmoeError(f"no file could be analysed; first: {_first(run.failures)}")
        after, error = _failed(run.failures, None, o.strict)
        return report(req, run, Gate.of(o.fail_if, run), error=error, after=after)


@dataclass(frozen=True)
class RanksPair:
    """Two runs of many rank files: their rank pairs compared, then summed."""

    off: tuple[str, ...]
    on: tuple[str, ...]

    @property
    def paths(self) -> list[str]:
        return [*self.off, *self.on]

    def check(self, opts: Options) -> None:
        _no_rank(opts)
        _no_logs(opts, "an A/B of many ranks", "accept on them with nsysmoe steps OFF_LOG "
                 "ON_LOG")  # fmt: skip

    def run(self, req: Request) -> Outcome:
        o = req.options
        rc = api.compare_many(list(self.off), list(self.on), rules=req.rules, scope=req.scope,
                              executor=req.executor, cache_dir=req.cache_dir, vary=o.vary,
                              labels=o.labels)  # fmt: skip
        if not rc.pairs:
            raise NsysmoeError(f"no rank pair could be compared; first: {_first(rc.failures)}")
        before = ("note: --plot draws no figures for an A/B of many ranks yet; plot each side's "
                  "run on its own",) if o.plot_dir is not None else ()  # fmt: skip
        contract = (f"--strict: measurement contract not matched: "
                    f"{'; '.join(rc.contract_notes)}" if o.strict and not rc.matched else None)
        after, error = _failed(rc.failures, contract, o.strict)
        req = replace(req, options=replace(o, plot_dir=None))
        return report(req, rc, Gate.of(o.fail_if, rc), error=error, before=before, after=after)


@dataclass(frozen=True)
class Compat:
    """Another tool's conventions on every trace (the traces are one job's ranks), over the
    whole traces."""

    files: tuple[str, ...]
    tool: str

    @property
    def paths(self) -> list[str]:
        return list(self.files)

    def check(self, opts: Options) -> None:
        window = opts.window is not None or opts.skip is not None or opts.step_range is not None
        ignored = [name for name, given in (
            ("--fail-if", opts.fail_if), ("--plot", opts.plot_dir), ("--strict", opts.strict),
            ("--rank", opts.rank is not None), ("--window/--skip/--step-range", window),
            ("--logs", opts.logs))
            if given]  # fmt: skip
        if ignored:
            raise UsageError(f"--compat {self.tool} measures whole traces the other tool's way; "
                             f"drop {', '.join(ignored)}")  # fmt: skip
        if self.tool != "hta":
            raise UsageError(f"--compat {self.tool!r}: unknown tool; known: hta")

    def run(self, req: Request) -> Outcome:
        progress = Executor(progress=req.executor.progress)
        loaded = map_files(api.load, list(self.files), progress, "reading traces")
        traces = [t for t in loaded if not isinstance(t, Failure)]
        bad = [f for f in loaded if isinstance(f, Failure)]
        if not traces:
            raise NsysmoeError(f"no file could be read for --compat; first: {_first(bad)}")
        after = tuple(f"warning: left out of --compat {self.tool}: {_first([f])}" for f in bad)
        run = api.compat(traces, tool=self.tool, rules=req.rules)
        fmt = req.options.fmt
        if fmt == "html":
            return Outcome(render(run, "html", page=True, svgs=api.figure_svgs(run)), after=after)
        return Outcome(render(run, fmt, **_tty(req.options)), after=after)  # type: ignore[arg-type]


def mode_of(opts: Options, skipped: list[str]) -> Mode:
    """The mode the arguments mean, each a directory, a glob or a file (``skipped``: what the
    expansion left out, and why): ``--compat`` takes every file; one or two arguments are one
    trace or an A/B — of many ranks when a side holds several files; more than two are one
    multi-rank run (an unquoted glob the shell expanded)."""
    if opts.compat:
        return Compat(tuple(p for arg in opts.traces for p in expand(arg, skipped)), opts.compat)
    if len(opts.traces) <= 2:
        sides = [expand(t, skipped) for t in opts.traces]
    else:
        sides = [[p for arg in opts.traces for p in expand(arg, skipped, one_of_many=True)]]
    if not all(sides):
        raise NsysmoeError(f"no trace file among the arguments; {skipped_note(skipped)}")
    if sum(len(side) for side in sides) == len(sides):
        return Single(sides[0][0]) if len(sides) == 1 else Pair(sides[0][0], sides[1][0])
    return Ranks(tuple(sides[0])) if len(sides) == 1 else RanksPair(tuple(sides[0]),
                                                                     tuple(sides[1]))


def execute(opts: Options, progress: Progress | None = None,
            report_key: str | None = None) -> Outcome:  # fmt: skip
    """Run what ``opts`` ask: the rules read, the outputs checked, the mode found, checked and
    run (``progress``: the CLI's bar; ``report_key``: this report's result-cache name, where it
    is stored once rendered)."""
    rules = rules_of(opts.rules_path, opts.rules_replace)
    executor = Executor(opts.jobs or default_jobs(), opts.dask_address, progress)
    check_writable(opts.output, opts.plot_dir)
    cache_dir = env.cache_dir() if opts.use_cache else None
    before: tuple[str, ...] = ()
    if cache_dir is not None and (note := cache.prepare(cache_dir)):
        before, cache_dir = (f"warning: {note}",), None
    req = Request(opts, rules, executor, cache_dir, report_key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cache.CacheWarning)
        outcome = _run(req)
    notes: list[str] = []
    for w in caught:
        if issubclass(w.category, cache.CacheWarning):
            notes.append(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    return replace(outcome, before=before + outcome.before,
                   after=outcome.after + _cache_notes(notes))  # fmt: skip


def _run(req: Request) -> Outcome:
    o = req.options
    if o.logs is None and (given := _log_options(o)):
        raise UsageError(f"{given[0]} applies to training logs: add --logs OFF_LOG ON_LOG")
    skipped: list[str] = []
    mode = mode_of(req.options, skipped)
    check_not_inputs(req.options, mode.paths)
    mode.check(req.options)
    _tolerance_needs_equivalent(o.loss_tolerance, o.equivalent)
    outcome = mode.run(req)
    if not skipped:
        return outcome
    return replace(outcome, before=(f"note: {skipped_note(skipped)}", *outcome.before))


def rules_of(path: Path | None, replace_defaults: bool) -> RuleSet:
    """The classification rules: ``--rules FILE`` first, then the defaults (only the file with
    ``--rules-replace``)."""
    if path is None:
        if replace_defaults:
            raise UsageError("--rules-replace needs --rules FILE (the rules to use instead)")
        return default_rules()
    return load_rules(path, extend_default=not replace_defaults)


def kernels_report(trace: str, top: int, klass: str | None, fmt: str, wide: bool,
                   rules_path: Path | None, rules_replace: bool) -> str:  # fmt: skip
    """``nsysmoe kernels``: kernel names by total time with their class (``top`` 0: all)."""
    table = api.kernel_summary(trace, rules=rules_of(rules_path, rules_replace), klass=klass)
    return render(KernelSummary(trace, table, min(top, MAX_ROWS)), fmt,  # type: ignore[arg-type]
                  options=ReportOptions(wide=wide))  # fmt: skip


def report(req: Request, result: object, gate: Gate, *, error: str | None = None,
           before: Sequence[str] = (), after: Sequence[str] = ()) -> Outcome:  # fmt: skip
    """The report (figures first: Markdown links them), checked before anything is written."""
    o = req.options
    text, wrote = rendered(result, o, ReportOptions(all_nvtx=o.all_nvtx, wide=o.wide))
    if req.report_key is not None and req.cache_dir is not None:
        result_cache.store_text(req.cache_dir, req.report_key, text)
    return Outcome(text, tuple(before), (*wrote, *after), error, tuple(gate.failures()))


def rendered(result: object, o: Options | SweepOptions,
             options: ReportOptions | None = None) -> tuple[str, tuple[str, ...]]:  # fmt: skip
    """``result`` as ``o.fmt`` text with its figures drawn to ``o.plot_dir`` first (Markdown
    links them; the HTML page inlines its own), and the note saying what was written."""
    try:
        figures: list[Path] = api.plot(result, o.plot_dir) if o.plot_dir else []
    except OSError as exc:
        reason = one_line(exc.strerror or str(exc))
        raise NsysmoeError(f"--plot {o.plot_dir}: cannot write the figures ({reason}); plot "
                           "to a writable folder") from None  # fmt: skip
    links = [_relative(f, o.output) for f in figures if f.suffix == ".png"]
    if o.fmt == "html":  # one self-contained page, its figures inline
        text = render(result, "html", page=True, svgs=api.figure_svgs(result), options=options)
    else:
        text = render(result, o.fmt, figures=links if o.fmt == "markdown" else (),  # type: ignore[arg-type]
                      options=options, **_tty(o))  # fmt: skip
    if not figures:
        return text, ()
    where = os.path.relpath(o.plot_dir) if o.plot_dir else ""
    stems = sorted({f.stem for f in figures})
    return text, (f"wrote {len(stems)} figures (PNG and SVG) to {where}{os.sep}: "
                  + ", ".join(stems),)  # fmt: skip


def _one_file(req: Request) -> dict[str, Any]:
    """One file per side: analysed here; a cached result stands in for it unless figures are
    drawn (their timelines need the classified traces)."""
    drawn = req.options.plot_dir is not None or req.options.fmt == "html"
    return {"rules": req.rules, "scope": req.scope, "cache_dir": req.cache_dir,
            "detached": not drawn}  # fmt: skip


def _dask_note(req: Request) -> tuple[str, ...]:
    if not req.executor.dask:
        return ()
    return (f"note: --dask {req.executor.dask}: one file per side is analysed here, in this "
            "process (--dask and --jobs spread many files)",)  # fmt: skip


def _log_options(opts: Options) -> list[str]:
    """The training-log options given (``--logs`` aside), in the order of the command line."""
    return [n for n, v in (("--log-window", opts.log_window), ("--equivalent", opts.equivalent),
                           ("--loss-tolerance", opts.loss_tolerance)) if v]


def _tolerance_needs_equivalent(tolerance: float | None, equivalent: bool) -> None:
    if tolerance is not None and not equivalent:
        raise UsageError("--loss-tolerance applies to --equivalent: declare the change "
                         "training-equivalent to compare losses")  # fmt: skip


def _no_logs(opts: Options, what: str, instead: str) -> None:
    given = ["--logs"] * bool(opts.logs) + _log_options(opts)
    if given:
        raise UsageError(f"{', '.join(given)}: training logs accept an A/B of two traces, not "
                         f"{what}; {instead}")  # fmt: skip


def steps_outcome(opts: StepsOptions) -> Outcome:
    """``nsysmoe steps``: the logs' acceptance (:func:`nsysmoe.api.accept`), rendered, with its
    ``--fail-if`` conditions; ``-o`` checked first and never one of the logs."""
    check_writable(opts.output, None)
    check_output_not_input(opts.output, opts.logs)
    _tolerance_needs_equivalent(opts.loss_tolerance, opts.equivalent)
    acc = api.accept(list(opts.logs), labels=opts.labels, window=opts.log_window,
                     equivalent=opts.equivalent, loss_tolerance=opts.loss_tolerance)
    gate = Gate.of(opts.fail_if, acc)
    page = {"page": True} if opts.fmt == "html" else _tty(opts)  # HTML: one self-contained page
    return Outcome(render(acc, opts.fmt, **page), failed=tuple(gate.failures()))  # type: ignore[arg-type]


def sweep_outcome(opts: SweepOptions) -> Outcome:
    """``nsysmoe sweep``: three or more settings of one knob (:func:`nsysmoe.api.sweep`), each
    argument one export or a folder (or glob) of one run's rank files; ``-o`` and ``--plot``
    checked first, never an input; ``--strict``: exit 2 when a setting differs from the base
    in more than the knob; what a folder held that is no trace is said in a note first."""
    if not opts.vary:
        raise UsageError("nsysmoe sweep needs --vary KNOB: the one setting the exports differ in "
                         "(moe_deepep_num_sms, a dispatcher option, an environment variable)")
    check_writable(opts.output, opts.plot_dir)
    rules = rules_of(opts.rules_path, opts.rules_replace)
    paths: list[str] = []
    skipped: list[str] = []
    for arg in opts.settings:  # found here for the checks; api.sweep finds them again
        found = expand(arg, skipped)
        if not found:
            raise UsageError(f"{arg}: no trace file ({skipped_note(skipped)}); each sweep "
                             "setting is one export or a folder of one run's rank files")
        paths += found
    check_output_not_input(opts.output, [*paths, *([opts.rules_path] if opts.rules_path else [])])
    scope = Scope(make_window(opts.window, opts.skip, opts.step_range), None, opts.step_range)
    result = api.sweep(list(opts.settings), vary=opts.vary, labels=opts.labels, rules=rules,
                       scope=scope)  # fmt: skip
    error = None
    if opts.strict and not result.matched:
        broken = [f"{label}: {c.summary()}" for label, c in
                  zip(result.labels[1:], result.contracts, strict=True) if not c.matched]
        error = "--strict: measurement contract " + "; ".join(broken)
    text, wrote = rendered(result, opts)
    gate = Gate.of(opts.fail_if, result)
    before = (f"note: {skipped_note(skipped)}",) if skipped else ()
    return Outcome(text, before, wrote, error, tuple(gate.failures()))


def _no_rank(opts: Options) -> None:
    if opts.rank is not None:
        raise UsageError(f"--rank {opts.rank} selects a process of one export per side; with a "
                         "file per rank, pass that rank's files")  # fmt: skip


def _failed(bad: Sequence[Failure], error: str | None,
            strict: bool) -> tuple[tuple[str, ...], str | None]:  # fmt: skip
    """Files of a many-rank run that could not be analysed: a warning after the report (none
    when the contract already failed ``--strict``), and with ``--strict`` an error."""
    if not bad:
        return (), error
    after = () if error else (f"warning: {len(bad)} input(s) could not be analysed (listed in "
                              f"the report), first: {_first(bad)}",)  # fmt: skip
    if strict and not error:
        error = f"--strict: {len(bad)} file(s) could not be analysed"
    return after, error


def _cache_notes(notes: list[str]) -> tuple[str, ...]:
    unique = list(dict.fromkeys(notes))
    if len(unique) <= 1:
        return tuple(f"warning: {n}" for n in unique)
    return (f"warning: --cache: {len(unique)} traces could not be stored; first: {unique[0]}",)


def _tty(opts: Options | StepsOptions | SweepOptions) -> dict[str, bool | None]:
    """A terminal report written to ``-o`` is not for a terminal: no colour, the piped width."""
    return {"tty": False if opts.output is not None else None} if opts.fmt == "terminal" else {}


def _relative(figure: Path, output: Path | None) -> str:
    """A figure's path relative to the report file (or the working directory)."""
    base = (output.parent if output else Path.cwd()).resolve()
    return os.path.relpath(figure.resolve(), base)


def _first(failures: Sequence[Failure]) -> str:
    if not failures:
        return "nothing to read"
    first = failures[0]  # readers' messages start with the path already
    return first.error if first.error.startswith(first.path) else f"{first.path}: {first.error}"
