"""What ``nsysmoe analyze`` was asked, as given: every argument and option once
(:class:`Options`), and what is answered before any work: whether this very report is in the
result cache (:func:`served`, the report cache's policy), and whether ``-o`` and ``--plot`` can
be written without overwriting an input.

Imports no polars, no reader, no renderer: a cached report is served without them. The work
itself is :mod:`nsysmoe.request`'s.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from nsysmoe import env
from nsysmoe.errors import NsysmoeError, UsageError

if TYPE_CHECKING:  # the model imports polars: not for `nsysmoe --help` or a cached report
    from nsysmoe.model import Iterations, Window

FORMATS = ("terminal", "markdown", "json", "html")
#: what a terminal report's layout and colour depend on besides the result (terminal.py)
TERMINAL_ENV = ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "TERM")
FIGURE_SUFFIXES = (".png", ".svg")  # what --plot writes, so no input of these may be there
#: the options a report's cache key leaves out: keyed on their own (the inputs, the format, -o,
#: the rules), changing no text (--jobs, --cache), or never served from the cache (checks,
#: figures, Dask, another tool's conventions: :func:`report_key`). Every other option is keyed,
#: so a new one cannot be forgotten.
NOT_KEYED = frozenset({"traces", "fmt", "output", "rules_path", "rules_replace", "jobs",
                       "use_cache", "strict", "fail_if", "dask_address", "compat",
                       "plot_dir"})  # fmt: skip


@dataclass(frozen=True)
class Options:
    """``nsysmoe analyze``'s arguments and options, by the names the command line gives them."""

    traces: tuple[str, ...]
    fmt: str = "terminal"
    window: Window | Iterations | None = None  # ``--window``: a time window or iterations
    skip: int | None = None
    step_range: str | None = None
    whole_trace: bool = False
    raw_nvtx: bool = False
    phase: str | None = None
    all_nvtx: bool = False  # an A/B's table: every NVTX row
    wide: bool = False  # full kernel names
    align: str | None = None  # "collectives": refine the ranks' clocks by collective ends
    vary: tuple[str, ...] = ()  # the A/B's variable under test
    labels: tuple[str, str] | None = None  # ``--labels OFF,ON``
    strict: bool = False
    fail_if: tuple[str, ...] = ()
    jobs: int | None = None
    dask_address: str | None = None
    use_cache: bool = False
    rank: int | None = None  # ``--rank R``: one process of each export
    compat: str | None = None  # another tool's conventions ("hta")
    plot_dir: Path | None = None
    output: Path | None = None
    rules_path: Path | None = None  # an input too, which ``output`` may not overwrite
    rules_replace: bool = False
    logs: tuple[str, str] | None = None  # ``--logs OFF ON``: the unprofiled training logs
    log_window: tuple[int, int] | None = None  # ``--log-window 41-50``
    equivalent: bool = False  # the change is declared training-equivalent
    loss_tolerance: float | None = None  # with ``equivalent``: the largest relative difference
    what_if: tuple[str, ...] = ()  # ``--what-if SCENARIO``: replays beside the defaults
    no_path: bool = False  # ``--no-critical-path``: no dependency graph

    @property
    def inputs(self) -> list[str | Path]:
        """The files the arguments name before expansion, the rules file and logs included."""
        return self.and_rules(self.traces)

    def and_rules(self, paths: Sequence[str | Path]) -> list[str | Path]:
        """``paths``, the training logs and the rules file: the inputs no output may
        overwrite (and whose content a cached report is keyed on)."""
        return [*paths, *(self.logs or ()),
                *([self.rules_path] if self.rules_path is not None else [])]  # fmt: skip


@dataclass(frozen=True)
class StepsOptions:
    """``nsysmoe steps``'s arguments and options: training logs alone."""

    logs: tuple[str, ...]
    labels: tuple[str, ...] | None = None
    log_window: tuple[int, int] | None = None
    equivalent: bool = False
    loss_tolerance: float | None = None
    fmt: str = "terminal"
    fail_if: tuple[str, ...] = ()
    output: Path | None = None


