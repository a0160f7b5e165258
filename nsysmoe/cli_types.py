"""Command-line value types: ``--window`` as a click ``ParamType`` (a time window or iterations),
``--dask`` (a scheduler address, checked before any work), labels and log windows; the options
several commands share, each written once; the longer option help texts."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from nsysmoe.options import FORMATS
from nsysmoe.text import one_line

if TYPE_CHECKING:  # the model and parallel modules import polars: not for `nsysmoe --help`
    from nsysmoe.model import Iterations, Window

INT64_MAX = 2**63 - 1  # the trace timeline's range (nsysmoe.model.INT64_MAX)

UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*$")
_ITERS = re.compile(r"^\s*(?:iter(?:ations?)?:)?\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_time_ns(text: str) -> int:
    """A time in ns; beyond int64 ns (292 years: the trace timeline's range) is refused."""
    m = _TIME.match(text)
    shown = text if len(text) <= 30 else text[:29] + "…"
    if not m:
        raise click.BadParameter(f"{shown!r} is not a time; use e.g. 1500000, 250ms or 1.5s")
    ns = round(Decimal(m.group(1)) * UNITS_NS[m.group(2) or "ns"])  # exact: no float rounding
    if ns > INT64_MAX:
        raise click.BadParameter(f"{shown!r} is beyond the trace timeline (at most 2^63-1 ns, "
                                 "about 292 years); use a time within the trace")  # fmt: skip
    return ns


def _iteration(text: str) -> int:
    if len(text.lstrip("0")) > 18:  # before int(): 5000 digits is a ValueError there
        raise click.BadParameter(f"iteration {text[:20]}… is beyond any trace or log; use "
                                 "iteration numbers as the report lists them")  # fmt: skip
    return int(text)


class WindowType(click.ParamType):
    """``START:END`` on the timeline (units ns default, us, ms, s; a side may be empty; ``+``
    counts from the first GPU activity), or ``FIRST-LAST`` iterations (inclusive)."""

    name = "window"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Window | Iterations:
        from nsysmoe.model import Iterations, Window

        if isinstance(value, Window | Iterations):
            return value
        text = str(value)
        m = _ITERS.match(text)
        if m:
            first, last = _iteration(m.group(1)), _iteration(m.group(2))
            if last < first:
                raise click.BadParameter(f"empty iteration range {text!r}: LAST must be ≥ FIRST")
            return Iterations(first, last, skip=0, required=True)  # as asked: no warm-up skip
        if ":" not in text:
            raise click.BadParameter(
                "use START:END (e.g. 2s:5s, +1s:+3s, :500ms) or iterations 5-20"
            )
        lo_text, hi_text = (side.strip() for side in text.split(":", 1))
        relative = lo_text.startswith("+") or hi_text.startswith("+")
        lo = parse_time_ns(lo_text.lstrip("+")) if lo_text else None
        hi = parse_time_ns(hi_text.lstrip("+")) if hi_text else None
        if lo is not None and hi is not None and hi <= lo:
            raise click.BadParameter(f"empty window {text!r}: END must be after START")
        return Window(lo, hi, relative=relative)


WINDOW = WindowType()


class DaskAddressType(click.ParamType):
    """``local``, ``HOST:PORT`` or ``SCHEME://HOST:PORT``: checked here, connected to later."""

    name = "address"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> str:  # fmt: skip
        from nsysmoe.parallel import dask_address_problem

        problem = dask_address_problem(str(value))
        if problem:
            raise click.BadParameter(f"{value!r}: {problem}")
        return str(value)


DASK = DaskAddressType()


CACHE_HELP = (
    "Reuse traces read before ($NSYSMOE_CACHE_DIR or ~/.cache/nsysmoe); keyed by path, inode, "
    "size, mtime and a hash of the content (all of it up to 64 MiB; 64 spread blocks of a larger "
    "file, so an in-place edit there that keeps size and mtime and misses them is not seen). A "
    "cache that cannot be written is skipped with a warning."
)
RANK_HELP = (
    "Only this rank's GPUs (every device of its process), on each side of an A/B: the process "
    "whose pid is R (a PyTorch profiler trace's pid is its rank), else, in an nsys export, the "
    "R-th process by sorted pid when R < their number. One export per side."
)


class LabelsType(click.ParamType):
    """``OFF,ON``: two different, non-empty names for the sides of an A/B."""

    name = "OFF,ON"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, str]:  # fmt: skip
        if isinstance(value, tuple):
            return value  # type: ignore[return-value]
        parts = [p.strip() for p in str(value).split(",")]
        if len(parts) != 2 or not all(parts):
            raise click.BadParameter(f"{value!r}: give two names separated by one comma, e.g. "
                                     "'overlap off,overlap on'")  # fmt: skip
        if parts[0] == parts[1]:
            raise click.BadParameter(f"{value!r}: the two names must differ")
        return parts[0], parts[1]


