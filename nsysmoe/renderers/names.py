"""Kernel names short enough for a table cell, and still told apart.

Cutting every long name at the same column makes two template instantiations that differ only
deep inside (``dispatch_kernel<…, (bool)1>`` and ``…, (bool)0>``) print as the same row.
:func:`distinct` keeps the start of a name (its base name) and, for every other name that shares
a longer start with it, the arguments where the two part; what lies between is elided with "…".
Where names part is read off the sorted names (a name's nearest neighbours share the longest
starts with it), so the result depends on the set of names only, not on their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from os.path import commonprefix
from pathlib import Path

ELLIPSIS = "…"
#: from this width on, distinct names are guaranteed to stay distinct
MIN_WIDTH = 8
#: the arguments around a place where names part are shown up to this many characters
_WINDOW = 40
#: a next argument longer than this is shown in part rather than not at all
_LONG_TOKEN = 12


def distinct(names: Sequence[str], width: int) -> list[str]:
    """``names`` shortened to at most ``width`` characters each; distinct names stay distinct
    (for ``width`` ≥ :data:`MIN_WIDTH`), equal names equal, and names that fit are unchanged.

    A shortened name is its start, then for each other name sharing more than that start, "…"
    and the arguments where the two part; a trailing "…" says the name goes on. Where that
    cannot tell names apart within ``width`` (many names parting in many places), the end of
    each such name is replaced by "…#N", N counting them in sorted order.
    """
    if width < 1:
        raise ValueError(f"width must be at least 1, not {width}")
    unique = sorted(set(names))
    out = {n: n for n in unique if len(n) <= width}
    long = [i for i, n in enumerate(unique) if len(n) > width]
    if long:
        lcp = [0] + [len(commonprefix(pair)) for pair in zip(unique, unique[1:], strict=False)]
        chains = (_smaller(lcp, range(len(lcp) - 1, 0, -1)), _smaller(lcp, range(1, len(lcp))))
        for i in long:
            out[unique[i]] = _shorten(unique, lcp, chains, i, width)
        if width >= MIN_WIDTH:
            _resolve(out, [unique[i] for i in long], width)
    return [out[n] for n in names]


def _shorten(unique: list[str], lcp: list[int], chains: tuple[list[int], list[int]], i: int,
             width: int) -> str:  # fmt: skip
    """``unique[i]``: its start, then each place it parts from another name, within ``width``."""
    name = unique[i]
    if width < 2:
        return ELLIPSIS[:width]
    keep = _Mask(name, width)
    keep.add(0, min(_base(name), max(width // 2, width - 24)))
    partings = _partings(unique, lcp, chains, i, keep.head)
    depths = sorted(partings)
    for d in depths:  # first the character where they part, for every other name
        keep.add(min(d, len(name) - 1), d + 1)
    for d in depths:  # the argument holding it
        at = min(d, len(name) - 1)
        keep.add(_start_of(name, at), _end_of(name, at + 1))
    for d in depths:  # the arguments that differ, as far as room allows
        keep.add(*_differing(name, partings[d], d))
    keep.grow_windows(rounds=1)
    keep.grow_head()
    keep.grow_windows()
    return keep.text()


def _base(name: str) -> int:
    """Length of the base name: up to and including the first ``<`` or ``(`` (all, without)."""
    cut = [i for i in (name.find("<"), name.find("(")) if i > 0]
    return min(cut) + 1 if cut else len(name)


def _smaller(lcp: list[int], order: range) -> list[int]:
    """For each edge ``k`` (``lcp[k]``: of names ``k - 1`` and ``k``), the nearest edge in
    ``order`` after it with a smaller value (-1 for none): the next depth where names part."""
    out, stack = [-1] * len(lcp), []
    for k in order:
        while stack and lcp[stack[-1]] > lcp[k]:
            out[stack.pop()] = k
        stack.append(k)
    return out


def _partings(unique: list[str], lcp: list[int], chains: tuple[list[int], list[int]], i: int,
              floor: int) -> dict[int, str]:  # fmt: skip
    """Where ``unique[i]`` parts from other names at depth ``floor`` or deeper: each depth (the
    length of the start it shares with another name) and the nearest such name."""
    found: dict[int, str] = {}
    before, after = chains
    k = i  # edge i joins names i - 1 and i; walking back, the depth falls at before[k]
    while 0 < k and lcp[k] >= max(floor, 1):
        found.setdefault(lcp[k], unique[k - 1])
        k = before[k]
    k = i + 1
    while 0 < k < len(lcp) and lcp[k] >= max(floor, 1):
        found.setdefault(lcp[k], unique[k])
        k = after[k]
    return found


def _differing(name: str, other: str, d: int) -> tuple[int, int]:
    """The arguments of ``name`` that differ from ``other`` (which shares ``name[:d]``): from the
    one holding ``name[d]`` to the one holding the last difference before a common ending, at
    most about :data:`_WINDOW` characters."""
    same_end = len(commonprefix([name[d:][::-1], other[d:][::-1]]))
    first = min(d, len(name) - 1)
    last = max(first, len(name) - same_end - 1)
    start = _start_of(name, first)
    return start, min(_end_of(name, last + 1), max(first + 1, start + _WINDOW))


def _start_of(name: str, i: int, limit: int = _WINDOW // 2) -> int:
    """Where the argument holding ``name[i]`` starts: after a space, ``<`` or ``,``; where that
    is more than ``limit`` characters back, after ``::`` or ``_``."""
    stop = max(0, i - limit)
    for opens in (_opens, _opens_soft):
        j = i
        while j > stop and not opens(name, j):
            j -= 1
        if j == 0 or opens(name, j):
            return j
    return i


def _end_of(name: str, i: int, limit: int = _WINDOW // 2) -> int:
    """The first argument end at ``i`` or after (:func:`_closes`); where that is more than
    ``limit`` characters on, before ``::`` or ``_``."""
    stop = min(len(name), i + limit)
    for closes in (_closes, _closes_soft):
        j = i
        while j < stop and not closes(name, j):
            j += 1
        if j == len(name) or closes(name, j):
            return j
    return min(len(name), i + limit)


def _opens(name: str, i: int) -> bool:
    return name[i - 1] in " <,"


def _opens_soft(name: str, i: int) -> bool:
    return name[i - 1] == "_" or name[i - 2 : i] == "::"


def _closes(name: str, i: int) -> bool:
    """Before a space, ``,``, ``<`` or ``>``, a call's ``(`` or a call's ``)`` (not a cast's:
    ``(int)8`` stays one argument)."""
    ch = name[i]
    if ch == "(":
        return i > 0 and (name[i - 1].isalnum() or name[i - 1] in "_>")
    if ch == ")":
        return i + 1 == len(name) or not (name[i + 1].isalnum() or name[i + 1] in "_(")
    return ch in " ,<>"


def _closes_soft(name: str, i: int) -> bool:
    return name[i] == "_" or name[i : i + 2] == "::"


class _Mask:
    """The characters of ``name`` kept, as sorted disjoint spans. Each run left out is shown as
    "…" (one character; a run of one character is shown as itself, at the same cost)."""

    def __init__(self, name: str, width: int) -> None:
        self.name, self.width = name, width
        self.spans: list[tuple[int, int]] = []

    @property
    def head(self) -> int:
        return self.spans[0][1] if self.spans and self.spans[0][0] == 0 else 0

    def _merged(self, a: int, b: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for s, e in sorted([*self.spans, (a, b)]):
            if out and s <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        if out[-1][1] == len(self.name) - 1:
            out[-1] = (out[-1][0], len(self.name))
        return out

    def _cost(self, spans: list[tuple[int, int]]) -> int:
        gaps = len(spans) - 1 + (spans[0][0] > 0) + (spans[-1][1] < len(self.name))
        return sum(e - s for s, e in spans) + gaps

    def add(self, a: int, b: int) -> bool:
        """Keep ``name[a:b]`` too, where the result still fits."""
        a, b = max(0, a), min(len(self.name), b)
        if a >= b:
            return False
        spans = self._merged(a, b)
        if self._cost(spans) > self.width:
            return False
        self.spans = spans
        return True

    def grow_head(self) -> None:
        """More of the start, an argument at a time while it fits; a long argument in part."""
        while self.head < len(self.name):
            head = self.head
            nxt = _end_of(self.name, head + 1)
            if self.add(0, nxt):
                continue
            if nxt - head > _LONG_TOKEN:  # in part: every character that is still free
                slack = self.width - self._cost(self.spans)
                while slack > 0 and not self.add(0, head + slack):
                    slack -= 1
            break

    def grow_windows(self, rounds: int | None = None) -> None:
        """More around each place where names part, an argument at a time while it fits, for
        ``rounds`` rounds (all there is without): first what follows it, then what precedes."""
        for forward in (True, False):
            left = rounds
            grown = True
            while grown and left != 0:
                grown = False
                left = None if left is None else left - 1
                for s, e in list(self.spans[1:] if self.head else self.spans):
                    if forward and e < len(self.name):
                        grown |= self.add(e, _end_of(self.name, e + 1))
                    elif not forward and s > 0:
                        grown |= self.add(_start_of(self.name, s - 1), s)

    def text(self) -> str:
        parts = [] if self.spans[0][0] == 0 else [ELLIPSIS]
        for k, (s, e) in enumerate(self.spans):
            if k:
                gap = self.name[self.spans[k - 1][1] : s]
                parts.append(gap if len(gap) == 1 else ELLIPSIS)
            parts.append(self.name[s:e])
        if self.spans[-1][1] < len(self.name):
            parts.append(ELLIPSIS)
        return "".join(parts)


def _resolve(out: dict[str, str], long: list[str], width: int) -> None:
    """Make every shortened name differ from every other output: each shortened name that
    shares its output with another name (or is a name that fits) ends in "…#N" instead."""
    owners: dict[str, int] = {}
    for short in out.values():
        owners[short] = owners.get(short, 0) + 1
    clash = sorted(name for name in long if owners[out[name]] > 1)
    clashing = set(clash)
    used = {short for name, short in out.items() if name not in clashing}
    count = 0
    for name in clash:
        while True:  # the next N whose result no other name has (one that fits may be "x…#1")
            count += 1
            tag = f"{ELLIPSIS}#{count}"
            candidate = out[name][: max(0, width - len(tag))].rstrip(ELLIPSIS) + tag
            if candidate not in used:
                break
        used.add(candidate)
        out[name] = candidate


#: a side's name (``--labels``, a file name) in tables, headings and figures: at most this long
LABEL_WIDTH = 48


def side_labels(off: str, on: str, width: int = LABEL_WIDTH) -> tuple[str, str]:
    """The two sides' names as tables and figures show them: cut to ``width`` characters by
    :func:`distinct` (two names that differ still differ, equal ones stay equal). A name of any
    length costs no more than this to lay out; the report says the full names once."""
    a, b = distinct([off, on], width)
    return a, b


def distinct_tails(paths: Sequence[str]) -> list[str]:
    """Names for files: the file names, with as many parent folders as makes them distinct
    (``off/golden_values.json``, ``on/golden_values.json``); numbered where even whole paths
    repeat."""
    parts = [Path(p).parts for p in paths]
    names = [str(p) for p in paths]
    for depth in range(1, max((len(p) for p in parts), default=0) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [f"{i + 1}: {name}" for i, name in enumerate(names)]
