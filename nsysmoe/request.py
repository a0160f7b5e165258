"""What ``nsysmoe analyze`` was asked to do, and doing it: the policy under the CLI.

Which mode the arguments mean (one trace, an A/B, many ranks, an A/B of many ranks, another
tool's view), the default scope of each, the ``--strict`` and ``--fail-if`` checks, and the
report with its figures. The CLI only turns options into a :class:`Request` and an
:class:`Outcome` into output and an exit code.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nsysmoe import api, result_cache
from nsysmoe.classify import RuleSet
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.gate import Gate
from nsysmoe.io import cache
from nsysmoe.model import Iterations, Scope, Span, Whole, Window
from nsysmoe.parallel import Executor, expand, map_files, one_line, skipped_note
from nsysmoe.renderers import Format, ReportOptions, render
from nsysmoe.results import Failure


def make_window(
    window: Window | Iterations | None, skip: int | None, step_range: str | None,
    whole: bool = False,
) -> Span:
    """The steady iterations by default (the detected warm-up skipped:
    :func:`nsysmoe.measure.window.warmup`; the whole trace where there are none), the whole
    trace with ``whole`` (``--whole-trace``); asked-for iterations (``--window 5-20``) are taken
    as given, and iterations asked for in any way (``--skip``, ``--step-range``) must exist."""
    if isinstance(window, Window):
        if skip is not None:
            raise UsageError("--skip counts iterations; it cannot trim a time --window")
        return window
    explicit = window is not None or skip is not None or step_range is not None
    if whole and not explicit:
        return Whole()
    asked = window or Iterations()
    return replace(asked, skip=asked.skip if skip is None else skip, required=explicit)


@dataclass(frozen=True)
class Request:
    """``nsysmoe analyze``'s arguments and options, resolved (the scope is built per mode)."""

    traces: tuple[str, ...]
    rules: RuleSet
    window: Window | Iterations | None = None
    skip: int | None = None
    step_range: str | None = None
    whole_trace: bool = False
    raw_nvtx: bool = False
    phase: str | None = None
    align: str | None = None  # "collectives": refine the ranks' clocks by collective ends
    executor: Executor = Executor()
    cache_dir: Path | None = None
    fmt: Format = "terminal"
    output: Path | None = None
    strict: bool = False
    fail_if: tuple[str, ...] = ()
    plot_dir: Path | None = None
    compat: str | None = None
    #: the ``--rules`` file: an input too, which ``output`` may not overwrite
    rules_path: Path | None = None
    rank: int | None = None  # ``--rank R``: one process of each export (see Scope.rank)
    vary: tuple[str, ...] = ()  # ``--vary``: the A/B's variable under test
    labels: tuple[str, str] | None = None  # ``--labels OFF,ON``
    all_nvtx: bool = False  # ``--all-nvtx``: every NVTX row of an A/B's table
    wide: bool = False  # ``--wide``: full kernel names
    #: the result-cache name of this report's text (:func:`nsysmoe.cli._report_key`), stored
    #: once rendered so a repeat is served from there; None: not stored
    report_key: str | None = None

    @property
    def scope(self) -> Scope:
        whole = self.whole_trace or self.compat is not None  # another tool: whole traces
        return Scope(make_window(self.window, self.skip, self.step_range, whole), self.rank,
                     self.step_range, self.raw_nvtx, self.phase)  # fmt: skip


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


