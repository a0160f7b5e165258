"""What the HTML tests share: the headless browsers they drive, and the well-formedness check
every rendered page or fragment must pass (no markup leaked from trace or log text)."""

from __future__ import annotations

import os
import shutil
from html.parser import HTMLParser

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
#: elements that are never closed
VOID = frozenset({"meta", "br", "img", "hr", "input", "link"})


def find_browser() -> str:
    """A headless browser's path; skip where none is installed, but fail under CI=true, where
    .ci/run installs chromium."""
    for name in BROWSERS:
        if found := shutil.which(name):
            return found
    reason = f"no headless browser on PATH (looked for {', '.join(BROWSERS)})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + "; under CI=true it must be there (.ci/run installs chromium)")
    pytest.skip(reason)


def assert_well_formed(page: str) -> None:
    """Every opened tag is closed in order (void tags aside): no markup leaked from text."""
    stack: list[str] = []

    class Check(HTMLParser):
        def handle_starttag(self, tag: str, attrs) -> None:  # noqa: ANN001
            if tag not in VOID:
                stack.append(tag)

        def handle_endtag(self, tag: str) -> None:
            assert stack and stack.pop() == tag, (tag, stack[-3:])

    Check().feed(page)
    assert not stack, stack
