"""Command line: wiring only (options → load → analyze → render); the work lives in the library."""

from __future__ import annotations

import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import click

from nsysmoe import __version__
from nsysmoe.analyze import Scope
from nsysmoe.classify import RuleSet, default_rules, load_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.overlap import Window
from nsysmoe.runs import Executor

UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*$")
FORMATS = ("terminal", "markdown", "json")


def parse_time_ns(text: str) -> int:
    m = _TIME.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a time; use e.g. 1500000, 250ms or 1.5s")
    return round(float(m.group(1)) * UNITS_NS[m.group(2) or "ns"])


_ITERS = re.compile(r"^\s*(?:iter(?:ations?)?:)?\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_window(
    ctx: click.Context, param: click.Parameter, text: str | None
) -> Window | tuple[int, int] | None:
    """``START:END`` on the timeline (units ns default, us, ms, s; a side may be empty), or
    ``FIRST-LAST`` iterations (inclusive)."""
    if text is None:
        return None
    m = _ITERS.match(text)
    if m:
        first, last = int(m.group(1)), int(m.group(2))
        if last < first:
            raise click.BadParameter(f"empty iteration range {text!r}: LAST must be ≥ FIRST")
        return first, last
    if ":" not in text:
        raise click.BadParameter("use START:END (e.g. 2s:5s, +1s:+3s, :500ms) or iterations 5-20")
    lo_text, hi_text = (side.strip() for side in text.split(":", 1))
    relative = lo_text.startswith("+") or hi_text.startswith("+")
    lo = parse_time_ns(lo_text.lstrip("+")) if lo_text else None
    hi = parse_time_ns(hi_text.lstrip("+")) if hi_text else None
    if lo is not None and hi is not None and hi <= lo:
        raise click.BadParameter(f"empty window {text!r}: END must be after START")
    return Window(lo, hi, relative=relative)


def make_scope(
    window: Window | tuple[int, int] | None, skip: int | None, step_range: str | None, ab: bool
) -> Scope:
    """Single traces default to the whole trace, A/B to the steady window (1 warm-up skipped)."""
    if isinstance(window, Window):
        if skip is not None:
            raise click.UsageError("--skip counts iterations; it cannot trim a time --window")
        return Scope(window=window, step_pattern=step_range)
    first, last = window if window else (None, None)
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


def _rules(path: Path | None, replace: bool) -> RuleSet:
    return default_rules() if path is None else load_rules(path, extend_default=not replace)


rules_option = click.option(
    "--rules",
    "rules_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML rule file, tried before the defaults (format: nsysmoe/rules/default.toml).",
)
replace_option = click.option(
    "--rules-replace", is_flag=True, help="Use only the --rules file, not the default rules."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysmoe")
def cli() -> None:
    """Prove how much MoE expert-parallel communication the compute hid, from nsys exports."""


@cli.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True)
@click.option(
    "--window",
    callback=parse_window,
    help="Iterations FIRST-LAST (5-20), or time START:END on the trace timeline (2s:5s; ns/us/"
    "ms/s), or from the first GPU activity (+1s:+3s).",
)
@click.option(
    "--skip", type=click.IntRange(min=0), help="Warm-up iterations to skip [A/B: 1 if ≥3]."
)
@click.option("--step-range", help="Regex naming iteration ranges; group 1 = number.")
@click.option("--whole-trace", is_flag=True, help="A/B over the whole traces, not steady steps.")
@click.option(
    "--raw-nvtx", is_flag=True, help="Keep NVTX names as recorded (', op_id = N' suffixes too)."
)
@click.option("--strict", is_flag=True, help="A/B: a broken measurement contract is an error.")
@click.option("--fail-if", "fail_if", multiple=True, help="Exit 1 when METRIC<N holds (repeat).")
@click.option(
    "--jobs", type=click.IntRange(min=1), help="Worker processes for many files [all cores]."
)
@click.option(
    "--dask",
    "dask_address",
    help="Run per-file work on a Dask scheduler ('local': a LocalCluster).",
)
@click.option(
    "--cache",
    "use_cache",
    is_flag=True,
    help="Reuse traces read before ($NSYSMOE_CACHE_DIR or ~/.cache/nsysmoe); keyed by file "
    "identity, never stale.",
)
@click.option(
    "--compat",
    type=click.Choice(["hta"]),
    help="Also compute another tool's figure with its conventions (hta: HolisticTraceAnalysis).",
)
@click.option(
    "--plot",
    "plot_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write figures (PNG and SVG) to this folder; the Markdown report links them.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to this file instead of stdout.",
)
@rules_option
@replace_option
def analyze(
    traces: tuple[str, ...],
    fmt: str,
    window: Window | tuple[int, int] | None,
    skip: int | None,
    step_range: str | None,
    whole_trace: bool,
    raw_nvtx: bool,
    strict: bool,
    fail_if: tuple[str, ...],
    jobs: int | None,
    dask_address: str | None,
    use_cache: bool,
    compat: str | None,
    plot_dir: Path | None,
    output: Path | None,
    rules_path: Path | None,
    rules_replace: bool,
) -> None:
    """Per GPU: communication hidden by compute, exposed, idle, and the dominant wall.

    One TRACE: its report. Two (OFF ON): a matched A/B comparison with a verdict. Each may be a
    directory or a quoted glob of per-rank files ('off/*.sqlite'); more than two arguments are
    one multi-rank run. TRACES are `nsys export --type sqlite` files (.nsys-rep when nsys is on
    PATH) or PyTorch profiler JSON.
    """
    from nsysmoe import cache
    from nsysmoe.runs import default_jobs, expand

    ab = len(traces) == 2 and not whole_trace and not compat
    req = Request(
        rules=_rules(rules_path, rules_replace),
        scope=replace(make_scope(window, skip, step_range, ab), raw_nvtx=raw_nvtx),
        executor=Executor(jobs or default_jobs(), dask_address),
        cache_dir=cache.default_dir() if use_cache else None,
        fmt=fmt,
        output=output,
        strict=strict,
        fail_if=fail_if,
        plot_dir=plot_dir,
    )
    if compat:
        _compat(req, compat, [path for arg in traces for path in expand(arg)])
        return
    if len(traces) <= 2:
        sides = [expand(t) for t in traces]
    else:  # an unquoted glob expanded by the shell: one multi-rank run
        sides = [[path for arg in traces for path in expand(arg)]]
    if sum(len(side) for side in sides) > len(sides):
        _many(req, sides)
    elif len(sides) == 1:
        _one(req, sides[0][0])
    else:
        _ab(req, sides[0][0], sides[1][0])


