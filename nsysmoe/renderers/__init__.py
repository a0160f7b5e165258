"""Renderers: ``render(result, fmt)`` is the one entry. A result becomes a document
(:mod:`nsysmoe.renderers.report`) that one module per format writes out; JSON and CSV write
the result's own data. Figures are :mod:`nsysmoe.renderers.plot`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from nsysmoe.renderers import html, markdown, terminal
from nsysmoe.renderers.csv import render_csv
from nsysmoe.renderers.document import Document, Figures
from nsysmoe.renderers.json import render_json
from nsysmoe.renderers.report import document

Format = Literal["terminal", "markdown", "json", "html", "csv"]
FORMATS: tuple[Format, ...] = ("terminal", "markdown", "json", "html", "csv")
_TEXT = {"terminal": terminal.format_document, "markdown": markdown.format_document,
         "html": html.format_document}  # fmt: skip


def render(result: object, fmt: Format = "terminal", *, figures: Sequence[str] = ()) -> str:
    """``result`` as ``fmt`` text; ``figures`` (paths relative to where the report is written)
    are linked where the format can show them."""
    if fmt == "json":
        return render_json(result)
    if fmt == "csv":
        return render_csv(result)
    doc = document(result)
    if figures:
        doc = doc + Document((Figures(tuple(figures)),))
    return _TEXT[fmt](doc)


__all__ = ["FORMATS", "Format", "document", "render"]
