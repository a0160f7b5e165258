"""HTML for Jupyter: the Markdown report's tables and text, without a Markdown dependency."""

from __future__ import annotations

import html
import re

_ROW = re.compile(r"^\|(.*)\|$")
_SEP = re.compile(r"^\|[-:|]+\|$")


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line[1:-1])
    return [html.escape(html.unescape(c.strip().replace("\\|", "|"))) for c in cells]


def markdown_to_html(md: str) -> str:
    """Convert the subset of Markdown our renderers write (headings, pipe tables, quotes,
    bold titles, details blocks, lists) into a self-contained HTML fragment."""
    out: list[str] = ['<div class="nsysmoe">']
    table: list[list[str]] = []

    def flush() -> None:
        if table:
            head, *body = table
            out.append("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in head)
                       + "</tr></thead><tbody>" + "".join(
                           "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body
                       ) + "</tbody></table>")  # fmt: skip
            table.clear()

    for line in md.splitlines():
        if _SEP.match(line):
            continue
        if _ROW.match(line):
            table.append(_cells(line))
            continue
        flush()
        text = line.strip()
        if not text:
            continue
        if text.startswith("<details") or text.startswith("</details"):
            out.append(text)
        elif text.startswith("#"):
            level = min(len(text) - len(text.lstrip("#")), 6)
            out.append(f"<h{level}>{html.escape(text.lstrip('#').strip())}</h{level}>")
        else:
            body = html.escape(text.lstrip("> ").lstrip("- "))
            body = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", body)
            body = re.sub(r"`(.+?)`", r"<code>\1</code>", body)
            out.append(f"<p>{body}</p>")
    flush()
    out.append("</div>")
    return "\n".join(out)
