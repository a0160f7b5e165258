"""Shared test helpers: where the real traces live, and how to skip when they are absent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NSYSMOE_SHARED", REPO.parent / "shared"))
TRACES = SHARED / "traces"


def require_shared() -> Path:
    """The shared real traces; skip when absent, but fail under CI=true, where they must exist."""
    if (TRACES / "nsys").is_dir():
        return TRACES
    _absent(f"real traces not found at {TRACES} (set NSYSMOE_SHARED to the shared/ folder)")


def require_shared_logs() -> Path:
    """The shared real training logs (traces/logs); skip when absent, but fail under CI=true.
    Apart from :func:`require_shared`: that checks traces/nsys, which says nothing of the logs."""
    logs = TRACES / "logs"
    if logs.is_dir():
        return logs
    reason = f"shared training logs not found at {logs} (set NSYSMOE_SHARED to the shared/ folder)"
    _absent(reason)


def _absent(reason: str) -> NoReturn:
    """Skip for ``reason``, or fail under CI=true, where the shared data must be present."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + "; under CI=true they must be present")
    pytest.skip(reason)


@pytest.fixture
def traces() -> Path:
    return require_shared()


# Hypothesis' 200 ms per-example deadline measures the machine, not the code: on a loaded 2-core
# CI runner an exact test fails by timing out. Examples stay bounded by max_examples.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("nsysmoe", deadline=None)
_hypothesis_settings.load_profile("nsysmoe")


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Terminal output at its piped default (100 columns, plain): xdist workers inherit
    COLUMNS=80, and a developer's FORCE_COLOR / NO_COLOR must not change test output."""
    for name in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
