"""Many files: expand directories and globs, and map per-file work over worker processes or a
Dask cluster. One unreadable file is reported; the others proceed. No user interface here: the
caller hands in how to show progress (the CLI: a progress bar on stderr).

Longer than most modules (~340 lines) because it is the one place that decides what a per-file
failure is, on every executor: a panic, a dying worker process, a Dask worker lost or a
scheduler that never answers must all end as that file's one-line Failure, and the three
executors share those rules; split it when a fourth executor arrives."""

from __future__ import annotations

import contextlib
import glob
import gzip
import json
import logging
import multiprocessing
import os
import re
import warnings
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nsysmoe import env
from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.io.kineto_events import GZIP_MAGIC, is_kineto
from nsysmoe.io.nsys_columnar import columnar_kind
from nsysmoe.results import Failure
from nsysmoe.text import flat

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".json", ".json.gz", ".arrows")


def expand(arg: str, skipped: list[str] | None = None, *, one_of_many: bool = False) -> list[str]:
    """A directory → its trace files; a glob → its matches; anything else → itself. Sorted. A
    path that exists is itself even when its name holds glob characters (``x[1].sqlite``). JSON
    files a directory or glob holds that are no profiler traces (:func:`is_trace`: a run's
    sidecar metadata) are left out, appended to ``skipped``; so is such a file named as
    ``one_of_many`` arguments (the shell's expansion of ``run/*``), never one named alone."""
    try:
        found, others = _expand(arg)
        if one_of_many and found == [arg] and os.path.isfile(arg) and not is_trace(Path(arg)):
            found, others = [], [arg]
    except OSError as exc:  # e.g. a folder on the way that this user may not list
        raise NsysmoeError(f"{arg}: cannot look into it ({exc.strerror or exc}); check the "
                           "path and its permissions") from None
    if skipped is not None:
        skipped.extend(others)
    return found


def _expand(arg: str) -> tuple[list[str], list[str]]:
    path = Path(arg)
    if path.is_dir() and columnar_kind(path):
        return [arg], []  # one Parquet/Arrow export
    if path.is_dir():
        found, skipped = _traces(_one_per_run(p for p in path.iterdir() if _export_entry(p)))
        if not found:
            besides = f" (only {skipped_note(skipped)})" if skipped else ""
            raise NsysmoeError(
                f"{arg}: directory holds no trace files ({', '.join(TRACE_SUFFIXES)}) and no "
                f"Parquet/Arrow export folders (NAME_pqtdir/, NAME_arwdir/){besides}"
            )
        return found, skipped
    if glob.has_magic(arg) and not os.path.lexists(arg):
        found, skipped = _traces(sorted(glob.glob(arg)))
        if not found:
            besides = f" that are traces (only {skipped_note(skipped)})" if skipped else ""
            raise NsysmoeError(f"{arg}: pattern matches no files{besides}")
        return found, skipped
    return [arg], []


def _traces(paths: list[str]) -> tuple[list[str], list[str]]:
    """``paths`` split into traces and the JSON files that are not (sniffed, not parsed)."""
    traces = {p: is_trace(Path(p)) for p in paths}
    return [p for p in paths if traces[p]], [p for p in paths if not traces[p]]


def skipped_note(skipped: Sequence[str], shown: int = 3) -> str:
    """One line naming the files :func:`expand` left out: ``skipped 64 files that are not
    traces: rank00.json, rank01.json, rank02.json, …``."""
    names = ", ".join(os.path.basename(p) for p in skipped[:shown])
    more = ", …" if len(skipped) > shown else ""
    noun = "file that is not a trace" if len(skipped) == 1 else "files that are not traces"
    return f"skipped {len(skipped)} {noun}: {names}{more}"


#: how much of a JSON file's (decompressed) text :func:`is_trace` looks at
SNIFF_BYTES = 1 << 20


