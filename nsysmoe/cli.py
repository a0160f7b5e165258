"""Command line: wiring only (options → :class:`~nsysmoe.options.Options` → request → output, exit
code); what the options mean is :mod:`nsysmoe.request`'s, the work the library's."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nsysmoe import cli_types as ct
from nsysmoe._version import __version__
from nsysmoe.errors import NsysmoeError
from nsysmoe.options import Options, StepsOptions, SweepOptions, served, write
from nsysmoe.text import one_line

if TYPE_CHECKING:  # the request layer imports polars: not for `nsysmoe --help`
    from nsysmoe.request import Outcome

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysmoe")
def cli() -> None:
    """Prove how much MoE expert-parallel communication the compute hid, from nsys exports."""


@cli.command(help=ct.ANALYZE_HELP)
@click.argument("traces", nargs=-1, required=True)
@ct.format_option
@click.option("--window", type=ct.WINDOW, help=ct.WINDOW_HELP)
@click.option("--skip", type=click.IntRange(min=0),
              help="Warm-up iterations to skip [detected].")  # fmt: skip
@click.option("--step-range", help="Regex naming iteration ranges; group 1 = number.")
@click.option("--whole-trace", is_flag=True, help="The whole traces, not the steady iterations.")
@click.option("--raw-nvtx", is_flag=True,
              help="Keep NVTX names as recorded (', op_id = N' suffixes too).")  # fmt: skip
@click.option("--phase", help="Regex naming more NVTX ranges to measure as step phases.")
@click.option("--what-if", "what_if", multiple=True, metavar="SCENARIO", callback=ct.what_if,
              help=ct.WHAT_IF_HELP)  # fmt: skip
@click.option("--no-critical-path", "no_path", is_flag=True, help=ct.NO_PATH_HELP)
@click.option("--all-nvtx", is_flag=True, help="A/B: every NVTX row [the 5 largest CPU changes].")
@click.option("--wide", is_flag=True, help="Full kernel names [shortened, kept distinct].")
@click.option("--align", type=click.Choice(["collectives"]),
              help="Many ranks: also align clocks so collectives end together.")
@click.option("--vary", multiple=True, metavar="NAME", help=ct.VARY_HELP)
@click.option("--labels", type=ct.LABELS, help=ct.LABELS_HELP)
@click.option("--strict", is_flag=True, help="A/B: an unexpected contract difference is an error.")
@ct.fail_if_option
@click.option("--jobs", type=click.IntRange(min=1),
              help="Worker processes for many files [all cores].")  # fmt: skip
@click.option("--dask", "dask_address", type=ct.DASK, help=ct.DASK_HELP)
@click.option("--cache", "use_cache", is_flag=True, help=ct.CACHE_HELP)
@click.option("--rank", type=click.IntRange(min=0), metavar="R", help=ct.RANK_HELP)
@click.option("--compat", type=click.Choice(["hta"]), help="Also compute another tool's figure "
              "with its conventions (hta: HolisticTraceAnalysis).")  # fmt: skip
@click.option("--logs", nargs=2, metavar="OFF_LOG ON_LOG",
              help="A/B: the unprofiled training logs of the two sides: accept on them.")
@ct.log_options
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write figures (PNG and SVG) to this folder; the Markdown report links them.")
@ct.output_option
@ct.rules_options
def analyze(**options: Any) -> None:
    """Per GPU: communication hidden by compute, exposed, idle, and the dominant wall."""
    opts = Options(**options)
    color = True if opts.fmt == "terminal" else None  # FORCE_COLOR piped
    key, text = served(opts)  # a repeat of this very report: served before polars is imported
    if text is not None:
        _emit(text, opts.output, color=color)
        return
    from nsysmoe.request import execute

    _finish(execute(opts, ct.progress, key), opts.output, color)


@cli.command()
@click.argument("logs", nargs=-1, required=True)
@click.option("--labels", type=ct.LABEL_LIST, help="Names of the logs' sides [file names].")
@ct.log_options
@ct.format_option
@ct.fail_if_option
@ct.output_option
def steps(**options: Any) -> None:
    """Accept a change on unprofiled training logs: steady step time and TFLOP/s with 95 % CIs,
    loss, skipped/NaN iterations and peak memory.

    One LOG: its summary. Two (OFF ON): an A/B with its verdict. More: a ladder of changes, each
    against the one before and the first. LOGS are Megatron-LM / Megatron-Bridge console logs,
    Megatron metrics JSON, torchtitan logs, or CSV/JSONL with step and step_time_s.
    """
    from nsysmoe.request import steps_outcome

    opts = StepsOptions(**options)
    _finish(steps_outcome(opts), opts.output, True if opts.fmt == "terminal" else None)


def _finish(outcome: Outcome, output: Path | None, color: bool | None) -> None:
    """Notes, the report, notes, then the exit code: a --strict error 2, --fail-if 1."""
    for line in outcome.before:
        click.echo(f"nsysmoe: {one_line(line)}", err=True)
    _emit(outcome.text, output, color=color)
    for line in outcome.after:
        click.echo(f"nsysmoe: {one_line(line)}", err=True)
    if outcome.error:
        raise NsysmoeError(outcome.error)
    if outcome.failed:
        click.echo("nsysmoe: --fail-if: " + one_line("; ".join(outcome.failed)), err=True)
        sys.exit(1)


@cli.command(help=ct.SWEEP_HELP)
@click.argument("settings", nargs=-1, required=True)
@ct.sweep_options
@ct.format_option
@ct.fail_if_option
@ct.output_option
@ct.rules_options
def sweep(**options: Any) -> None:
    from nsysmoe.request import sweep_outcome

    opts = SweepOptions(**options)
    _finish(sweep_outcome(opts), opts.output, True if opts.fmt == "terminal" else None)


@cli.command()
@click.argument("trace")
@click.option("--top", type=click.IntRange(min=0), default=40, show_default=True,
              help="Rows to show (0 = all).")  # fmt: skip
@click.option("--class", "klass", help="Only kernels of this class (comm, gemm, attention, …).")
@click.option("--format", "fmt", type=click.Choice(("terminal", "markdown", "json", "csv")),
              default="terminal", show_default=True)  # fmt: skip
@click.option("--wide", is_flag=True, help="Full kernel names [shortened, kept distinct].")
@ct.rules_options
def kernels(trace: str, top: int, klass: str | None, fmt: str, wide: bool,
            rules_path: Path | None, rules_replace: bool) -> None:  # fmt: skip
    """List kernel names by total time with their class, to audit the classification rules."""
    from nsysmoe.request import kernels_report

    _emit(kernels_report(trace, top, klass, fmt, wide, rules_path, rules_replace), None)


@cli.command()
@click.option("--kineto", is_flag=True, help="The same run as PyTorch profiler JSON.")
@click.option("--logs", is_flag=True, help="The unprofiled runs' training logs (synthetic).")
def examples(kineto: bool, logs: bool) -> None:
    """Print the paths of the example traces shipped with nsysmoe (overlap off, then on)."""
    from nsysmoe.api import example_paths

    kind = "logs" if logs else "kineto" if kineto else "nsys"
    click.echo("\n".join(str(p) for p in example_paths(kind)))


@cli.command("recipe-path")
def recipe_path() -> None:
    """Print the folder to put in NSYS_RECIPE_PATH for `nsys recipe nsysmoe` (docs/recipe.md)."""
    click.echo(Path(__file__).resolve().parent.parent)


def _emit(text: str, output: Path | None, color: bool | None = None) -> None:
    if output is None:  # color=True: keep rich's escapes (only there when colour was asked)
        click.echo(text, nl=False, color=color)
        return
    write(output, text)
    click.echo(f"wrote {one_line(output)}", err=True)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        with warnings.catch_warnings():  # restored after: main() may run in a caller's process
            warnings.showwarning = ct.show_warning  # every stderr line goes through one_line
            cli.main(prog_name="nsysmoe", standalone_mode=False)
    except NsysmoeError as exc:  # a UsageError too: one line, like every user error
        click.echo(f"nsysmoe: error: {one_line(exc)}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("nsysmoe: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see: {one_line(exc.ctx.command_path)} --help)"
        click.echo(f"nsysmoe: error: {one_line(exc.format_message())}{hint}", err=True)
        sys.exit(2 if exc.exit_code else 0)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a bug (or a library's panic), not bad input: still one line
        if os.environ.get("NSYSMOE_DEBUG"):
            raise
        click.echo(
            f"nsysmoe: internal error: {type(exc).__name__}: {one_line(exc, 500)} "
            "(rerun with NSYSMOE_DEBUG=1 for a traceback and report it)",
            err=True,
        )
        sys.exit(3)
