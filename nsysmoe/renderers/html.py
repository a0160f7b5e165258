"""HTML (Jupyter's rich display, and a page): any document, every piece of text escaped here."""

from __future__ import annotations

from html import escape

from nsysmoe.renderers.document import (
    Block,
    Caption,
    Details,
    Document,
    Figures,
    Heading,
    Lines,
    Table,
)


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.header)
    body = "".join(
        "<tr>" + "".join(
            f'<td style="text-align:right">{escape(c)}</td>' if right else f"<td>{escape(c)}</td>"
            for c, right in zip(row, t.right, strict=True)
        ) + "</tr>"
        for row in t.rows
    )  # fmt: skip
    return (f"<p><b>{escape(t.title)}</b></p><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")  # fmt: skip


def _block(b: Block) -> str:
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Heading):
        code = f" <code>{escape(b.code)}</code>" if b.code else ""
        return f"<h3>{escape(b.text)}{code}</h3>"
    if isinstance(b, Caption):
        facts = [f"{escape(label)}: " + (f"<code>{escape(v)}</code>" if code else escape(v))
                 for label, v, code in b.facts]  # fmt: skip
        return "<p>" + " · ".join(facts + [escape(b.formula)] * bool(b.formula)) + "</p>"
    if isinstance(b, Lines):
        items = "".join(f"<li>{escape(x)}</li>" for x in b.lines)
        if b.style == "quote":
            return "<blockquote>" + "<br>".join(escape(x) for x in b.lines) + "</blockquote>"
        title = f"<p>{escape(b.title)}</p>" if b.title else ""
        return f"{title}<ul>{items}</ul>"
    if isinstance(b, Details):
        inner = "\n".join(_block(x) for x in b.blocks)
        return f"<details><summary>{escape(b.summary)}</summary>\n{inner}\n</details>"
    if isinstance(b, Figures):
        return "".join(f'<p><img src="{escape(p, quote=True)}" alt="{escape(p, quote=True)}"></p>'
                       for p in b.paths)  # fmt: skip
    raise TypeError(f"no HTML for {type(b).__name__}")


def format_document(doc: Document) -> str:
    """A self-contained HTML fragment (no scripts, no external styles)."""
    return '<div class="nsysmoe">\n' + "\n".join(_block(b) for b in doc.blocks) + "\n</div>"