@dataclass(frozen=True)
class Request:
    """What ``analyze`` was asked to do, resolved from its options."""

    rules: RuleSet
    scope: Scope
    executor: Executor
    cache_dir: Path | None
    fmt: str
    output: Path | None
    strict: bool
    fail_if: tuple[str, ...]
    plot_dir: Path | None


def _one(req: Request, path: str) -> None:
    from nsysmoe import api
    from nsysmoe.render import RENDERERS

    trace = api.load(path, cache_dir=req.cache_dir)
    result = api.analyze(trace, rules=req.rules, scope=req.scope)
    verdict = FailIf(req.fail_if, api.analysis_values(result))
    figures = _plots(req, analyses=[result], traces=[trace])
    _emit(RENDERERS[req.fmt]([result]) + _figure_links(req, figures), req.output)
    verdict.exit()


def _ab(req: Request, off_path: str, on_path: str) -> None:
    from nsysmoe import api
    from nsysmoe.render import COMPARISON_RENDERERS

    with ThreadPoolExecutor(max_workers=2) as pool:  # the readers release the GIL
        off, on = pool.map(partial(api.load, cache_dir=req.cache_dir), (off_path, on_path))
    comparison = api.compare(off, on, rules=req.rules, scope=req.scope)
    verdict = FailIf(req.fail_if, comparison.values())
    sides = [comparison.off.analysis, comparison.on.analysis]
    figures = _plots(req, comparison=comparison, analyses=sides, traces=[off, on],
                     run=_side_by_side(sides)) if req.plot_dir else []  # fmt: skip
    _emit(COMPARISON_RENDERERS[req.fmt](comparison) + _figure_links(req, figures), req.output)
    if req.strict and not comparison.contract.matched:
        raise NsysmoeError(f"--strict: measurement contract {comparison.contract.summary()}")
    verdict.exit()


def _many(req: Request, sides: list[list[str]]) -> None:
    """Many ranks: one run (per-rank table, spread, straggler) or an A/B of two runs."""
    from nsysmoe import api
    from nsysmoe.render.runs import RUN_RENDERERS, RUNCMP_RENDERERS

    kw = {"rules": req.rules, "scope": req.scope, "executor": req.executor,
          "cache_dir": req.cache_dir}  # fmt: skip
    if len(sides) == 1:
        run = api.analyze_many(sides[0], **kw)
        if not run.analyses:
            raise NsysmoeError(f"no file could be analysed; first: {_first_failure(run.failures)}")
        verdict = FailIf(req.fail_if, api.analysis_values_many(run))
        figures = _plots(req, run=run)
        _emit(RUN_RENDERERS[req.fmt](run) + _figure_links(req, figures), req.output)
        bad = run.failures
    else:
        rc = api.compare_many(sides[0], sides[1], **kw)
        if not rc.pairs:
            raise NsysmoeError(
                f"no rank pair could be compared; first: {_first_failure(rc.failures)}"
            )
        verdict = FailIf(req.fail_if, rc.values())
        if req.plot_dir is not None:
            click.echo("nsysmoe: note: --plot draws no figures for an A/B of many ranks yet; "
                       "plot each side's run on its own", err=True)  # fmt: skip
        _emit(RUNCMP_RENDERERS[req.fmt](rc), req.output)
        bad = rc.failures
        if req.strict and not rc.matched:
            notes = "; ".join(rc.contract_notes)
            raise NsysmoeError(f"--strict: measurement contract not matched: {notes}")
    if bad:
        click.echo(f"nsysmoe: warning: {len(bad)} input(s) could not be analysed (listed in the "
                   f"report), first: {_first_failure(bad)}", err=True)  # fmt: skip
    if bad and req.strict:
        raise NsysmoeError(f"--strict: {len(bad)} file(s) could not be analysed")
    verdict.exit()