LABELS = LabelsType()


class LabelListType(click.ParamType):
    """``A,B,C``: one different, non-empty name per training log (``nsysmoe steps``)."""

    name = "A,B,…"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, ...]:  # fmt: skip
        if isinstance(value, tuple):
            return value
        parts = tuple(p.strip() for p in str(value).split(","))
        if not all(parts):
            raise click.BadParameter(f"{value!r}: give one name a log separated by commas, "
                                     "e.g. 'base,+overlap,+tuning'")  # fmt: skip
        if len(set(parts)) != len(parts):
            raise click.BadParameter(f"{value!r}: the names must differ")
        return parts


LABEL_LIST = LabelListType()


class LogWindowType(click.ParamType):
    """``FIRST-LAST``: the iterations of a training log to measure (inclusive)."""

    name = "FIRST-LAST"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[int, int]:  # fmt: skip
        if isinstance(value, tuple):
            return value  # type: ignore[return-value]
        m = _ITERS.match(str(value))
        if not m:
            raise click.BadParameter(f"{str(value)[:30]!r}: give iterations FIRST-LAST, e.g. "
                                     "41-50")  # fmt: skip
        first, last = _iteration(m.group(1)), _iteration(m.group(2))
        if last < first:
            raise click.BadParameter(f"empty iteration range {value!r}: LAST must be ≥ FIRST")
        return first, last


LOG_WINDOW = LogWindowType()
LOG_WINDOW_HELP = ("Training logs: the iterations to measure, FIRST-LAST (41-50) [warm-up "
                   "detected as for traces].")  # fmt: skip
EQUIVALENT_HELP = ("Training logs: the change is declared training-equivalent: compare the "
                   "sides' losses step by step (flagged above the tolerance).")  # fmt: skip
class PositiveFloatType(click.ParamType):
    """A finite number above 0 (``--loss-tolerance``; click's FloatRange lets NaN through)."""

    name = "FLOAT"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:  # fmt: skip
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = float("nan")
        if not 0 < number < float("inf"):
            raise click.BadParameter(f"{str(value)[:30]!r}: give a positive number, e.g. 0.02")
        return number


LOSS_TOLERANCE = PositiveFloatType()
LOSS_TOLERANCE_HELP = "With --equivalent: the largest relative loss difference [0.01]."

VARY_HELP = (
    "A/B: the variable under test (repeat for several): a setting of the command line "
    "(overlap_moe_expert_parallel_comm, --expert-model-parallel-size), an environment variable "
    "(NCCL_ALGO), a version (nsys, driver, cuda, nccl_version) or a kernel channel whose counts "
    "may change (nccl, ep.dispatch). Undeclared, the one setting that differs is taken."
)
LABELS_HELP = "A/B: names of the two sides [from the variable under test, else the file names]."
WINDOW_HELP = ("Iterations FIRST-LAST (5-20), or time START:END on the trace timeline (2s:5s; "
               "ns/us/ms/s), or from the first GPU activity (+1s:+3s).")  # fmt: skip
DASK_HELP = ("Run per-file work on a Dask scheduler: 'local' (a LocalCluster), HOST:PORT or "
             "tcp://HOST:PORT (connecting waits up to $NSYSMOE_DASK_TIMEOUT s, default 10).")


# --- options several commands take, written once ------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])

format_option = click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal",
                             show_default=True)  # fmt: skip
fail_if_option = click.option("--fail-if", "fail_if", multiple=True,
                              help="Exit 1 when METRIC<N holds (repeat).")  # fmt: skip
output_option = click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
                             help="Write the report to this file instead of stdout.")  # fmt: skip
_RULES = (
    click.option("--rules", "rules_path", type=click.Path(dir_okay=False, path_type=Path),
                 help="TOML rule file, tried before the defaults (format: "
                 "nsysmoe/rules/default.toml)."),
    click.option("--rules-replace", is_flag=True,
                 help="Use only the --rules file, not the default rules."),
)  # fmt: skip
_LOGS = (
    click.option("--log-window", type=LOG_WINDOW, help=LOG_WINDOW_HELP),
    click.option("--equivalent", is_flag=True, help=EQUIVALENT_HELP),
    click.option("--loss-tolerance", type=LOSS_TOLERANCE, help=LOSS_TOLERANCE_HELP),
)


