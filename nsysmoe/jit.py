"""Compiled loops (numba, cached on disk): the one way nsysmoe compiles a hot loop, shared by
the reader's page decoder and the dependency graph's passes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit


def kernel(fn: Callable[..., Any]) -> Any:
    """``fn`` compiled without the GIL and cached on disk (in the user cache dir where the
    package's folder is read-only); compiled anew in each process where no cache dir can be
    written at all, rather than not at all."""
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(cache=False, nogil=True)(fn)


def checked_kernel(fn: Callable[..., Any]) -> Any:
    """:func:`kernel` with every index checked (an IndexError, not a stray read): for loops
    over bytes from a file, which may be anything."""
    try:
        return njit(cache=True, nogil=True, boundscheck=True)(fn)
    except RuntimeError:  # pragma: no cover - as in kernel()
        return njit(cache=False, nogil=True, boundscheck=True)(fn)


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`kernel`, called with every array argument read-only: numba compiles once per
    argument type, and a writable array is another type than a read-only one (which polars
    hands out), so without this a pass is compiled twice or more on a first run."""
    jitted = kernel(fn)

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        return jitted(*(frozen(a) if isinstance(a, np.ndarray) else a for a in args))

    call.jitted = jitted  # type: ignore[attr-defined]
    return call


def frozen(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only view (itself where it is one)."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view
