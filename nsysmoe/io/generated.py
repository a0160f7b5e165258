"""Synthetic traces: the name of the program that generated one, as every reader records it
(:attr:`nsysmoe.model.Launch.generated_by`); reports then say the trace is no measurement."""

from __future__ import annotations

from nsysmoe.io.redact import redact_text


def generator(value: object, limit: int = 80) -> str | None:
    """The generator's name as reports may show it: one line, at most ``limit`` characters,
    redacted before it is cut (a token cut short no longer has its shape); None when absent
    or no text."""
    if not isinstance(value, str) or not (text := " ".join(value.split())):
        return None
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
