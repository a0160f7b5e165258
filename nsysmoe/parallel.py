"""Many files: expand directories and globs, and map per-file work over worker processes or a
Dask cluster. One unreadable file is reported; the others proceed. No user interface here: the
caller hands in how to show progress (the CLI: a progress bar on stderr)."""

from __future__ import annotations

import glob
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nsysmoe.errors import NsysmoeError
from nsysmoe.results import Failure

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".json", ".json.gz")


def expand(arg: str) -> list[str]:
    """A directory → its trace files; a glob → its matches; anything else → itself. Sorted."""
    path = Path(arg)
    if path.is_dir():
        found = _one_per_run(p for p in path.iterdir() if p.name.endswith(TRACE_SUFFIXES))
        if not found:
            raise NsysmoeError(
                f"{arg}: directory holds no trace files ({', '.join(TRACE_SUFFIXES)})"
            )
        return found
    if glob.has_magic(arg):
        found = sorted(glob.glob(arg))
        if not found:
            raise NsysmoeError(f"{arg}: pattern matches no files")
        return found
    return [arg]


def _one_per_run(paths: Iterable[Path]) -> list[str]:
    """A report and its SQLite export side by side are one rank: keep the export."""
    paths = sorted(paths)
    exported = {p.with_suffix("") for p in paths if p.suffix == ".sqlite"}
    report = (".nsys-rep", ".qdrep")
    return [str(p) for p in paths if not (p.suffix in report and p.with_suffix("") in exported)]


class Progress(Protocol):
    def update(self, n: int) -> None: ...


#: ``(items, label) → context manager with update(n)``: how the caller shows progress
ProgressFactory = Callable[[int, str], AbstractContextManager[Progress]]


class _Silent:
    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def silent(n: int, label: str) -> _Silent:
    """No progress shown (the API's default)."""
    return _Silent()


@dataclass(frozen=True)
class Executor:
    """Where per-file work runs: ``jobs`` local processes, or a Dask scheduler address
    (``"local"`` starts a LocalCluster); ``progress`` shows it."""

    jobs: int = 1
    dask: str | None = None
    progress: ProgressFactory = silent


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _safe(fn: Callable[..., Any], item: Any) -> Any:
    try:
        return fn(*item) if isinstance(item, tuple) else fn(item)
    except NsysmoeError as exc:
        return Failure(_label(item), str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop a 256-rank run
        return Failure(_label(item), f"{type(exc).__name__}: {exc}")


def _label(item: Any) -> str:
    return " + ".join(map(str, item)) if isinstance(item, tuple) else str(item)


def map_files(
    fn: Callable[..., Any], items: Sequence[Any], executor: Executor, label: str
) -> list[Any]:
    """``fn`` over items (paths, or tuples of paths), results in input order; a failing item
    yields a :class:`Failure` instead of raising. ``fn`` must be a module-level function."""
    if executor.dask:
        return _map_dask(fn, items, executor.dask)
    if executor.jobs <= 1 or len(items) == 1:
        with executor.progress(len(items), label) as bar:
            out = []
            for item in items:
                out.append(_safe(fn, item))
                bar.update(1)
            return out
    results: list[Any] = [None] * len(items)
    # forkserver, not fork: a forked child inherits polars' thread pool locks (the parent has
    # used polars by now, e.g. compiling the rules) and can deadlock in its first query
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(min(executor.jobs, len(items)), mp_context=context) as pool:
        futures = {pool.submit(_safe, fn, item): i for i, item in enumerate(items)}
        with executor.progress(len(items), label) as bar:
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                bar.update(1)
    return results


def _map_dask(fn: Callable[..., Any], items: Sequence[Any], address: str) -> list[Any]:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise NsysmoeError("--dask needs dask.distributed: pip install 'nsysmoe[dask]'") from None
    if address == "local":
        with LocalCluster(processes=True, dashboard_address=None) as cluster, Client(cluster) as c:
            return c.gather(c.map(_safe, [fn] * len(items), list(items), pure=False))
    with Client(address) as client:
        return client.gather(client.map(_safe, [fn] * len(items), list(items), pure=False))
