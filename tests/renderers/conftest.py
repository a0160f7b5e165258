"""Fixtures of the renderer tests."""

from __future__ import annotations

import pytest

from tests.renderers.pages import find_browser


@pytest.fixture(scope="module")
def browser() -> str:
    """The headless browser's path (requested first, so a skip comes before any drawing)."""
    return find_browser()