def execute(req: Request) -> Outcome:
    """Run the request in the mode its arguments mean. Outputs are checked first: an input is
    never overwritten; a cache that cannot be used is a note, never an error."""
    check_writable(req.output, req.plot_dir)
    before: tuple[str, ...] = ()
    if req.cache_dir is not None and (note := cache.prepare(req.cache_dir)):
        before, req = (f"warning: {note}",), replace(req, cache_dir=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cache.CacheWarning)
        outcome = _execute(req)
    notes: list[str] = []
    for w in caught:
        if issubclass(w.category, cache.CacheWarning):
            notes.append(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    return replace(outcome, before=before + outcome.before,
                   after=outcome.after + _cache_notes(notes))  # fmt: skip


def _cache_notes(notes: list[str]) -> tuple[str, ...]:
    unique = list(dict.fromkeys(notes))
    if len(unique) <= 1:
        return tuple(f"warning: {n}" for n in unique)
    return (f"warning: --cache: {len(unique)} traces could not be stored; first: {unique[0]}",)


def _execute(req: Request) -> Outcome:
    skipped: list[str] = []
    outcome = _execute_expanded(req, skipped)
    if not skipped:
        return outcome
    return replace(outcome, before=(f"note: {skipped_note(skipped)}", *outcome.before))


def _execute_expanded(req: Request, skipped: list[str]) -> Outcome:
    if req.compat:
        paths = [path for arg in req.traces for path in expand(arg, skipped)]
        check_not_inputs(req, paths)
        return _compat(req, paths)
    if len(req.traces) <= 2:
        sides = [expand(t, skipped) for t in req.traces]
    else:  # an unquoted glob expanded by the shell: one multi-rank run
        sides = [[path for arg in req.traces for path in expand(arg, skipped, one_of_many=True)]]
    if not all(sides):
        raise NsysmoeError(f"no trace file among the arguments; {skipped_note(skipped)}")
    check_not_inputs(req, [path for side in sides for path in side])
    if sum(len(side) for side in sides) > len(sides):
        if req.rank is not None:
            raise UsageError(f"--rank {req.rank} selects a process of one export per side; "
                             "with a file per rank, pass that rank's files")  # fmt: skip
        return _many(req, sides)
    kw = {"rules": req.rules, "scope": req.scope, "cache_dir": req.cache_dir,
          "detached": not _figures_drawn(req)}  # fmt: skip
    before = ((f"note: --dask {req.executor.dask}: one file per side is analysed here, in this "
               "process (--dask and --jobs spread many files)",)
              if req.executor.dask else ())  # fmt: skip
    if len(sides) == 1:
        result = api.analyze(sides[0][0], **kw)
        return _report(req, result, Gate.of(req.fail_if, result), before=before)
    comparison = api.compare(sides[0][0], sides[1][0], **kw, vary=req.vary, labels=req.labels)
    error = None
    if req.strict and not comparison.contract.matched:
        note = comparison.contract.note
        error = (f"--strict: measurement contract {comparison.contract.summary()}"
                 + (f"; {note}" if note else ""))  # fmt: skip
    return _report(req, comparison, Gate.of(req.fail_if, comparison), error=error, before=before)


FIGURE_SUFFIXES = (".png", ".svg")


def _figures_drawn(req: Request) -> bool:
    """Whether the report draws figures (``--plot``, or an HTML page with its figures inline):
    their timelines need the classified traces, so no cached result stands in for them."""
    return req.plot_dir is not None or req.fmt == "html"


def check_not_inputs(req: Request, inputs: Sequence[str]) -> None:
    """``-o`` may not be an input (the same file by any path: links, ``..``, hard links), nor may
    ``--plot`` hold an input figures could overwrite."""
    others = [Path(p) for p in inputs] + ([req.rules_path] if req.rules_path else [])
    if req.output is not None:
        for path in others:
            if _same_file(req.output, path):
                raise UsageError(f"-o {req.output} is the input {path}; write the report to "
                                 "another file (inputs are never overwritten)")  # fmt: skip
    if req.plot_dir is not None:
        folder = os.path.realpath(req.plot_dir)
        for path in others:
            if path.suffix in FIGURE_SUFFIXES and os.path.realpath(path.parent) == folder:
                raise UsageError(f"--plot {req.plot_dir} holds the input {path}, which a figure "
                                 "could overwrite; plot to another folder")  # fmt: skip


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def check_writable(output: Path | None, plot_dir: Path | None) -> None:
    """Before any work: ``-o`` and ``--plot`` can be written (one line saying why not)."""
    if output is not None:
        _check_target("-o", output, folder=False)
    if plot_dir is not None:
        _check_target("--plot", plot_dir, folder=True)


def _check_target(option: str, path: Path, *, folder: bool) -> None:
    if path.exists() and path.is_dir() != folder:
        want = "a folder" if folder else "a file name, not a folder"
        raise UsageError(f"{option} {path}: {'not a folder' if folder else 'is a folder'}; "
                         f"pass {want}")  # fmt: skip
    if path.exists():
        where = path
    else:  # the nearest folder that exists must be a folder we may write into
        where = Path(os.path.abspath(path)).parent
        while not where.exists() and where != where.parent:
            where = where.parent
        if not folder and where != Path(os.path.abspath(path)).parent:
            raise NsysmoeError(f"{option} {path}: folder {path.parent} does not exist; create "
                               "it or write elsewhere")  # fmt: skip
        if not where.is_dir():
            raise NsysmoeError(f"{option} {path}: {where} is a file, not a folder; write "
                               "elsewhere")  # fmt: skip
    if not os.access(where, os.W_OK):
        raise NsysmoeError(f"{option} {path}: {where} is not writable (permission denied); "
                           "write elsewhere")  # fmt: skip


def _report(req: Request, result: object, gate: Gate, *, error: str | None = None,
            before: Sequence[str] = (), after: Sequence[str] = ()) -> Outcome:  # fmt: skip
    """The report (figures first: Markdown links them), checked before anything is written."""
    try:
        figures: list[Path] = api.plot(result, req.plot_dir) if req.plot_dir else []
    except OSError as exc:
        reason = one_line(exc.strerror or str(exc))
        raise NsysmoeError(f"--plot {req.plot_dir}: cannot write the figures ({reason}); plot "
                           "to a writable folder") from None  # fmt: skip
    links = [_relative(f, req.output) for f in figures if f.suffix == ".png"]
    options = ReportOptions(all_nvtx=req.all_nvtx, wide=req.wide)
    if req.fmt == "html":  # one self-contained page, its figures inline
        text = render(result, "html", page=True, svgs=api.figure_svgs(result), options=options)
    else:
        text = render(result, req.fmt, figures=links if req.fmt == "markdown" else (),
                      options=options, **_tty(req))  # fmt: skip
    if req.report_key is not None and req.cache_dir is not None:
        result_cache.store_text(req.cache_dir, req.report_key, text)
    if figures:
        where = os.path.relpath(req.plot_dir) if req.plot_dir else ""
        stems = sorted({f.stem for f in figures})
        after = (f"wrote {len(stems)} figures (PNG and SVG) to {where}{os.sep}: "
                 + ", ".join(stems), *after)  # fmt: skip
    return Outcome(text, tuple(before), tuple(after), error, tuple(gate.failures()))


def _tty(req: Request) -> dict[str, bool | None]:
    """A terminal report written to ``-o`` is not for a terminal: no colour, the piped width."""
    return {"tty": False if req.output is not None else None} if req.fmt == "terminal" else {}


def _relative(figure: Path, output: Path | None) -> str:
    """A figure's path relative to the report file (or the working directory)."""
    base = (output.parent if output else Path.cwd()).resolve()
    return os.path.relpath(figure.resolve(), base)


def _many(req: Request, sides: list[list[str]]) -> Outcome:
    """Many ranks: one run (per-rank table, spread, straggler) or an A/B of two runs."""
    kw = {"rules": req.rules, "scope": req.scope, "executor": req.executor,
          "cache_dir": req.cache_dir}  # fmt: skip
    if len(sides) == 1:
        run = api.analyze_many(sides[0], **kw, align=req.align == "collectives")
        if not run.analyses:
            raise NsysmoeError(f"no file could be analysed; first: {_first(run.failures)}")
        gate, bad, error, before = Gate.of(req.fail_if, run), run.failures, None, ()
        result: object = run
    else:
        rc = api.compare_many(sides[0], sides[1], **kw, vary=req.vary, labels=req.labels)
        if not rc.pairs:
            raise NsysmoeError(f"no rank pair could be compared; first: {_first(rc.failures)}")
        gate, bad, result = Gate.of(req.fail_if, rc), rc.failures, rc
        before = ("note: --plot draws no figures for an A/B of many ranks yet; plot each side's "
                  "run on its own",) if req.plot_dir is not None else ()  # fmt: skip
        error = (f"--strict: measurement contract not matched: {'; '.join(rc.contract_notes)}"
                 if req.strict and not rc.matched else None)  # fmt: skip
        req = replace(req, plot_dir=None)
    after = () if error or not bad else (
        f"warning: {len(bad)} input(s) could not be analysed (listed in the report), first: "
        f"{_first(bad)}",)  # fmt: skip
    if bad and req.strict and not error:
        error = f"--strict: {len(bad)} file(s) could not be analysed"
    return _report(req, result, gate, error=error, before=before, after=after)


def _first(failures: Sequence[Failure]) -> str:
    if not failures:
        return "nothing to read"
    first = failures[0]  # readers' messages start with the path already
    return first.error if first.error.startswith(first.path) else f"{first.path}: {first.error}"


def _compat(req: Request, paths: list[str]) -> Outcome:
    """Another tool's conventions on every trace (the traces are one job's ranks)."""
    scope = req.scope
    ignored = [name for name, given in (("--fail-if", req.fail_if), ("--plot", req.plot_dir),
               ("--strict", req.strict), ("--rank", req.rank is not None),
               ("--window/--skip/--step-range", not isinstance(scope.window, Whole)))
               if given]  # fmt: skip
    if ignored:
        raise UsageError(f"--compat {req.compat} measures whole traces the other tool's way; "
                         f"drop {', '.join(ignored)}")  # fmt: skip
    if req.compat != "hta":
        raise UsageError(f"--compat {req.compat!r}: unknown tool; known: hta")
    loaded = map_files(api.load, paths, Executor(progress=req.executor.progress), "reading traces")
    traces = [t for t in loaded if not isinstance(t, Failure)]
    bad = [f for f in loaded if isinstance(f, Failure)]
    if not traces:
        raise NsysmoeError(f"no file could be read for --compat; first: {_first(bad)}")
    after = tuple(f"warning: left out of --compat {req.compat}: {_first([f])}" for f in bad)
    run = api.compat(traces, tool=req.compat, rules=req.rules)
    if req.fmt == "html":
        return Outcome(render(run, "html", page=True, svgs=api.figure_svgs(run)), after=after)
    return Outcome(render(run, req.fmt, **_tty(req)), after=after)
