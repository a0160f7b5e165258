"""Renderers, one module per output format, chosen by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nsysmoe.render.json import render_json
from nsysmoe.render.markdown import render_markdown
from nsysmoe.render.terminal import render_terminal
from nsysmoe.result import TraceAnalysis

if TYPE_CHECKING:
    from nsysmoe.compare import Comparison

RENDERERS: dict[str, Callable[[list[TraceAnalysis]], str]] = {
    "terminal": render_terminal,
    "markdown": render_markdown,
    "json": render_json,
}


def _comparison_renderers() -> dict[str, Callable[[Comparison], str]]:
    from nsysmoe.render import comparison as c

    return {
        "terminal": c.render_comparison_terminal,
        "markdown": c.render_comparison_markdown,
        "json": c.render_comparison_json,
    }


COMPARISON_RENDERERS = _comparison_renderers()
