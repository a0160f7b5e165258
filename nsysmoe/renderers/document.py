"""The shared document model: what a report says, as blocks, before any format says how.

``render/report/`` turns each result type into a :class:`Document`; one module per format
(terminal, Markdown, HTML) turns any document into text, so a new metric is added to a report
once and reaches every format. Trace text in a block is plain text: each format escapes it for
its medium in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

#: heading levels (HTML h1–h6, Markdown's number of #): a report's title, its sections
TITLE_LEVEL, SECTION_LEVEL, DEEPEST = 3, 4, 6


@dataclass(frozen=True)
class Table:
    """A titled table of plain-text cells; ``right`` marks the numeric (right-aligned) columns."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: tuple[bool, ...]


@dataclass(frozen=True)
class Heading:
    """The report's title; ``code`` is set off as code (a path). The terminal shows it only with
    ``terminal`` text (its own wording), Markdown and HTML always, at ``level`` (a report nested
    in another one is demoted under its section: :func:`nested`)."""

    text: str
    code: str | None = None
    terminal: str | None = None
    level: int = TITLE_LEVEL


@dataclass(frozen=True)
class Section:
    """A numbered part of a longer report (the A/B's evidence bundle): a heading under the
    report's title, shown in every format."""

    text: str
    level: int = SECTION_LEVEL


@dataclass(frozen=True)
class Caption:
    """The window and rules line under a heading: ``facts`` are (label, value, is_code);
    ``formula`` (how the headline figure is defined) is shown where there is room for it."""

    facts: tuple[tuple[str, str, bool], ...]
    formula: str = ""


LineStyle = Literal["quote", "notes", "list"]


@dataclass(frozen=True)
class Lines:
    """Sentences: ``quote`` (said of the result: verdicts, warnings; quoted in Markdown),
    ``notes`` (what the input lacked or the reader left out; a bullet list in Markdown), ``list``
    (items under ``title``, bulleted everywhere). With ``hanging``, lines after the first are
    its continuation (indented in the terminal)."""

    lines: tuple[str, ...]
    style: LineStyle = "quote"
    title: str = ""
    hanging: bool = False


@dataclass(frozen=True)
class Details:
    """Detail a reader opens on demand (folded in Markdown and HTML, shown in the terminal)."""

    summary: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Figures:
    """Figures written next to the report (paths relative to it); linked where a format can."""

    paths: tuple[str, ...]


Block = Table | Heading | Section | Caption | Lines | Details | Figures


@dataclass(frozen=True)
class ReportOptions:
    """How much a report shows: ``all_nvtx`` every NVTX row of an A/B's table (default: the
    largest changes), ``wide`` kernel names in full (default: shortened, kept distinct)."""

    all_nvtx: bool = False
    wide: bool = False

    def names(self, names: list[str], width: int) -> list[str]:
        """Kernel names as a table shows them (:func:`nsysmoe.renderers.names.distinct`)."""
        from nsysmoe.renderers.names import distinct

        return list(names) if self.wide else distinct(names, width)


@dataclass(frozen=True)
class Document:
    """A report: blocks in reading order (several results' documents can be concatenated)."""

    blocks: tuple[Block, ...] = field(default_factory=tuple)

    def __add__(self, other: Document) -> Document:
        return Document(self.blocks + other.blocks)

    @property
    def figures_level(self) -> int:
        """The level of the figures' heading: under the last title (the figures are its
        report's), so an outline nests them there."""
        titles = [b.level for b in self.blocks if isinstance(b, Heading)]
        return min(DEEPEST, (titles[-1] if titles else TITLE_LEVEL) + 1)


def nested(doc: Document, under: int = SECTION_LEVEL) -> Document:
    """``doc`` placed under a heading of level ``under``: every heading demoted alike, its title
    one level below (the A/B's report inside the evidence bundle's section), so an outline keeps
    the section's content inside it; none deeper than h6."""
    levels = [b.level for b in doc.blocks if isinstance(b, Heading | Section)]
    shift = under + 1 - min(levels, default=under + 1)
    return Document(tuple(replace(b, level=min(DEEPEST, b.level + shift))
                          if isinstance(b, Heading | Section) else b for b in doc.blocks))
