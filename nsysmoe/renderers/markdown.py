"""GitHub-flavoured Markdown, ready to paste into a PR review: any document.

Trace text (kernel and range names, paths, versions) is hostile here: a newline would end a table
row or a quote and start a heading, ``<…>`` is HTML to GitHub (C++ templates vanish, ``<script>``
would be markup), ``](`` makes a link, a URL, ``www.`` or an e-mail address would become a link
of GitHub's own (an autolink), and a control character (``cat report.md``) would act on the
terminal. :func:`text`, :func:`cell` and :func:`code` are the one place it is escaped; every
block goes through them. Controls are shown as escapes (:func:`nsysmoe.text.visible`); in
running text a backslash before punctuation is doubled, the ``:`` of ``://`` and the ``.`` of
``www.`` get one (CommonMark's backslash escapes: GitHub shows the bare character and links
nothing), and an e-mail address's ``@`` an empty HTML comment before it (no escape stops
GitHub's e-mail links); emphasis and code marks (``*``, a backtick) and a block marker that
opens the text (``#``, ``>``, ``-``, ``+``, ``1.``: a heading, quote or list inside a quote) get
a backslash, so a label's ``**b**`` shows as written. A code span is never linked, so it needs
only the controls shown.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from nsysmoe.renderers.document import (
    Block,
    Caption,
    Details,
    Document,
    Heading,
    Lines,
    Section,
    Table,
)
from nsysmoe.text import visible

#: a backslash that would escape what follows it (ASCII punctuation, or whatever follows the
#: text): doubled, so it shows; one before a letter (``\\x1b``) is a backslash already
_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~]|\Z)")
#: what GitHub would make a link of in running text: the ``:`` of ``scheme://`` and the ``.`` of
#: ``www.`` (a backslash escape stops both)
_AUTOLINK = re.compile(r":(?=//)|(?<=www)\.", re.IGNORECASE)
#: the ``@`` of an e-mail address (``mailto:``/``xmpp:`` links need one too): GitHub links it
#: whatever is escaped (its e-mail autolinks are found in the text after escapes are undone),
#: so an empty HTML comment, which GitHub shows as nothing, parts the address from its name
_EMAIL = re.compile(r"(?<=[A-Za-z0-9.+_-])@(?=[A-Za-z0-9_-])")
#: emphasis and code-span marks: ``*`` (emphasis inside a word too) and the backtick (a ``_``
#: is left as it is: GitHub does not emphasise one inside a word, ``overlap_moe_expert``)
_INLINE = re.compile(r"[*`]")
#: what would open a block where the text starts a line or follows "> " / "- ": a heading, a
#: quote, a list item (a thematic break is one of these marks too)
_BLOCK = re.compile(r"\A(?:(?=(?:#{1,6}|[>+-])(?:\s|\Z))|\d{1,9}(?=[.)](?:\s|\Z)))")


def _inline(s: str) -> str:
    """One line, controls shown as escapes, HTML characters as entities, no link syntax,
    nothing GitHub would autolink, no emphasis or code span."""
    s = _BACKSLASH.sub(r"\\\\", visible(s))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _AUTOLINK.sub(lambda m: "\\" + m.group(), s.replace("](", "]\\("))
    s = _INLINE.sub(lambda m: "\\" + m.group(), s)
    return _EMAIL.sub("<!-- -->@", s)


def text(s: str) -> str:
    """Running text (:func:`_inline`) that opens no block where it starts a line or a quote."""
    return _BLOCK.sub(lambda m: m.group() + "\\", _inline(s), count=1)


def cell(s: str) -> str:
    """A table cell (:func:`_inline`: a cell opens no block) whose ``|`` cannot end the cell."""
    return _inline(s).replace("|", "\\|")


def code(s: str) -> str:
    """A code span GitHub shows literally: a fence longer than any backtick run inside it."""
    s = visible(s)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def format_table(t: Table) -> str:
    lines = ([f"**{text(t.title)}**", ""] if t.title else []) + [
        "| " + " | ".join(cell(h) for h in t.header) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in t.right) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.header) - 1)) + " |")
    return "\n".join(lines)


def _caption(c: Caption) -> str:
    facts = [f"{text(label)}: {code(value) if is_code else text(value)}"
             for label, value, is_code in c.facts]  # fmt: skip
    if facts:
        facts[0] = facts[0][:1].upper() + facts[0][1:]
    return " · ".join(facts + ([text(c.formula)] if c.formula else []))


def _lines(b: Lines) -> str:
    if b.style == "list":
        return "\n".join([text(b.title), *("- " + text(x) for x in b.lines)])
    mark = "- " if b.style == "notes" else "> "
    return "\n".join(mark + text(x) for x in b.lines)


def _block(b: Block, figures_level: int = 4) -> str:
    if isinstance(b, Table):
        return format_table(b)
    if isinstance(b, Heading):
        return f"{'#' * b.level} {text(b.text)}" + (f" {code(b.code)}" if b.code else "")
    if isinstance(b, Section):
        return f"{'#' * b.level} {text(b.text)}"
    if isinstance(b, Caption):
        return _caption(b)
    if isinstance(b, Lines):
        return _lines(b)
    if isinstance(b, Details):
        inner = "\n\n".join(_block(x, figures_level) for x in b.blocks)
        return f"<details><summary>{text(b.summary)}</summary>\n\n{inner}\n\n</details>"
    links = [f"![{text(_stem(p))}]({quote(p, safe='/._-~')})" for p in b.paths]
    return (f"{'#' * figures_level} Figures\n\n> Written by `--plot` next to this report: upload "
            "them with it (a pasted report cannot reach local files).\n\n" + "\n\n".join(links))


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0]


def format_document(doc: Document) -> str:
    return "\n\n".join(_block(b, doc.figures_level) for b in doc.blocks) + "\n"
