"""Renderers: ``render(result, fmt)`` is the one entry. A result becomes a document
(:mod:`nsysmoe.renderers.report`) that one module per format writes out; JSON and CSV write
the result's own data. HTML is a fragment (Jupyter) or, with ``page=True``, one self-contained
page with the figures inline (``--format html``). Figures are :mod:`nsysmoe.renderers.plot`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from nsysmoe.renderers import html, markdown, terminal
from nsysmoe.renderers.csv import render_csv
from nsysmoe.renderers.document import Document, Figures, ReportOptions
from nsysmoe.renderers.json import render_json
from nsysmoe.renderers.report import document

Format = Literal["terminal", "markdown", "json", "html", "csv"]
FORMATS: tuple[Format, ...] = ("terminal", "markdown", "json", "html", "csv")
_TEXT = {"terminal": terminal.format_document, "markdown": markdown.format_document}


def render(
    result: object,
    fmt: Format = "terminal",
    *,
    figures: Sequence[str] = (),
    svgs: Mapping[str, str] | None = None,
    page: bool = False,
    options: ReportOptions | None = None,
    tty: bool | None = None,
) -> str:
    """``result`` as ``fmt`` text.

    ``figures`` (paths relative to where the report is written) are linked where the format can
    show them (Markdown, the HTML fragment). HTML only: ``svgs`` (figure stem -> SVG text, e.g.
    ``api.figure_svgs(result)``) are embedded as inline figures, and ``page=True`` makes one
    self-contained page (doctype, UTF-8, embedded stylesheet, no scripts, nothing fetched) where
    the default is the fragment Jupyter displays. A page links no files, so it takes ``svgs``,
    not ``figures``. The CLI's ``--format html`` writes the page:
    ``render(result, "html", page=True, svgs=api.figure_svgs(result))``. ``options``: how much
    the report shows (``--all-nvtx``, ``--wide``; :class:`ReportOptions`)."""
    if fmt != "html" and (svgs is not None or page):
        raise ValueError(f"inline figures (svgs) and page=True are for HTML, not {fmt}")
    if page and figures:
        raise ValueError("a self-contained page links no figure files: pass svgs, not figures")
    if fmt == "json":
        return render_json(result)
    if fmt == "csv":
        return render_csv(result)
    doc = document(result, options)
    if figures:
        doc = doc + Document((Figures(tuple(figures)),))
    if fmt == "html":
        return html.format_page(doc, svgs) if page else html.format_document(doc, svgs)
    if fmt == "terminal":  # ``tty``: whether it goes to a terminal (None: stdout's); -o: False
        return terminal.format_document(doc, tty=tty)
    return _TEXT[fmt](doc)


__all__ = ["FORMATS", "Format", "ReportOptions", "document", "render"]
