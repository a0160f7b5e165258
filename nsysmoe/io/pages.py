"""An export's big tables decoded straight from the SQLite file's pages, in compiled loops.

Every SQLite driver hands values over one at a time: the ADBC driver's per-value append costs
about 0.1 µs, 2.5× SQLite's own decode, and on a million kernels and three million NVTX ranges
that is most of a read. A rowid table is a b-tree whose leaf pages hold each row as a record: a
header of varint serial types, then the values (https://sqlite.org/fileformat2.html). A compiled
loop decodes those straight into column arrays.

Only the plain case is decoded here, and it is what nsys writes: a rowid table without indexes
or hidden columns, whose rows fit in their page, whose integer columns (not of REAL affinity)
hold integers or NULL and whose text columns hold text, blobs or NULL. Anything else answers
None: a float or text where an integer belongs, a row spilling to overflow pages, a WHERE
clause other than integer equality and rowid bounds, and the damage SQLite is known to refuse
or to read otherwise (a cell count or pointer out of bounds, a record whose values do not fill
its payload, sizes past SQLite's 32 bits, a page seen twice or past the header's page count,
rowids outside the bounds their parents' keys give: SQL seeks by those keys, and reads the
leaf on each side of a range too). The caller then reads through SQL as before, so the rows are
the ones SQL gives, in its order, on every file the tests hold (tests/io/test_pages.py: real
exports, generated tables, damaged copies); damage nobody has tried may still read otherwise.

The file is read with ``pread`` (not mapped: a file cut short while mapped kills the process),
a batch of 8 MB of leaf pages at a time, each batch decoded on the reader's pool without the
GIL. Every position into the file's bytes is checked before use where a lying value could
make it negative, and every index is bounds-checked (:func:`nsysmoe.jit.checked_kernel`):
bytes that lie raise an IndexError, which is caught and answered with None.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path
from sqlite3 import Connection

import numpy as np
import polars as pl

from nsysmoe.io.bulk import in_order
from nsysmoe.io.page_policy import KEYWORDS
from nsysmoe.jit import checked_kernel

HEADER = 100  # page 1 starts with the database header
LEAF, INTERIOR = 13, 5  # table b-tree page types
INT, TEXT, ROWID_ALIAS = 0, 1, 2  # what each decoded column is read as
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BATCH_BYTES = 8 << 20  # pages decoded per task
#: the longest a read waits for the decoder to load from numba's disk cache (about 0.2 s); a
#: first run, which compiles it (about 1.5 s), reads through SQL meanwhile
READY_WAIT_S = 30.0
_ROWID_NAMES = ("rowid", "_rowid_", "oid")
_HOLE = "\x00"  # a condition, in the shape of a WHERE (no SQL text holds this character)
#: one condition of a WHERE: ``name OP integer`` or ``name IN (integers)``
_ATOM = re.compile(
    r'(?:"(?P<q>\w+)"|(?P<n>[A-Za-z_]\w*))\s*(?P<op><=|>=|<|>|=|\bIN\b)\s*'
    r"(?P<v>\(\s*-?\d+(?:\s*,\s*-?\d+)*\s*\)|-?\d+(?![\w.]))",
    re.IGNORECASE,
)


class Undecodable(Exception):
    """What the pages hold is not the plain case: read through SQL instead."""


class Pages:
    """One export's file, read by page; :meth:`select` answers a plain SELECT, or None."""

    def __init__(self, fd: int, page_size: int, usable: int, conn: Connection,
                 pool: Executor | None) -> None:  # fmt: skip
        self._fd = fd
        self.page_size = page_size
        self.usable = usable
        self._conn = conn
        self._pool = pool
        self._layouts: dict[str, _Layout | None] = {}

    @classmethod
    def open(cls, path: Path, conn: Connection, pool: Executor | None = None) -> Pages | None:
        """The file's pages, or None where its header is not one this decoder reads (a
        page size out of range, text in UTF-16, a page count other than the file's, a header
        that cannot be read): SQL reads it then."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            head = os.pread(fd, HEADER, 0)
            size = os.fstat(fd).st_size
        except OSError:
            head = b""
        page_size = int.from_bytes(head[16:18], "big") if len(head) == HEADER else 0
        page_size = 65536 if page_size == 1 else page_size
        utf8 = len(head) == HEADER and int.from_bytes(head[56:60], "big") == 1
        if not utf8 or page_size < 512 or page_size & (page_size - 1) or head[20] > page_size - 480:
            os.close(fd)
            return None
        # SQLite takes the header's page count where it is valid (its change counter matches),
        # and refuses pages past it: a file whose size says otherwise is SQL's to read
        pages = int.from_bytes(head[28:32], "big")
        if head[24:28] == head[92:96] and pages and pages != size // page_size:
            os.close(fd)
            return None
        _start_warming()
        return cls(fd, page_size, page_size - head[20], conn, pool)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def select(self, table: str, columns: Sequence[str], text: Sequence[bool],
               where: str) -> list[pl.Series] | None:  # fmt: skip
        """``SELECT columns FROM table WHERE where`` as one Series per column (Int64, or
        Binary for a ``text`` one, read as ``CAST(coalesce(col, '') AS BLOB)``), in rowid
        order; None where the table, a value or the WHERE is not the plain case."""
        layout = self._layout(table)
        if layout is None or not _ready():
            return None
        try:
            want = [layout.index(c) for c in columns]
            lo, hi, equal = _conditions(where, layout)
            filters = [(layout.index(c), np.array(sorted(v), np.int64)) for c, v in equal.items()]
        except Undecodable:
            return None
        # the selected columns, then any only filtered on (as integers)
        if any(t and c == layout.alias for c, t in zip(want, text, strict=True)):
            return None  # the rowid as text: SQL writes it out
        try:
            kinds = [TEXT if t else layout.kind(c) for c, t in zip(want, text, strict=True)]
            cols = list(want)
            where_in = []
            for c, values in filters:
                j = next((i for i, (d, k) in enumerate(zip(cols, kinds, strict=True))
                          if d == c and k != TEXT), None)  # fmt: skip
                if j is None:
                    cols.append(c)
                    kinds.append(layout.kind(c))
                    j = len(cols) - 1
                where_in.append((j, values))
        except Undecodable:
            return None
        try:
            if lo > hi:  # no rowid can be in the range
                leaves = low = high = np.zeros(0, np.int64)
            else:  # with the leaves of lo − 1 and hi + 1: SQL's seek and its step past the
                # range read those too (and refuse them if damaged)
                leaves, low, high = self._leaves(layout.root, max(lo, INT64_MIN + 1) - 1,
                                                 min(hi, INT64_MAX - 1) + 1)  # fmt: skip
            per = max(1, BATCH_BYTES // self.page_size)
            batches = [slice(i, i + per) for i in range(0, leaves.size, per)]
            job = _Job(self, np.array(cols, np.int64), np.array(kinds, np.int64), lo, hi,
                       where_in, len(want), layout.root)
            runs = [(leaves[b], low[b], high[b]) for b in batches]
            if self._pool is not None and len(runs) > 1:
                parts = in_order([self._pool.submit(job.run, *r) for r in runs])
            else:
                parts = [job.run(*r) for r in runs]
        except (Undecodable, IndexError, OSError):
            return None
        out = []
        for j in range(len(want)):
            pieces = [p[j] for p in parts]
            dtype = pl.Binary if kinds[j] == TEXT else pl.Int64
            out.append(pl.concat(pieces) if pieces else pl.Series([], dtype=dtype))
        return out

    def read_pages(self, pages: np.ndarray) -> np.ndarray:
        """The bytes of ``pages`` (page numbers), one after another; runs of consecutive
        pages in one read each."""
        ps = self.page_size
        buf = np.empty(pages.size * ps, np.uint8)
        if pages.size == 0:
            return buf
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        starts = np.concatenate([[0], breaks])
        ends = np.concatenate([breaks, [pages.size]])
        view = memoryview(buf)
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            want = (b - a) * ps
            got = os.preadv(self._fd, [view[a * ps : b * ps]], (int(pages[a]) - 1) * ps)
            if got != want:  # the file is shorter than its tree says: cut short or changed
                raise Undecodable
        return buf

    def _leaves(self, root: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The table's leaf pages that may hold rowids in [lo, hi], in rowid order, with the
        rowids each may hold by its parents' keys (inclusive bounds). The tree is walked a
        level at a time; a page seen twice (a cycle), a level mixing leaves and interior
        pages, or keys that do not rise within their parent's bounds is :class:`Undecodable`:
        SQL seeks by those keys, so only a tree that keeps them reads the same by a scan."""
        level = np.array([root], np.int64)
        low = np.array([INT64_MIN], np.int64)
        high = np.array([INT64_MAX], np.int64)
        limit = os.fstat(self._fd).st_size // self.page_size
        seen = np.zeros(limit + 1, np.bool_)
        while True:
            if level.size and (level.min() < 1 or level.max() > limit or seen[level].any()
                               or np.unique(level).size != level.size):  # fmt: skip
                raise Undecodable
            seen[level] = True
            if level.size == 0:
                return level, low, high
            # every page at one depth is of one kind: the first tells which; the leaves are
            # read (and each one's kind checked) by the decoding, a batch at a time
            first = self.read_pages(level[:1])[HEADER if level[0] == 1 else 0]
            if first == LEAF:
                return level, low, high
            if first != INTERIOR or 1 in level:
                raise Undecodable
            buf = self.read_pages(level)
            most = level.size * ((self.page_size - 8) // 6 + 1)
            out, out_low, out_high = (np.empty(most, np.int64) for _ in range(3))
            n = _children(buf, self.page_size, self.usable, lo, hi, low, high, out, out_low,
                          out_high)  # fmt: skip
            if n < 0:
                raise Undecodable
            level, low, high = out[:n], out_low[:n], out_high[:n]

    def _layout(self, table: str) -> _Layout | None:
        if table not in self._layouts:
            self._layouts[table] = _Layout.of(self._conn, table)
        return self._layouts[table]


class _Layout:
    """Where a table's b-tree starts and where each column stands in its records."""

    def __init__(self, root: int, index: dict[str, int], alias: int | None,
                 real: set[int]) -> None:  # fmt: skip
        self.root = root
        self._index = index
        self.alias = alias
        self._real = real  # REAL affinity: an integer on disk is a float to SQL

    @classmethod
    def of(cls, conn: Connection, table: str) -> _Layout | None:
        row = conn.execute(
            "SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if row is None or type(row[0]) is not int or row[0] < 1 or not isinstance(row[1], str):
            return None
        sql = row[1]
        indexed = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
        ).fetchone()
        # an index may make SQLite answer in its own order; without rowid the tree is keyed
        # by the primary key
        if indexed or re.search(r"without\s+rowid", sql, re.IGNORECASE):
            return None
        info = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        if any(r[6] != 0 for r in info):  # hidden or generated columns: not all in the record
            return None
        index = {_folded(str(r[1])): int(r[0]) for r in info}
        keys = [r for r in info if r[5]]
        alias = None
        if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER":
            if re.search(r"\bdesc\b", sql, re.IGNORECASE):
                return None  # a DESC anywhere may make the key no alias of the rowid: SQL's
            alias = int(keys[0][0])  # INTEGER PRIMARY KEY: the rowid, NULL in the record
        real = {int(r[0]) for r in info if _real_affinity(str(r[2] or ""))}
        return cls(row[0], index, alias, real)

    def index(self, column: str) -> int:
        i = self._index.get(_folded(column))
        if i is None:
            raise Undecodable
        return i

    def has(self, column: str) -> bool:
        return _folded(column) in self._index

    def kind(self, index: int) -> int:
        """How the column at ``index`` is read as an integer (:class:`Undecodable` where SQL
        would read a float: REAL affinity stores a whole number as an integer)."""
        if index in self._real:
            raise Undecodable
        return ROWID_ALIAS if index == self.alias else INT


def _folded(name: str) -> str:
    """``name`` as SQLite compares identifiers: ASCII letters folded, nothing else."""
    return name.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _real_affinity(declared: str) -> bool:
    """Whether a column of this declared type has REAL affinity (sqlite.org/datatype3.html
    §3.1: no INT, CHAR, CLOB, TEXT or BLOB in it, and REAL, FLOA or DOUB)."""
    t = declared.upper()
    if "INT" in t or any(k in t for k in ("CHAR", "CLOB", "TEXT", "BLOB")) or not t:
        return False
    return any(k in t for k in ("REAL", "FLOA", "DOUB"))


def _conditions(where: str, layout: _Layout) -> tuple[int, int, dict[str, set[int]]]:
    """A WHERE of ANDed ``rowid`` bounds and ``column = n`` / ``column IN (n, …)`` as the
    rowid range [lo, hi] (lo > hi: none) and the values each column must hold; anything else
    (an OR, a NOT, a function, text, a float, a dangling AND or parenthesis) is
    :class:`Undecodable`."""
    lo, hi = INT64_MIN, INT64_MAX
    equal: dict[str, set[int]] = {}
    shape = where
    for m in reversed(list(_ATOM.finditer(where))):
        shape = shape[: m.start()] + f" {_HOLE} " + shape[m.end() :]
        name, op = (m["q"] or m["n"]), m["op"].upper()
        if m["n"] and m["n"].upper() in KEYWORDS:
            raise Undecodable  # a keyword unquoted is not a column (NULL, NOT, …)
        values = [int(v) for v in re.findall(r"-?\d+", m["v"])]
        if any(not INT64_MIN <= v <= INT64_MAX for v in values):
            raise Undecodable
        if name.lower() in _ROWID_NAMES and not layout.has(name) and m["q"] is None:
            if op == "IN":
                raise Undecodable
            v = values[0]
            if op in ("<=", "<", "="):
                hi = min(hi, v - (op == "<"))
            if op in (">=", ">", "="):
                lo = max(lo, v + (op == ">"))
        elif op in ("=", "IN"):
            layout.index(name)
            equal[name] = equal.get(name, set(values)) & set(values)
        else:
            raise Undecodable
    if _HOLE in where or (where and _reduced(shape) != _HOLE):
        raise Undecodable
    if lo > hi:  # also where a bound lay past the int64 range: no rowid is in it
        return 1, 0, equal
    return lo, hi, equal


def _reduced(shape: str) -> str:
    """``shape`` (the WHERE with each condition written :data:`_HOLE`) reduced by "C AND C"
    → C and "(C)" → C: a conjunction of conditions, however parenthesised, reduces to C;
    anything else does not."""
    shape = " ".join(shape.split())
    while True:
        fewer = shape.replace(f"( {_HOLE} )", _HOLE).replace(f"({_HOLE})", _HOLE)
        fewer = fewer.replace(f"( {_HOLE})", _HOLE).replace(f"({_HOLE} )", _HOLE)
        fewer = re.sub(f"{_HOLE} (?i:AND) {_HOLE}", _HOLE, fewer)
        if fewer == shape:
            return shape
        shape = fewer


class _Job:
    """One SELECT's decoding, run on batches of leaf pages."""

    def __init__(self, pages: Pages, cols: np.ndarray, kinds: np.ndarray, lo: int, hi: int,
                 where_in: list[tuple[int, np.ndarray]], selected: int,
                 root: int) -> None:  # fmt: skip
        self.pages, self.cols, self.kinds = pages, cols, kinds
        self.lo, self.hi, self.where_in, self.selected = lo, hi, where_in, selected
        self.root = root

    def run(self, leaves: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[pl.Series]:
        """The selected columns of the rows of ``leaves``, each leaf's rowids within its
        bounds ``low``/``high`` (else :class:`Undecodable`)."""
        ps = self.pages.page_size
        buf = self.pages.read_pages(leaves)
        heads = np.arange(leaves.size) * ps
        cells = (buf[heads + 3].astype(np.int64) << 8) | buf[heads + 4]
        if cells.size and cells.max() > (ps - 8) // 6:  # more than a page holds: refused
            raise Undecodable  # (before sizing the arrays by it)
        cap = int(cells.sum())
        k = self.cols.size
        ints = np.zeros((k, cap), np.int64)
        nulls = np.zeros((k, cap), np.bool_)
        at = np.zeros((k, cap), np.int64)
        empty_ok = leaves.size == 1 and int(leaves[0]) == self.root  # an empty table's root
        n = _decode(buf, ps, self.pages.usable, self.lo, self.hi, low, high, empty_ok,
                    self.cols, self.kinds, ints, nulls, at)  # fmt: skip
        if n < 0:
            raise Undecodable
        keep = None
        for j, values in self.where_in:
            hit = np.isin(ints[j, :n], values) & ~nulls[j, :n]
            keep = hit if keep is None else keep & hit
        rows = np.flatnonzero(keep) if keep is not None else None
        out = []
        for j in range(self.selected):
            if self.kinds[j] == TEXT:  # ints holds each value's length, at its place
                out.append(_binary(buf, at[j, :n], ints[j, :n], rows))
                continue
            values, missing = ints[j, :n], nulls[j, :n]
            if rows is not None:
                values, missing = values[rows], missing[rows]
            s = pl.Series(values)
            if missing.any():
                s = pl.select(pl.when(pl.lit(pl.Series(missing))).then(None).otherwise(s)
                              ).to_series()  # fmt: skip
            out.append(s)
        return out


def _binary(buf: np.ndarray, at: np.ndarray, length: np.ndarray,
            rows: np.ndarray | None) -> pl.Series:  # fmt: skip
    """The values at ``at`` of ``length`` bytes in ``buf`` (of ``rows`` only, where given),
    gathered into one buffer and sliced from it (views, not one object per value)."""
    if rows is not None:
        at, length = at[rows], length[rows]
    ends = np.cumsum(length)
    data = np.empty(int(ends[-1]) if ends.size else 0, np.uint8)
    _gather(buf, at, length, ends - length, data)
    whole = pl.Series([data.tobytes()], dtype=pl.Binary)
    frame = pl.DataFrame({"at": ends - length, "n": length})
    return frame.select(pl.lit(whole).bin.slice(pl.col("at"), pl.col("n")))[:, 0]


@checked_kernel
def _varint(buf: np.ndarray, p: int) -> tuple[int, int]:
    """The varint at ``p`` and the position after it."""
    v = np.int64(0)
    for k in range(8):
        b = np.int64(buf[p + k])
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, p + k + 1
    return (v << 8) | np.int64(buf[p + 8]), p + 9


@checked_kernel
def _u16(buf: np.ndarray, p: int) -> int:
    return (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])


@checked_kernel
def _u32(buf: np.ndarray, p: int) -> int:
    return (_u16(buf, p) << 16) | _u16(buf, p + 2)


@checked_kernel
def _cells(buf: np.ndarray, base: int, head: int, page_size: int, usable: int) -> int:
    """The page at ``base``'s cell count, where its header and cell pointers are what SQLite
    accepts (at most (page size − 8) / 6 cells, each pointer within the cell content area);
    else −1."""
    ncell = _u16(buf, base + 3)
    content = _u16(buf, base + 5)
    if content == 0:
        content = 65536
    if ncell > (page_size - 8) // 6 or content > usable or content < head + 2 * ncell:
        return -1
    for i in range(ncell):
        q = _u16(buf, base + head + 2 * i)
        if q < content or q > usable - 4:
            return -1
    return ncell


@checked_kernel
def _children(buf: np.ndarray, page_size: int, usable: int, lo: int, hi: int, low: np.ndarray,
              high: np.ndarray, out: np.ndarray, out_low: np.ndarray,
              out_high: np.ndarray) -> int:  # fmt: skip
    """The children of the interior table pages in ``buf`` (page i's rowids within
    [low[i], high[i]]) that may hold rowids in [lo, hi], in order, into ``out``, each with
    the rowids it may hold into ``out_low``/``out_high``: their count, or −1 where a page is
    not what SQLite accepts or its keys do not rise within its bounds. Child i holds the
    rowids above cell i−1's key up to cell i's key, the right-most child those above the last."""
    n = 0
    for page in range(buf.size // page_size):
        base = page * page_size
        ncell = _cells(buf, base, 12, page_size, usable)
        if buf[base] != 5 or ncell < 1:
            return -1
        below = low[page]  # the least rowid the next child may hold
        for i in range(ncell + 1):
            if i < ncell:
                q = base + _u16(buf, base + 12 + 2 * i)
                child = _u32(buf, q)
                key, _ = _varint(buf, q + 4)
                if key < below or key > high[page]:
                    return -1
            else:
                child = _u32(buf, base + 8)
                key = high[page]
            if key >= lo and below <= hi:
                out[n] = child
                out_low[n] = below
                out_high[n] = key
                n += 1
            if i < ncell:
                if key == 9223372036854775807:
                    return -1  # no rowid is left for the children after it
                below = key + 1
    return n


@checked_kernel
def _decode(buf: np.ndarray, page_size: int, usable: int, lo: int, hi: int, low: np.ndarray,
            high: np.ndarray, empty_ok: bool, cols: np.ndarray, kinds: np.ndarray,
            ints: np.ndarray, nulls: np.ndarray, at: np.ndarray) -> int:  # fmt: skip
    """Decode the rows of the leaf pages in ``buf`` whose rowid is in [lo, hi]: column j (at
    record position ``cols[j]``) into ``ints[j]``/``nulls[j]``, or for a TEXT column its
    bytes' place in ``buf`` into ``at[j]`` and their length into ``ints[j]``. The rows
    written, or −1 where a page or row is not the plain case or not what SQLite accepts: a
    leaf without cells (``empty_ok``: an empty table's root), rowids that do not rise within
    the leaf's bounds ``low``/``high``, a record whose header and values do not fill its
    payload exactly (see the module doc)."""
    most = 0
    for j in range(cols.size):
        most = max(most, cols[j])
    types = np.empty(most + 1, np.int64)
    where = np.empty(most + 1, np.int64)
    local = usable - 35  # a table leaf's largest payload kept in its page
    row = 0
    last = np.int64(0)
    for page in range(buf.size // page_size):
        base = page * page_size
        if buf[base] != 13:
            return -1
        ncell = _cells(buf, base, 8, page_size, usable)
        if ncell < 0 or (ncell == 0 and not empty_ok):
            return -1
        for c in range(ncell):
            p = base + _u16(buf, base + 8 + 2 * c)
            size, q = _varint(buf, p)
            if q - p > 4:  # SQLite reads a payload size as 32 bits, 7 of every byte
                return -1
            rowid, p = _varint(buf, q)
            if size < 0 or size > local or p + size > base + usable:
                return -1  # spills to overflow pages, or lies about its size
            if rowid < low[page] or rowid > high[page] or (c > 0 and rowid <= last):
                return -1  # not where the tree's keys say: SQL's seek would not find it
            last = rowid
            if rowid < lo or rowid > hi:
                continue
            end = p + size
            head, q = _varint(buf, p)
            if head < 1 or head > size or q - p > 4:
                return -1
            off = p + head
            n = 0
            while q < p + head:
                t, q = _varint(buf, q)
                if q > p + head or t > 4294967295:
                    return -1  # past the header, or more than SQLite's 32 bits
                if n <= most:
                    types[n] = t
                    where[n] = off
                if t >= 12:
                    off += (t - 12) >> 1
                elif t == 10 or t == 11 or t < 0:
                    return -1
                elif t == 5:
                    off += 6
                elif t >= 6 and t <= 7:
                    off += 8
                elif t <= 4:
                    off += t
                n += 1
                if off > end:
                    return -1  # values past the payload (checked each step: no wrap-around)
            if off != end:
                return -1  # the values do not fill the payload exactly
            for j in range(cols.size):
                col = cols[j]
                kind = kinds[j]
                if kind == 2:  # INTEGER PRIMARY KEY: SQL reads the rowid, whatever is stored
                    ints[j, row] = rowid
                    nulls[j, row] = False
                    continue
                if col >= n:
                    return -1  # a column added later: its default is in the schema, not here
                t = types[col]
                if kind == 1:  # text: CAST(coalesce(value, '') AS BLOB)
                    if t == 0:
                        ints[j, row] = 0
                    elif t >= 12:
                        at[j, row] = where[col]
                        ints[j, row] = (t - 12) >> 1
                    else:
                        return -1
                    continue
                nulls[j, row] = False
                if t == 0:
                    nulls[j, row] = True
                elif t == 8 or t == 9:
                    ints[j, row] = t - 8
                elif t <= 6:
                    width = t if t <= 4 else 6 + 2 * (t - 5)
                    v = np.int64(0)
                    for k in range(width):
                        v = (v << 8) | np.int64(buf[where[col] + k])
                    if width < 8:
                        sign = np.int64(1) << (8 * width - 1)
                        if v >= sign:
                            v -= sign << 1
                    ints[j, row] = v
                else:
                    return -1  # a float, text or blob where an integer belongs
            row += 1
    return row


@checked_kernel
def _gather(buf: np.ndarray, at: np.ndarray, length: np.ndarray, to: np.ndarray,
            out: np.ndarray) -> None:  # fmt: skip
    for i in range(at.size):
        a, b = at[i], to[i]
        for k in range(length[i]):
            out[b + k] = buf[a + k]


_WARM = threading.Event()  # set once the warm-up is over, whatever its outcome
_PROBED = threading.Event()  # set once it is known whether it loads or compiles
_WARMING = threading.Lock()
_warming: threading.Thread | None = None
_loading = False  # from numba's disk cache
_compiled = False  # the warm-up succeeded


def _ready() -> bool:
    """Whether the decoder can run now: wait while it loads from the disk cache, not while
    it compiles."""
    _start_warming()  # a forked child whose Db came from its parent has none running
    if not _PROBED.wait(READY_WAIT_S):
        return False
    if _loading:
        _WARM.wait(READY_WAIT_S)
    return _WARM.is_set() and _compiled


def _after_fork() -> None:
    """A child forked while the warm-up ran has no thread finishing it: it starts its own."""
    global _WARM, _PROBED, _WARMING, _warming, _loading, _compiled
    _WARMING = threading.Lock()
    if not _WARM.is_set():
        _WARM, _PROBED = threading.Event(), threading.Event()
        _warming, _loading, _compiled = None, False, False


if hasattr(os, "register_at_fork"):  # pragma: no branch - every POSIX system
    os.register_at_fork(after_in_child=_after_fork)


def _start_warming() -> None:
    """Load the decoder on a thread of its own, once per process: from numba's disk cache it
    is ready before the first big table is; compiled (a first run) it is not, and the reads
    meanwhile go through SQL (the same rows), so no run waits for the compiler."""
    global _warming
    with _WARMING:
        if _warming is None:
            _warming = threading.Thread(target=_warm_and_tell, name="nsysmoe-pages", daemon=True)
            _warming.start()


def _warm_and_tell() -> None:
    global _loading
    try:
        here = bool(_decode.signatures)  # compiled in this process (or its parent) already
        _u16(np.zeros(2, np.uint8), 0)
        _loading = here or bool(_u16.stats.cache_hits)
        _PROBED.set()
        warm()
    except Exception:  # noqa: BLE001 - a decoder that cannot compile: every read is SQL's
        pass
    finally:
        _PROBED.set()
        _WARM.set()


def warm() -> None:
    """Load (or compile) the decoder on a tiny page, so the first read does not; from then
    on every read of this process tries the pages first."""
    global _compiled
    page = np.zeros(512, np.uint8)
    page[0] = LEAF
    one = np.zeros(1, np.int64)
    grid = np.zeros((1, 1), np.int64)
    bound = np.zeros(1, np.int64)
    _decode(page, 512, 512, 0, 0, bound, bound, True, one, one, grid, np.zeros((1, 1), np.bool_),
            grid)  # fmt: skip
    page[0] = INTERIOR
    _children(page, 512, 512, 0, 0, bound, bound, one, one.copy(), one.copy())
    _gather(page, one, one, one, page)
    _compiled = True
    _PROBED.set()
    _WARM.set()
