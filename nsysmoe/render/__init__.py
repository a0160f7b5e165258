"""Renderers, one module per output format, chosen by name."""

from __future__ import annotations

from collections.abc import Callable

from nsysmoe.render.json import render_json
from nsysmoe.render.markdown import render_markdown
from nsysmoe.render.terminal import render_terminal
from nsysmoe.result import TraceAnalysis

RENDERERS: dict[str, Callable[[list[TraceAnalysis]], str]] = {
    "terminal": render_terminal,
    "markdown": render_markdown,
    "json": render_json,
}
