"""Settings read from the environment, parsed in one place: a bad value is one line."""

from __future__ import annotations

import os
from pathlib import Path

from nsysmoe.errors import NsysmoeError


def cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells it, Linux; else
    the machine's): how many threads of work pay, not how many the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def seconds(name: str, default: float, *, upper: float, example: str) -> float:
    """``$name`` as a positive number of seconds below ``upper``, else ``default`` if unset."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < upper:
        raise NsysmoeError(f"{name}={text!r}: use a number of seconds, e.g. {example}")
    return value


def cache_dir() -> Path:
    """Where ``--cache`` keeps its entries: $NSYSMOE_CACHE_DIR, else $XDG_CACHE_HOME/nsysmoe,
    else ~/.cache/nsysmoe."""
    if explicit := os.environ.get("NSYSMOE_CACHE_DIR"):
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsysmoe"