def is_trace(path: Path) -> bool:
    """Whether a file a directory or glob holds is a trace to analyse. Only ``.json`` /
    ``.json.gz`` files are looked into: one is a trace unless its text opens like JSON (the
    Kineto reader's own test, :func:`~nsysmoe.io.kineto_events.is_kineto`), is short enough to
    read whole (:data:`SNIFF_BYTES`) and is a JSON object without ``traceEvents`` — a run's
    metadata, not a profile. Anything in doubt (unreadable, truncated, larger) is a trace, so
    a broken trace is still reported as a failure, never skipped."""
    if not path.name.endswith((".json", ".json.gz")):
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
            if not is_kineto(head):
                return True
            fh.seek(0)
            if head.startswith(GZIP_MAGIC):
                with gzip.open(fh) as unzipped:
                    text = unzipped.read(SNIFF_BYTES + 1)
            else:
                text = fh.read(SNIFF_BYTES + 1)
        if b'"traceEvents"' in text or len(text) > SNIFF_BYTES:
            return True
        doc = json.loads(text)
    except (OSError, EOFError, ValueError, zlib.error):
        return True  # the reader says what is wrong with it
    return not isinstance(doc, dict) or "traceEvents" in doc


def _export_entry(p: Path) -> bool:
    """Whether an entry of a folder of ranks is one rank's trace: a trace file by its suffix,
    or a folder that is a Parquet/Arrow export (it holds ``<TABLE>.parquet``/``.arrow``)."""
    if p.is_dir():
        return columnar_kind(p) is not None
    return p.name.endswith(TRACE_SUFFIXES)


#: one run's files side by side, the one kept first: its SQLite export, its report (which
#: reads a usable Parquet export beside it), its Parquet export, its Arrow exports
_RUN_FORMS = (".sqlite", ".nsys-rep", ".qdrep", "_pqtdir", "_arwdir", ".arrows")


def _one_per_run(paths: Iterable[Path]) -> list[str]:
    """A report and its exports side by side (``X.sqlite``, ``X.nsys-rep``, ``X_pqtdir/``,
    ``X_arwdir/``, ``X.arrows``) are one rank: keep one, in the order of :data:`_RUN_FORMS`."""
    paths = sorted(paths)

    def run(p: Path) -> tuple[str, int] | None:
        for rank, form in enumerate(_RUN_FORMS):
            if p.name.endswith(form) and len(p.name) > len(form):
                return p.name[: -len(form)], rank
        return None

    best: dict[str, int] = {}
    for p in paths:
        if (key := run(p)) is not None:
            best[key[0]] = min(best.get(key[0], key[1]), key[1])
    return [str(p) for p in paths if (key := run(p)) is None or best[key[0]] == key[1]]


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
    return env.cores()


#: ``NSYSMOE_DASK_TIMEOUT``: seconds to reach a Dask scheduler and find a worker there
DASK_TIMEOUT_S = 10.0
_ADDRESS = re.compile(
    r"^(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$"
)
_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss")


def dask_address_problem(address: str) -> str | None:
    """Why ``address`` is no scheduler address (``local``, ``HOST:PORT``, ``SCHEME://HOST:PORT``
    with tcp, tls, ucx, ws or wss), or None."""
    m = _ADDRESS.match(address)
    if address == "local" or (m and m["scheme"] in (None, *_SCHEMES)
                              and 0 < int(m["port"]) < 65536):  # fmt: skip
        return None
    return ("not a scheduler address; use 'local' (a LocalCluster here), HOST:PORT or "
            "tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786; also tls://, ucx://, ws://)")


def check_dask_address(address: str) -> str:
    """The address, else a :class:`UsageError` that shows the forms."""
    problem = dask_address_problem(address)
    if problem:
        raise UsageError(f"--dask {address!r}: {problem}")
    return address


def dask_timeout() -> float:
    return env.seconds("NSYSMOE_DASK_TIMEOUT", DASK_TIMEOUT_S, upper=1e6, example="30")


def one_line(text: str, limit: int = 500) -> str:
    """A message on one line (a library's multi-line message joined), at most ``limit`` chars:
    :func:`nsysmoe.text.flat`, nothing escaped (a :class:`Failure` and the JSON keep the text as
    it is; each medium escapes it where it shows it)."""
    return flat(str(text), limit)