def _all(options: tuple[Callable[[F], F], ...]) -> Callable[[F], F]:
    """Several click options as one decorator, in the order ``--help`` lists them."""
    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


rules_options = _all(_RULES)  # --rules, --rules-replace (analyze, kernels)
#: ``nsysmoe sweep``'s own options
sweep_options = _all((
    click.option("--vary", required=True, metavar="KNOB",
                 help="The one setting the exports differ in: moe_deepep_num_sms, "
                      "moe_hybridep_num_sms, a dispatcher or overlap option, an environment "
                      "variable."),
    click.option("--labels", type=LABEL_LIST, help="Names of the settings [KNOB=value]."),
    click.option("--window", type=WINDOW, help=WINDOW_HELP),
    click.option("--skip", type=click.IntRange(min=0),
                 help="Skip this many iterations at the start [detected warm-up]."),
    click.option("--step-range", help="Regex naming iteration ranges; group 1 = number."),
    click.option("--strict", is_flag=True,
                 help="Exit 2 when a setting differs from the first in more than KNOB."),
    click.option("--plot", "plot_dir", type=click.Path(file_okay=False, path_type=Path),
                 help="Write the figure (PNG and SVG) to this folder."),
))  # fmt: skip
log_options = _all(_LOGS)  # --log-window, --equivalent, --loss-tolerance (analyze, steps)


NO_PATH_HELP = "Skip the dependency graph: no critical path, no what-if replays."
WHAT_IF_HELP = ("Replay a change on the dependency graph: TARGET*FACTOR (ep.combine*0.5, "
                "nccl.**0, comm*0, host*0) or straggler; repeatable.")


def what_if(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
            ) -> tuple[str, ...]:  # fmt: skip
    """``--what-if`` checked when given (a bad scenario is a usage error, said in one line)."""
    if not value:
        return value
    from nsysmoe.errors import NsysmoeError
    from nsysmoe.measure.critical_path import parse_scenario

    try:
        return tuple(parse_scenario(v).text for v in value)
    except NsysmoeError as exc:
        raise click.BadParameter(str(exc).removeprefix("--what-if "), ctx, param) from None

#: ``nsysmoe analyze --help``: what it does and what it reads
ANALYZE_HELP = """Per GPU: communication hidden by compute, exposed, idle, and the dominant wall.

One TRACE: its report. Two (OFF ON): a matched A/B comparison with a verdict. Each may be a
directory or a quoted glob of per-rank files ('off/*.sqlite'); more than two arguments are one
multi-rank run. TRACES are nsys exports (`nsys export --type sqlite` or `arrow` files,
`parquetdir` or `arrowdir` folders; .nsys-rep when nsys is on PATH) or PyTorch profiler JSON. A
folder holding <TABLE>.parquet or <TABLE>.arrow files is one export; any other folder is a
folder of ranks (exports, export folders, reports)."""

#: ``nsysmoe sweep --help``
SWEEP_HELP = """N settings of one knob side by side: step time, exposed communication, hidden %,
the SMs the dispatcher holds, compute inflation, each against the first; the best marked.

SETTINGS are three or more exports (the first is the base), each one setting of the knob
--vary names; everything else must be equal (the contract is checked against the first). A
setting may be a folder (or a quoted glob) of one run's rank files: an iteration's step is then
the median over all their processes, and the files pair with the base's by sorted name."""


def progress(n: int, label: str):  # noqa: ANN202 - click's ProgressBar type is private
    """The CLI's progress bar: on a terminal only (piped, a bar is one more stderr line
    around an error or a warning)."""
    return click.progressbar(length=n, label=one_line(label), file=sys.stderr,
                             hidden=n < 2 or not sys.stderr.isatty())  # fmt: skip


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: object = None, line: str | None = None) -> None:  # fmt: skip
    """A warning (a library's, or one re-raised from a worker) as one stderr line, made visible
    like every other line: its message may carry a name from the trace."""
    where = f"{os.path.basename(filename)}:{lineno}"
    click.echo(f"nsysmoe: warning: {one_line(message)} ({category.__name__} at {one_line(where)})",
               err=True)  # fmt: skip
