"""Command line: wiring only (options → load → analyze → render); the work lives in the library."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from nsysmoe import __version__
from nsysmoe.classify import RuleSet, default_rules, load_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.overlap import Window

UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*$")
FORMATS = ("terminal", "markdown", "json")


def parse_time_ns(text: str) -> int:
    m = _TIME.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a time; use e.g. 1500000, 250ms or 1.5s")
    return round(float(m.group(1)) * UNITS_NS[m.group(2) or "ns"])


def parse_window(ctx: click.Context, param: click.Parameter, text: str | None) -> Window:
    """``START:END`` on the trace timeline; units ns (default), us, ms, s; a side may be empty."""
    if text is None:
        return Window()
    if ":" not in text:
        raise click.BadParameter("use START:END, e.g. 2s:5s, 2s: or :500ms")
    lo_text, hi_text = text.split(":", 1)
    lo = parse_time_ns(lo_text) if lo_text.strip() else None
    hi = parse_time_ns(hi_text) if hi_text.strip() else None
    if lo is not None and hi is not None and hi <= lo:
        raise click.BadParameter(f"empty window {text!r}: END must be after START")
    return Window(lo, hi)


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
    help="Analyse only [START, END) of the timeline, e.g. 2s:5s (units ns/us/ms/s).",
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
    window: Window,
    output: Path | None,
    rules_path: Path | None,
    rules_replace: bool,
) -> None:
    """Per GPU: communication hidden by compute, exposed, idle, and the dominant wall.

    TRACES are `nsys export --type sqlite` files (or .nsys-rep when nsys is on PATH).
    """
    from nsysmoe.api import analyze as run_analysis
    from nsysmoe.render import RENDERERS

    rules = _rules(rules_path, rules_replace)
    analyses = [run_analysis(t, rules=rules, window=window) for t in traces]
    _emit(RENDERERS[fmt](analyses), output)


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
def examples() -> None:
    """Print the paths of the example exports shipped with nsysmoe (overlap off, then on)."""
    from nsysmoe.api import example_paths

    click.echo("\n".join(str(p) for p in example_paths()))


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
