"""One cutter of text to one line (:func:`nsysmoe.text.flat`): the CLI's stderr lines escape
first (:func:`nsysmoe.text.one_line`), a worker's messages do not
(:func:`nsysmoe.parallel.one_line`: a Failure and the JSON keep the text as it is)."""

from __future__ import annotations

from nsysmoe import parallel
from nsysmoe.text import flat, one_line


def test_one_cutter_escaped_or_not() -> None:
    raw = "a\x1b[2J \n\t b\u202e"
    assert flat(raw) == parallel.one_line(raw) == "a\x1b[2J b\u202e"
    assert one_line(raw) == "a\\x1b[2J b\\u202e"
    assert flat("abcdef", 4) == one_line("abcdef", 4) == "abc…" and flat("abcd", 4) == "abcd"
    long = "x " * 400
    assert parallel.one_line(long) == flat(long, 500) and len(parallel.one_line(long)) == 500