def _safe(fn: Callable[..., Any], item: Any) -> Any:
    """``fn(item)``, or the item's :class:`Failure`: any exception but an interrupt or an exit —
    polars' PanicException (a Rust panic on a malformed file) derives from BaseException — is
    that item's failure, as plain picklable data. nsysmoe's own warnings travel with the value
    (a worker process cannot show them in the caller's report); others are shown as usual."""
    with warnings.catch_warnings(record=True) as caught:
        try:
            value = fn(*item) if isinstance(item, tuple) else fn(item)
        except NsysmoeError as exc:
            value = Failure(_label(item), _without_path(item, one_line(str(exc))))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - one bad file must not stop a 256-rank run
            value = Failure(_label(item), _describe(exc))
    notes = []
    for w in caught:
        if w.category.__module__.partition(".")[0] == "nsysmoe":
            notes.append((w.category, one_line(str(w.message))))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    return _Done(value, tuple(notes)) if notes else value


def _without_path(item: Any, message: str) -> str:
    """A reader's message without the path it starts with, when that is the failing item's own
    path (as given, or as the reader spelled it: ``./x.sqlite`` → ``x.sqlite``): a
    :class:`Failure` names its path once, beside the error. A pair's messages keep theirs (they
    say which file of the two)."""
    if isinstance(item, tuple):
        return message
    for spelling in dict.fromkeys((str(item), str(Path(item)), os.path.abspath(item))):
        if message.startswith(spelling + ": "):
            return message[len(spelling) + 2:]
    return message


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "PanicException":
        return one_line(f"the reader crashed on this file (polars panicked: {exc}); the file "
                        "is probably damaged: export it again, or report it with the file")
    return one_line(f"{name}: {exc}")


@dataclass(frozen=True)
class _Done:
    """A worker's value with the nsysmoe warnings it raised (re-raised in the caller)."""

    value: Any
    notes: tuple[tuple[type[Warning], str], ...]


def _unwrap(result: Any) -> Any:
    if isinstance(result, _Done):
        for category, message in result.notes:
            warnings.warn(message, category, stacklevel=2)
        return result.value
    return result


def _label(item: Any) -> str:
    return " + ".join(map(str, item)) if isinstance(item, tuple) else str(item)


def map_files(
    fn: Callable[..., Any], items: Sequence[Any], executor: Executor, label: str
) -> list[Any]:
    """``fn`` over items (paths, or tuples of paths), results in input order; a failing item
    yields a :class:`Failure` instead of raising, and so does an item whose worker process died.
    ``fn`` must be a module-level function; the nsysmoe warnings it raises in a worker (a cache
    that could not be written) are raised again here."""
    items = list(items)
    if executor.dask is not None:
        results = _map_dask(fn, items, executor)
    elif executor.jobs <= 1 or len(items) == 1:
        with executor.progress(len(items), label) as bar:
            results = []
            for item in items:
                results.append(_safe(fn, item))
                bar.update(1)
    else:
        results = [None] * len(items)
        with executor.progress(len(items), label) as bar:
            _map_pool(fn, items, list(range(len(items))), executor.jobs, results, bar)
    return [_unwrap(r) for r in results]


def _map_pool(fn: Callable[..., Any], items: list[Any], todo: list[int], jobs: int,
              results: list[Any], bar: Progress) -> None:  # fmt: skip
    """``todo`` (indices into items) over a process pool, into ``results``. A worker that dies
    (killed for memory, a crash in native code) breaks the whole pool: what finished is kept,
    the rest is split in halves and each half run again in a fresh pool, until the item that
    kills its worker runs alone and becomes its :class:`Failure`."""
    # forkserver, not fork: a forked child inherits polars' thread pool locks (the parent has
    # used polars by now, e.g. compiling the rules) and can deadlock in its first query
    context = multiprocessing.get_context("forkserver")
    left: list[int] = []
    with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
        futures = {pool.submit(_safe, fn, items[i]): i for i in todo}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except BrokenProcessPool:
                left.append(i)
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be unpickled
                results[i] = Failure(_label(items[i]), _describe(exc))
            bar.update(1)
    if not left:
        return
    left.sort()
    if len(left) == 1 and len(todo) == 1:
        results[left[0]] = Failure(_label(items[left[0]]), WORKER_DIED)
        bar.update(1)
        return
    half = (len(left) + 1) // 2
    for part in (left[:half], left[half:]):
        if part:
            _map_pool(fn, items, part, jobs, results, bar)