@dataclass(frozen=True)
class SweepOptions:
    """``nsysmoe sweep``'s arguments and options: three or more settings of one knob."""

    settings: tuple[str, ...]
    vary: str = ""
    labels: tuple[str, ...] | None = None
    window: Window | Iterations | None = None
    skip: int | None = None
    step_range: str | None = None
    strict: bool = False
    fmt: str = "terminal"
    fail_if: tuple[str, ...] = ()
    output: Path | None = None
    plot_dir: Path | None = None
    rules_path: Path | None = None
    rules_replace: bool = False


#: the options a report's text depends on besides the inputs, the format and the rules: every
#: option but those :data:`NOT_KEYED`
REPORT_OPTIONS = tuple(f.name for f in fields(Options) if f.name not in NOT_KEYED)


def served(opts: Options) -> tuple[str | None, str | None]:
    """With ``--cache``: this report's result-cache name and, when it is there, its text (the
    CLI writes it and is done); ``(None, None)`` where the report is not served from the cache
    (:func:`report_key`)."""
    if not opts.use_cache:
        return None, None
    from nsysmoe import result_cache

    cache_dir, key = env.cache_dir(), report_key(opts)
    return key, None if key is None else result_cache.load_text(cache_dir, key)


def report_key(opts: Options) -> str | None:
    """The result-cache name of this report's text, or None where it is not served from there:
    checks or figures (--strict, --fail-if, --plot, --dask, --compat), an HTML page, a terminal
    report to a terminal, inputs that are not one or two files (directories, globs, many
    ranks). The key holds every input's content (the rules file's too), every option of
    :data:`REPORT_OPTIONS` and, for terminal text, what its width and colour depend on."""
    checked = opts.strict or opts.fail_if or opts.dask_address or opts.compat or opts.plot_dir
    if checked or opts.fmt == "html" or not 1 <= len(opts.traces) <= 2:
        return None
    if opts.fmt == "terminal" and opts.output is None and _stdout_is_tty():
        return None
    out = opts.output
    if out is not None and (os.path.isdir(out) or any(same_file(out, p) for p in opts.inputs)):
        return None  # the checks of nsysmoe.request say what is wrong
    from nsysmoe import result_cache

    terminal = opts.fmt == "terminal"
    rendering = tuple((k, os.environ.get(k)) for k in TERMINAL_ENV) if terminal else ()
    keyed = sorted((k, repr(getattr(opts, k))) for k in REPORT_OPTIONS)
    return result_cache.key("report", opts.inputs, opts.fmt, out is None, str(opts.rules_path),
                            opts.rules_replace, keyed, rendering)  # fmt: skip


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (links, ``..``, hard links; by their real paths where
    one does not exist yet)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


def write(output: Path, text: str) -> None:
    """The report to ``-o``, whole or not at all (:func:`nsysmoe.io.output.write_report`)."""
    from nsysmoe.io.output import write_report

    write_report(output, text)


def check_writable(output: Path | None, plot_dir: Path | None) -> None:
    """Before any work: ``-o`` and ``--plot`` can be written (one line saying why not)."""
    if output is not None:
        _check_target("-o", output, folder=False)
    if plot_dir is not None:
        _check_target("--plot", plot_dir, folder=True)


def check_not_inputs(opts: Options, inputs: Sequence[str]) -> None:
    """``-o`` may not be an input (the same file by any path: links, ``..``, hard links), nor may
    ``--plot`` hold an input figures could overwrite."""
    others = [Path(p) for p in opts.and_rules(inputs)]
    check_output_not_input(opts.output, others)
    if opts.plot_dir is not None:
        folder = os.path.realpath(opts.plot_dir)
        for path in others:
            if path.suffix in FIGURE_SUFFIXES and os.path.realpath(path.parent) == folder:
                raise UsageError(f"--plot {opts.plot_dir} holds the input {path}, which a "
                                 "figure could overwrite; plot to another folder")  # fmt: skip


def check_output_not_input(output: Path | None, inputs: Sequence[str | Path]) -> None:
    """``-o`` is none of ``inputs``, by any path (links, ``..``, hard links)."""
    if output is None:
        return
    for path in inputs:
        if same_file(output, path):
            raise UsageError(f"-o {output} is the input {path}; write the report to another "
                             "file (inputs are never overwritten)")  # fmt: skip


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


def _stdout_is_tty() -> bool:
    try:
        return bool(sys.stdout is not None and sys.stdout.isatty())
    except (AttributeError, ValueError, OSError):  # a replaced or closed stdout
        return False
