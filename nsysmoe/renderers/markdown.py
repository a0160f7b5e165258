"""GitHub-flavoured Markdown, ready to paste into a PR review: any document."""

from __future__ import annotations

from nsysmoe.renderers.document import (
    Block,
    Caption,
    Details,
    Document,
    Heading,
    Lines,
    Table,
)


def _cell(text: str) -> str:
    """A table cell: ``|`` would end the cell and ``<…>`` (C++ templates) would be taken for
    HTML by GitHub and vanish."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def format_table(t: Table) -> str:
    lines = [f"**{t.title}**", "", "| " + " | ".join(_cell(h) for h in t.header) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in t.right) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.header) - 1)) + " |")
    return "\n".join(lines)


def _caption(c: Caption) -> str:
    facts = [f"{label}: `{value}`" if code else f"{label}: {value}"
             for label, value, code in c.facts]  # fmt: skip
    if facts:
        facts[0] = facts[0][:1].upper() + facts[0][1:]
    return " · ".join(facts + ([c.formula] if c.formula else []))


def _lines(b: Lines) -> str:
    if b.style == "list":
        return "\n".join([b.title, *("- " + x for x in b.lines)])
    mark = "- " if b.style == "notes" else "> "
    return "\n".join(mark + x for x in b.lines)


def _block(b: Block) -> str:
    if isinstance(b, Table):
        return format_table(b)
    if isinstance(b, Heading):
        return f"### {b.text}" + (f" `{b.code}`" if b.code else "")
    if isinstance(b, Caption):
        return _caption(b)
    if isinstance(b, Lines):
        return _lines(b)
    if isinstance(b, Details):
        inner = "\n\n".join(_block(x) for x in b.blocks)
        return f"<details><summary>{b.summary}</summary>\n\n{inner}\n\n</details>"
    links = [f"![{_stem(p)}]({p})" for p in b.paths]
    return "#### Figures\n\n" + "\n\n".join(links)


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0]


def format_document(doc: Document) -> str:
    return "\n\n".join(_block(b) for b in doc.blocks) + "\n"