WORKER_DIED = ("the worker process reading this file died (out of memory, or a crash in a "
               "native library); try it alone with --jobs 1, or export it again")  # fmt: skip


def _map_dask(fn: Callable[..., Any], items: list[Any], executor: Executor) -> list[Any]:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise NsysmoeError("--dask needs dask.distributed: pip install 'nsysmoe[dask]'") from None
    address = check_dask_address(executor.dask or "")
    if address == "local":
        # its workers' logs stay quiet: what goes wrong with a file is that file's Failure; its
        # dashboard on a free port (None still takes 8787: a second run at once warned on stderr)
        quiet = {"processes": True, "dashboard_address": ":0", "silence_logs": logging.CRITICAL}
        with LocalCluster(**quiet) as cluster, Client(cluster) as client:
            return _gather(client, fn, items, executor, "local")
    timeout = dask_timeout()
    _probe(address, timeout)  # a silent port would hang the synchronous client's handshake
    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise NsysmoeError(_unreachable(address, timeout, exc)) from None
    with client:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError):
            raise NsysmoeError(f"--dask {address}: the scheduler has no workers (waited "
                               f"{timeout:g} s); start some: dask worker {address}") from None
        return _gather(client, fn, items, executor, address)


def _gather(client: Any, fn: Callable[..., Any], items: list[Any], executor: Executor,
            address: str) -> list[Any]:  # fmt: skip
    """Every item's value in input order; a task Dask gave up on (its workers died: KilledWorker)
    is that item's :class:`Failure`."""
    from dask.distributed import as_completed as dask_completed

    futures = client.map(_safe, [fn] * len(items), items, pure=False)
    index = {fut.key: i for i, fut in enumerate(futures)}
    results: list[Any] = [None] * len(items)
    with executor.progress(len(items), f"dask {address}") as bar:
        for fut in dask_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker, a lost scheduler, …
                died = type(exc).__name__ == "KilledWorker"
                results[i] = Failure(_label(items[i]), WORKER_DIED if died else _describe(exc))
            bar.update(1)
    return results


def _probe(address: str, timeout: float) -> None:
    """Connect once with the asynchronous client under a hard deadline: a port that accepts and
    never answers (an HTTP server, a firewall) fails here after ``timeout`` s, not never."""
    import asyncio

    from dask.distributed import Client

    async def connect() -> None:
        client = Client(address, asynchronous=True, timeout=timeout)
        try:
            await asyncio.wait_for(client, timeout)
        finally:  # closed here, in this loop: no "coroutine never awaited" noise at exit
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), timeout)

    try:
        asyncio.run(connect())
    except (OSError, TimeoutError) as exc:
        raise NsysmoeError(_unreachable(address, timeout, exc)) from None
    except Exception:  # noqa: BLE001 - whatever answered was not a Dask scheduler
        raise NsysmoeError(f"--dask {address}: something answered there, but not a Dask "
                           "scheduler; check the address (`dask scheduler` prints it) or use "
                           "--dask local") from None  # fmt: skip


def _unreachable(address: str, timeout: float, exc: BaseException) -> str:
    reason = one_line(str(exc)) or "no answer"
    return (f"--dask {address}: no Dask scheduler answered within {timeout:g} s ({reason}); "
            "check the address (`dask scheduler` prints it), raise NSYSMOE_DASK_TIMEOUT, or use "
            "--dask local")  # fmt: skip
