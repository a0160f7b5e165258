"""HTML: any document, every piece of text escaped here (:func:`escape`: markup characters as
entities, control characters and bidi overrides shown as escapes, :func:`nsysmoe.text.visible`).

:func:`format_document` is a fragment (Jupyter's rich display: no scripts, no external styles);
:func:`format_page` is one self-contained page (``--format html -o report.html``): a full
document with a small embedded stylesheet and the figures as inline SVG, so it opens offline and
can be attached to a PR. The page loads nothing (no scripts, no network: its Content-Security-
Policy forbids both), and every figure is checked by :func:`inline_svg` before it is embedded.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

from nsysmoe._version import __version__
from nsysmoe.renderers.document import (
    Block,
    Caption,
    Details,
    Document,
    Figures,
    Heading,
    Lines,
    Section,
    Table,
)
from nsysmoe.text import visible


def escape(s: str, quote: bool = True) -> str:
    """Text for an HTML element or attribute value: ``&``, ``<``, ``>`` and (``quote``) quotes
    as entities, controls and bidi overrides as visible escapes, one line."""
    return html.escape(visible(s), quote=quote)


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
        return f"<h{b.level}>{escape(b.text)}{code}</h{b.level}>"
    if isinstance(b, Section):
        return f"<h{b.level}>{escape(b.text)}</h{b.level}>"
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


# --- inline figures ------------------------------------------------------------------------------

#: what precedes ``<svg``: the XML prolog, the doctype, comments; then comments and metadata inside
_PROLOG = re.compile(r"\A\s*(?:<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*|<!--.*?-->\s*)*", re.S)
_DROP = re.compile(r"<!--.*?-->\s*|<metadata\b.*?</metadata>\s*", re.S)
_ID = re.compile(r'(?<=\s)id="([^"]*)"')
_REF = re.compile(r'(href="#|url\(#)([^")]*)')
#: in a tag: an event handler, or a reference out of the figure (embedded PNG and JPEG aside)
_ACTIVE_ATTR = re.compile(r"<[^>]*?(?:\son\w+\s*=|url\((?!#)|href\s*=\s*"
                          r"(?![\"']?(?:#|data:image/(?:png|jpeg);base64,)))", re.I)  # fmt: skip
_ACTIVE_TAG = re.compile(r"<\s*(?:script|foreignobject|iframe|object|embed|animate\w*|set|"
                         r"handler|listener)\b", re.I)  # fmt: skip
_STYLES = re.compile(r"<style\b.*?</style>", re.S | re.I)
_ACTIVE_CSS = re.compile(r"@import|url\((?!#)|expression\(", re.I)


def _active(svg: str) -> str | None:
    """What in ``svg`` could run or fetch something (no figure of ours has any), else None."""
    for m in (_ACTIVE_TAG.search(svg), _ACTIVE_ATTR.search(svg),
              *(_ACTIVE_CSS.search(s) for s in _STYLES.findall(svg))):  # fmt: skip
        if m:
            return m.group()[-60:]
    return None


def inline_svg(svg: str, prefix: str) -> str:
    """``svg`` (a standalone SVG file's text, as matplotlib writes it) as an element to place in
    a page: the prolog, doctype, comments and metadata removed, every ``id`` (and each reference
    to it) prefixed with ``prefix`` so that figures on one page cannot take each other's clip
    paths and glyphs. Anything that could run or fetch (scripts, event handlers, foreign
    objects, animation, links other than in-figure references and embedded PNG/JPEG) is refused
    with :class:`ValueError`."""
    body = _DROP.sub("", _PROLOG.sub("", svg, count=1)).strip()
    if not (body.startswith("<svg") and body.endswith("</svg>")) or body.count("<svg") != 1:
        raise ValueError("not one standalone SVG image")
    if found := _active(body):
        raise ValueError(f"SVG with active or external content ({found!r}) is not inlined")
    ids = set(_ID.findall(body))
    body = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', body)
    return _REF.sub(lambda m: m.group(1) + (prefix * (m.group(2) in ids)) + m.group(2), body)


def _figures(svgs: Mapping[str, str], level: int) -> str:
    """Each figure inline, in a ``<figure>`` whose id and caption are its stem (hostile text:
    escaped; the id reduced to letters, digits, ``-`` and ``_``, made unique)."""
    out, used = [], set()
    for n, (stem, svg) in enumerate(svgs.items()):
        fid = "fig-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-") or str(n))
        if fid in used:
            fid = f"{fid}-{n}"
        used.add(fid)
        try:
            image = inline_svg(svg, f"f{n}-")
        except ValueError as err:
            raise ValueError(f"figure {stem!r}: {err}") from None
        out.append(f'<figure id="{fid}">\n{image}\n'
                   f"<figcaption>{escape(stem)}</figcaption>\n</figure>")  # fmt: skip
    return (f'<section class="figures">\n<h{level}>Figures</h{level}>\n' + "\n".join(out)
            + "\n</section>")


def _body(doc: Document, svgs: Mapping[str, str] | None) -> str:
    parts = [_block(b) for b in doc.blocks]
    if svgs:
        parts.append(_figures(svgs, doc.figures_level))
    return "\n".join(parts)


def format_document(doc: Document, svgs: Mapping[str, str] | None = None) -> str:
    """A self-contained HTML fragment (no scripts, no external styles); ``svgs`` (stem -> SVG
    text) are appended as inline figures."""
    return '<div class="nsysmoe">\n' + _body(doc, svgs) + "\n</div>"


# --- the page ------------------------------------------------------------------------------------

#: nothing is loaded: no scripts, no fetches; styles and images only from the page itself
_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
        "form-action 'none'")

_STYLE = """
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #1f2328; font: 15px/1.5 -apple-system,
  "Segoe UI", Roboto, "Helvetica Neue", Arial, "Liberation Sans", sans-serif; }
