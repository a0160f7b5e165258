"""Where ``nsysmoe analyze`` spends its time: inclusive wall time of every nsysmoe function.

    python bench/stage_times.py [--top N] [--alone MODULE] -- analyze TRACE [TRACE] ...

Runs the CLI in this process with every module-level function and plain method of the
``nsysmoe`` package wrapped by a timer (call count, inclusive wall seconds, outermost calls
only, so recursion is not counted twice). Unlike cProfile, library code (polars, numpy,
json) runs at full speed and is charged to the nsysmoe function that called it; nested nsysmoe
functions are included in their callers' times. Prints the top functions, slowest first.

In a run, two threads share the cores (the analysis' NVTX side, an A/B's two sides), so a
step's wall time there includes its waits. ``--alone nsysmoe.pipeline`` (any nsysmoe module)
then runs each nsysmoe function that module names again on the arguments of its first call,
one at a time with nothing else running, and prints the least wall and CPU seconds of 3 runs:
what each step costs by itself (its polars and numpy threads included). The captured
arguments stay alive until then, so the run's own peak memory is higher; the per-trace launch
join is cached, so a step that would compute it finds it done.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import pkgutil
import sys
import time
from collections.abc import Callable
from typing import Any

import nsysmoe

TOTALS: dict[str, list[float]] = {}  # qualified name -> [calls, seconds]
_ACTIVE: dict[str, int] = {}
#: --alone: qualified names whose first call is kept, and that call (function, args, kwargs)
CAPTURE: set[str] = set()
FIRST: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {}


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if name in CAPTURE:
            FIRST.setdefault(name, (fn, args, kwargs))
        depth = _ACTIVE.get(name, 0)
        _ACTIVE[name] = depth + 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _ACTIVE[name] = depth
            entry = TOTALS.setdefault(name, [0, 0.0])
            entry[0] += 1
            if depth == 0:
                entry[1] += time.perf_counter() - t0

    return wrapper


def instrument() -> None:
    """Wrap nsysmoe's functions wherever a module binds them (``from x import f`` included)."""
    modules = []
    for info in pkgutil.walk_packages(nsysmoe.__path__, "nsysmoe.", onerror=lambda _: None):
        if info.name.endswith("__main__"):
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except Exception as exc:  # an optional or half-written module must not stop the timing
            print(f"stage_times: not instrumented: {info.name} ({exc})", file=sys.stderr)
    modules.append(nsysmoe)
    wrapped: dict[int, Callable[..., Any]] = {}
    json.dumps = _timed("json.dumps", json.dumps)  # library work worth its own line

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if id(fn) not in wrapped:
            wrapped[id(fn)] = _timed(f"{fn.__module__}.{fn.__qualname__}", fn)
        return wrapped[id(fn)]

    for module in modules:
        for attr, value in list(vars(module).items()):
            if inspect.isfunction(value) and value.__module__.startswith("nsysmoe"):
                setattr(module, attr, wrap(value))
            elif isinstance(value, dict):  # dispatch tables, e.g. render.RENDERERS
                for key, item in list(value.items()):
                    if inspect.isfunction(item) and item.__module__.startswith("nsysmoe"):
                        value[key] = wrap(item)
            elif inspect.isclass(value) and value.__module__ == module.__name__:
                for name, member in list(vars(value).items()):
                    if inspect.isfunction(member) and not name.startswith("__"):
                        setattr(value, name, wrap(member))
                    elif name == "__init__" and inspect.isfunction(member):
                        setattr(value, name, wrap(member))


def named_in(module_name: str) -> set[str]:
    """The qualified names of the (wrapped) nsysmoe functions a module names at module level."""
    module = importlib.import_module(module_name)
    return {
        f"{v.__module__}.{v.__qualname__}"
        for v in vars(module).values()
        if inspect.isfunction(v) and hasattr(v, "__wrapped__")
        and v.__module__.startswith("nsysmoe")
    }


def alone(repeat: int = 3) -> list[tuple[float, float, str]]:
    """(least wall s, least CPU s, name) of each captured first call run again ``repeat`` times,
    one at a time; the process' CPU time counts every thread, and nothing else runs now. A
    call that cannot run again (its arguments held a pool that is shut down now) is named on
    stderr and left out."""
    out = []
    for name, (fn, args, kwargs) in FIRST.items():
        walls, cpus = [], []
        try:
            for _ in range(repeat):
                w0, c0 = time.perf_counter(), time.process_time()
                fn(*args, **kwargs)
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
        except Exception as exc:  # noqa: BLE001 - a bench note, not a failure
            print(f"stage_times: {name} not run again ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
            continue
        out.append((min(walls), min(cpus), name))
    return sorted(out, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--alone", metavar="MODULE",
                        help="run each nsysmoe function MODULE names again alone (min of 3)")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    cli_args = argv[split + 1 :]
    instrument()
    if args.alone:
        try:
            CAPTURE.update(named_in(args.alone))
        except ModuleNotFoundError as exc:
            parser.error(f"--alone: {exc}")
    from nsysmoe import cli

    t0 = time.perf_counter()
    try:
        cli.cli.main(cli_args, standalone_mode=False)
    finally:
        total = time.perf_counter() - t0
        rows = sorted(TOTALS.items(), key=lambda kv: -kv[1][1])[: args.top]
        print(
            f"nsysmoe {' '.join(cli_args)}: {total:.2f} s in the CLI (after imports)",
            file=sys.stderr,
        )
        print(f"{'inclusive s':>11}  {'calls':>7}  function", file=sys.stderr)
        for name, (calls, seconds) in rows:
            print(f"{seconds:11.3f}  {int(calls):7d}  {name}", file=sys.stderr)
    if args.alone:
        print(f"\neach function {args.alone} names, alone (least of 3 runs; first call's "
              "arguments):", file=sys.stderr)
        print(f"{'wall s':>8}  {'cpu s':>7}  function", file=sys.stderr)
        for wall, cpu, name in alone():
            print(f"{wall:8.3f}  {cpu:7.3f}  {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