def _first_failure(failures) -> str:  # noqa: ANN001
    return f"{failures[0].path}: {failures[0].error}" if failures else "nothing to read"


def _compat(req: Request, tool: str, paths: list[str]) -> None:
    """Another tool's conventions on every trace (the traces are one job's ranks)."""
    from nsysmoe import api

    ignored = [name for name, given in (("--fail-if", req.fail_if), ("--plot", req.plot_dir),
               ("--strict", req.strict), ("--window/--skip/--step-range", req.scope.steady
               or req.scope.window.bounded)) if given]  # fmt: skip
    if ignored:
        raise click.UsageError(f"--compat {tool} measures whole traces the other tool's way; "
                               f"drop {', '.join(ignored)}")  # fmt: skip
    from nsysmoe.render.compat import render_compat

    results = api.compat_many(paths, tool=tool, rules=req.rules)
    _emit(render_compat(req.fmt, paths, results), req.output)


def _side_by_side(sides: list) -> object:  # noqa: ANN001
    """Both sides' GPUs as one per-rank chart (off and on next to each other); no straggler
    is named, as off and on are different runs, not peers."""
    from nsysmoe.multirank import run_analysis

    return replace(run_analysis(sides), stragglers={})


def _plots(req: Request, **what: object) -> list[Path]:
    if req.plot_dir is None:
        return []
    from nsysmoe.render.plot import write_plots

    return write_plots(req.plot_dir, rules=req.rules, **what)  # type: ignore[arg-type]


def _figure_links(req: Request, figures: list[Path]) -> str:
    """Markdown links to the PNGs, relative to the report file; other formats list nothing."""
    pngs = [f for f in figures if f.suffix == ".png"]
    if req.fmt != "markdown" or not pngs:
        return ""
    base = (req.output.parent if req.output else Path.cwd()).resolve()
    links = [f"![{f.stem}]({os.path.relpath(f.resolve(), base)})" for f in pngs]
    return "\n#### Figures\n\n" + "\n\n".join(links) + "\n"


class FailIf:
    """``--fail-if`` conditions checked against the values before the report is written (a
    typo fails fast), applied after it. A condition whose value does not exist in this run
    (no communication, no iterations) fails too: CI must not pass on a missing number."""

    def __init__(self, conditions: tuple[str, ...], values: dict[str, float | None]):
        from nsysmoe.compare.verdict import parse_condition

        self.values = values
        self.conditions = [parse_condition(c, set(values)) for c in conditions]

    def exit(self) -> None:
        from nsysmoe.compare.verdict import failing

        hits = failing(self.conditions, self.values)
        if hits:
            click.echo("nsysmoe: --fail-if: " + "; ".join(hits), err=True)
            sys.exit(1)


@cli.command()
@click.argument("trace")
@click.option("--top", type=int, default=40, show_default=True, help="Rows to show (0 = all).")
@click.option("--class", "klass", help="Only kernels of this class (comm, gemm, attention, …).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("terminal", "markdown", "json", "csv")),
    default="terminal",
    show_default=True,
)
@rules_option
@replace_option
def kernels(
    trace: str, top: int, klass: str | None, fmt: str, rules_path: Path | None, rules_replace: bool
) -> None:
    """List kernel names by total time with their class, to audit the classification rules."""
    from nsysmoe.api import kernel_summary
    from nsysmoe.render.kernels import render_kernel_summary

    table = kernel_summary(trace, rules=_rules(rules_path, rules_replace), klass=klass)
    _emit(render_kernel_summary(table, fmt, top=top, source=trace), None)


@cli.command()
@click.option("--kineto", is_flag=True, help="The same run as PyTorch profiler JSON.")
def examples(kineto: bool) -> None:
    """Print the paths of the example traces shipped with nsysmoe (overlap off, then on)."""
    from nsysmoe.api import example_paths

    click.echo("\n".join(str(p) for p in example_paths("kineto" if kineto else "nsys")))


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"wrote {output}", err=True)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        cli.main(standalone_mode=False)
    except NsysmoeError as exc:
        click.echo(f"nsysmoe: error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("nsysmoe: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a bug, not bad input: still one line unless asked for details
        if os.environ.get("NSYSMOE_DEBUG"):
            raise
        click.echo(
            f"nsysmoe: internal error: {type(exc).__name__}: {exc} "
            "(rerun with NSYSMOE_DEBUG=1 for a traceback and report it)",
            err=True,
        )
        sys.exit(3)
