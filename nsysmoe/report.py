"""Results render themselves: Markdown, JSON and rich HTML in Jupyter, through their renderer."""

from __future__ import annotations


class Report:
    """Mixin for result classes; each supplies ``_render(fmt)`` for "markdown" and "json"."""

    def _render(self, fmt: str) -> str:
        raise NotImplementedError

    def to_markdown(self) -> str:
        return self._render("markdown")

    def to_json(self) -> str:
        return self._render("json")

    def _repr_html_(self) -> str:
        from nsysmoe.render.html import markdown_to_html

        return markdown_to_html(self.to_markdown())
