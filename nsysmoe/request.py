"""What ``nsysmoe analyze`` was asked to do, and doing it: the policy under the CLI.

Which mode the arguments mean (one trace, an A/B, many ranks, an A/B of many ranks, another
tool's view), the default scope of each, the ``--strict`` and ``--fail-if`` checks, and the
report with its figures. The CLI only turns options into a :class:`Request` and an
:class:`Outcome` into output and an exit code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nsysmoe import api
from nsysmoe.classify import RuleSet
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.gate import Gate
from nsysmoe.model import IterationRange, Scope, Window
from nsysmoe.parallel import Executor, expand
from nsysmoe.renderers import Format, render
from nsysmoe.results import Failure


def make_scope(
    window: Window | IterationRange | None, skip: int | None, step_range: str | None, ab: bool
) -> Scope:
    """Single traces default to the whole trace, A/B to the steady window (1 warm-up skipped)."""
    if isinstance(window, Window):
        if skip is not None:
            raise UsageError("--skip counts iterations; it cannot trim a time --window")
        return Scope(window=window, step_pattern=step_range)
    first, last = (window.first, window.last) if window else (None, None)
    steady = ab or window is not None or skip is not None or step_range is not None
    default_skip = None if ab and window is None else 0  # None: auto (see Scope)
    return Scope(
        steady=steady,
        require_steps=window is not None or skip is not None or step_range is not None,
        step_pattern=step_range,
        skip=default_skip if skip is None else skip,
        first=first,
        last=last,
    )


@dataclass(frozen=True)
class Request:
    """``nsysmoe analyze``'s arguments and options, resolved (the scope is built per mode)."""

    traces: tuple[str, ...]
    rules: RuleSet
    window: Window | IterationRange | None = None
    skip: int | None = None
    step_range: str | None = None
    whole_trace: bool = False
    raw_nvtx: bool = False
    executor: Executor = Executor()
    cache_dir: Path | None = None
    fmt: Format = "terminal"
    output: Path | None = None
    strict: bool = False
    fail_if: tuple[str, ...] = ()
    plot_dir: Path | None = None
    compat: str | None = None

    @property
    def ab(self) -> bool:
        return len(self.traces) == 2 and not self.whole_trace and not self.compat

    @property
    def scope(self) -> Scope:
        scope = make_scope(self.window, self.skip, self.step_range, self.ab)
        return replace(scope, raw_nvtx=self.raw_nvtx)


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
    """Run the request in the mode its arguments mean."""
    if req.compat:
        return _compat(req, [path for arg in req.traces for path in expand(arg)])
    if len(req.traces) <= 2:
        sides = [expand(t) for t in req.traces]
    else:  # an unquoted glob expanded by the shell: one multi-rank run
        sides = [[path for arg in req.traces for path in expand(arg)]]
    if sum(len(side) for side in sides) > len(sides):
        return _many(req, sides)
    kw = {"rules": req.rules, "scope": req.scope, "cache_dir": req.cache_dir}
    if len(sides) == 1:
        result = api.analyze(sides[0][0], **kw)
        return _report(req, result, Gate.of(req.fail_if, result))
    comparison = api.compare(sides[0][0], sides[1][0], **kw)
    error = None
    if req.strict and not comparison.contract.matched:
        error = f"--strict: measurement contract {comparison.contract.summary()}"
    return _report(req, comparison, Gate.of(req.fail_if, comparison), error=error)


def _report(req: Request, result: object, gate: Gate, *, error: str | None = None,
            before: Sequence[str] = (), after: Sequence[str] = ()) -> Outcome:  # fmt: skip
    """The report (figures first: Markdown links them), checked before anything is written."""
    figures: list[Path] = api.plot(result, req.plot_dir) if req.plot_dir else []
    links = [_relative(f, req.output) for f in figures if f.suffix == ".png"]
    text = render(result, req.fmt, figures=links if req.fmt == "markdown" else ())
    return Outcome(text, tuple(before), tuple(after), error, tuple(gate.failures()))


def _relative(figure: Path, output: Path | None) -> str:
    """A figure's path relative to the report file (or the working directory)."""
    base = (output.parent if output else Path.cwd()).resolve()
    return os.path.relpath(figure.resolve(), base)


def _many(req: Request, sides: list[list[str]]) -> Outcome:
    """Many ranks: one run (per-rank table, spread, straggler) or an A/B of two runs."""
    kw = {"rules": req.rules, "scope": req.scope, "executor": req.executor,
          "cache_dir": req.cache_dir}  # fmt: skip
    if len(sides) == 1:
        run = api.analyze_many(sides[0], **kw)
        if not run.analyses:
            raise NsysmoeError(f"no file could be analysed; first: {_first(run.failures)}")
        gate, bad, error, before = Gate.of(req.fail_if, run), run.failures, None, ()
        result: object = run
    else:
        rc = api.compare_many(sides[0], sides[1], **kw)
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
    return f"{failures[0].path}: {failures[0].error}" if failures else "nothing to read"


def _compat(req: Request, paths: list[str]) -> Outcome:
    """Another tool's conventions on every trace (the traces are one job's ranks)."""
    scope = req.scope
    ignored = [name for name, given in (("--fail-if", req.fail_if), ("--plot", req.plot_dir),
               ("--strict", req.strict), ("--window/--skip/--step-range", scope.steady
               or scope.window.bounded)) if given]  # fmt: skip
    if ignored:
        raise UsageError(f"--compat {req.compat} measures whole traces the other tool's way; "
                         f"drop {', '.join(ignored)}")  # fmt: skip
    return Outcome(render(api.compat(paths, tool=req.compat, rules=req.rules), req.fmt))