main.nsysmoe { max-width: 1200px; margin: 0 auto; padding: 1.5rem 2rem 3rem; }
h3 { font-size: 1.35rem; margin: 0 0 .75rem; }
h4 { font-size: 1.1rem; margin: 2rem 0 .5rem; }
h5, h6 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
code, td, th { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  "Liberation Mono", monospace; font-size: 13px; }
code { background: #f3f4f6; padding: .1em .3em; border-radius: 4px; overflow-wrap: anywhere; }
blockquote { margin: .75rem 0; padding: .25rem .9rem; border-left: 4px solid #d0d7de;
  color: #3d444d; }
table { display: block; width: max-content; max-width: 100%; overflow-x: auto;
  border-collapse: collapse; margin: .25rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .6rem; vertical-align: top; }
th { background: #eef1f4; text-align: left; }
tbody tr:nth-child(even) { background: #f6f8fa; }
td[style] { font-variant-numeric: tabular-nums; white-space: nowrap; }
details { margin: .75rem 0; border: 1px solid #d0d7de; border-radius: 6px; padding: .4rem .8rem; }
summary { cursor: pointer; font-weight: 600; }
details[open] > summary { margin-bottom: .5rem; }
figure { margin: 1rem 0 2rem; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { font: 13px ui-monospace, monospace; color: #59636e; margin-top: .25rem; }
"""


def _title(doc: Document) -> str:
    heading = next((b for b in doc.blocks if isinstance(b, Heading)), None)
    if heading is None:
        return "nsysmoe report"
    return heading.text + (f" {heading.code}" if heading.code else "")


def format_page(doc: Document, svgs: Mapping[str, str] | None = None) -> str:
    """One self-contained HTML page: ``<!DOCTYPE html>``, UTF-8, an embedded stylesheet, the
    document's blocks, and ``svgs`` (stem -> SVG text, in order) as inline figures. A page
    loads nothing, so a :class:`Figures` block (figures linked by path) is refused: pass the
    figures' SVG text instead."""
    if any(isinstance(b, Figures) for b in doc.blocks):
        raise ValueError("a self-contained page links no figure files: pass svgs instead")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="nsysmoe {escape(__version__, quote=True)}">\n'
        f"<title>{escape(_title(doc))}</title>\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n"
        f'<main class="nsysmoe">\n{_body(doc, svgs)}\n</main>\n</body>\n</html>\n'
    )
