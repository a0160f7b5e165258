"""Opt-in cache of finished results (``--cache``), so a repeat of the same analysis is a load,
not a recomputation, and a repeat of the same report is a file read.

An entry is a folder ``<cache>/results/<key>`` named by :func:`key`: the inputs' fingerprints
(:func:`nsysmoe.fingerprint.file_key`, each with the path as given, which reports print), the
caller's parts (the rules' content, the scope, every option that changes the result), the nsysmoe
version, a hash of nsysmoe's own source (:func:`nsysmoe.fingerprint.source_hash`: an edited
checkout never serves an older code's result), the installed polars/numpy/rich/click
(:func:`nsysmoe.fingerprint.libraries`) and :data:`FORMAT`. It holds:

* ``result.json`` + ``tables.arrow``: the result object (a :class:`~nsysmoe.results.TraceAnalysis`
  or :class:`~nsysmoe.results.Comparison`, detached from its classified source), as tagged JSON of
  its scalars and dataclasses (exact: ints stay ints, floats round-trip by repr) whose tables are
  Arrow IPC streams concatenated in one file. Not pickle: an entry only ever builds the result
  types of :data:`CLASSES`, and a load is as fast (measured: both a few ms);
* ``report-<key>.txt``: a rendered report, keyed on everything rendering depends on (the CLI's
  :func:`nsysmoe.cli` fast path serves it without importing polars).

Writes go to a temporary folder renamed into place (atomic: :func:`nsysmoe.cache_entry.write`);
a damaged entry is removed and rebuilt; nothing here raises for the cache's sake: a store that
fails returns a note.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nsysmoe import cache_entry
from nsysmoe._version import __version__
from nsysmoe.fingerprint import digest, file_key, folder_key, libraries, source_hash

FORMAT = 1  # bumped when the encoding of an entry changes
#: the modules whose dataclasses an entry may name (nothing else is ever built from an entry)
CLASSES = ("nsysmoe.results", "nsysmoe.model")
SUBDIR = "results"


def key(kind: str, inputs: Sequence[str | Path], *parts: object) -> str | None:
    """The entry name of ``kind`` (``analyze``, ``compare``, ``report``) of ``inputs`` with
    ``parts``; None when an input cannot be fingerprinted (not a readable regular file or
    Parquet/Arrow export folder: no caching, the reader says what is wrong)."""
    try:
        prints = []
        for p in inputs:
            path = Path(p)
            if path.is_dir():
                prints.append((str(p), folder_key(path)))
                continue
            if not path.is_file():
                return None
            prints.append((str(p), file_key(path)))
    except (OSError, ValueError):
        return None
    return digest("nsysmoe-result", FORMAT, __version__, source_hash(), libraries(), kind,
                  tuple(prints), parts)  # fmt: skip


def _entry(cache_dir: Path, name: str) -> Path:
    return Path(cache_dir) / SUBDIR / name


# --- results ------------------------------------------------------------------------------------


def load(cache_dir: Path, name: str) -> Any | None:
    """The result stored as ``name``, or None: no entry, or a damaged one (removed)."""
    entry = _entry(cache_dir, name)
    if not (entry / "result.json").is_file():
        return None
    try:
        import polars as pl

        doc = json.loads((entry / "result.json").read_text())
        blob = (entry / "tables.arrow").read_bytes()
        bounds = doc["tables"]
        if not isinstance(bounds, list) or bounds[-1:] not in ([], [len(blob)]):
            raise ValueError("tables.arrow does not match result.json")
        starts = [0, *bounds[:-1]]
        tables = [pl.read_ipc_stream(io.BytesIO(blob[a:b])) for a, b in zip(starts, bounds,
                                                                              strict=True)]
        return _decode(doc["result"], tables)
    except Exception:  # noqa: BLE001 - damaged in any way: rebuilt, never fatal
        cache_entry.remove(entry)
        return None


def store(cache_dir: Path, name: str, result: object) -> str | None:
    """Store ``result`` as ``name``: None, or why it could not be (one line)."""
    entry = _entry(cache_dir, name)
    if (entry / "result.json").is_file():
        return None
    try:
        tables: list[bytes] = []
        doc = _encode(result, tables)
        bounds, at = [], 0
        for t in tables:
            at += len(t)
            bounds.append(at)

        def fill(folder: Path) -> None:
            (folder / "tables.arrow").write_bytes(b"".join(tables))
            (folder / "result.json").write_text(json.dumps({"tables": bounds, "result": doc}))

        cache_entry.write(entry, "result.json", fill)
        return None
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be written is a note, not fatal
        reason = " ".join(str(getattr(exc, "strerror", None) or exc).split())
        return f"--cache: could not store a result in {cache_dir} ({reason}); computed without it"


def through(
    cache_dir: Path, name: str | None, compute: Callable[[], Any]
) -> tuple[Any, str | None]:
    """The result stored as ``name``, else ``compute()`` stored there; with the note of
    :func:`store` (None when all went well). ``name`` None: computed, not cached."""
    if name is not None and (found := load(cache_dir, name)) is not None:
        return found, None
    result = compute()
    return result, None if name is None else store(cache_dir, name, result)


# --- rendered reports ---------------------------------------------------------------------------


def load_text(cache_dir: Path, name: str) -> str | None:
    """The report stored as ``name``, or None (a damaged one is removed)."""
    entry = _entry(cache_dir, name)
    try:
        return (entry / "report.txt").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeError, ValueError):
        cache_entry.remove(entry)
        return None


def store_text(cache_dir: Path, name: str, text: str) -> None:
    """Store the report ``text`` as ``name``, silently not when it cannot be (the result entry
    reports a cache that cannot be written)."""
    try:
        cache_entry.write(_entry(cache_dir, name), "report.txt",
                          lambda folder: (folder / "report.txt").write_text(text, encoding="utf-8"))
    except OSError:
        pass


# --- encoding -----------------------------------------------------------------------------------


def _encode(value: object, tables: list[bytes]) -> object:
    """``value`` as JSON-able data, tagged so :func:`_decode` rebuilds it exactly: tuples,
    lists, dicts (any keys), dataclasses of :data:`CLASSES`, polars frames (IPC, in ``tables``).
    Anything else raises TypeError (the result is then not stored)."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if isinstance(value, float):
        return float(value)
    if kind is tuple:
        return {"t": [_encode(v, tables) for v in value]}  # type: ignore[union-attr]
    if kind is list:
        return {"l": [_encode(v, tables) for v in value]}  # type: ignore[union-attr]
    if kind is dict:
        return {"d": [[_encode(k, tables), _encode(v, tables)]
                      for k, v in value.items()]}  # type: ignore[union-attr]  # fmt: skip
    if dataclasses.is_dataclass(value) and kind.__module__ in CLASSES:
        values = {f.name: _encode(getattr(value, f.name), tables)
                  for f in dataclasses.fields(value) if f.init and f.name != "source"}
        return {"c": f"{kind.__module__}:{kind.__qualname__}", "v": values}
    if f"{kind.__module__}.{kind.__name__}" == "polars.dataframe.frame.DataFrame":
        buf = io.BytesIO()
        value.write_ipc_stream(buf)  # type: ignore[attr-defined]
        tables.append(buf.getvalue())
        return {"f": len(tables) - 1}
    raise TypeError(f"cannot store a {kind.__name__}")


def _decode(doc: object, tables: list[Any]) -> object:
    if not isinstance(doc, dict):
        return doc
    if len(doc) == 1:
        ((tag, body),) = doc.items()
        if tag == "t":
            return tuple(_decode(v, tables) for v in body)
        if tag == "l":
            return [_decode(v, tables) for v in body]
        if tag == "d":
            return {_decode(k, tables): _decode(v, tables) for k, v in body}
        if tag == "f":
            return tables[body]
    if set(doc) == {"c", "v"}:
        cls = _class(doc["c"])
        return cls(**{k: _decode(v, tables) for k, v in doc["v"].items()})
    raise ValueError("not an encoded result")


def _class(name: str) -> type:
    module, _, qualname = name.partition(":")
    if module not in CLASSES:
        raise ValueError(f"{module} is not a result module")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise ValueError(f"{name} is not a result type")
    return obj
