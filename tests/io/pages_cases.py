"""Helpers for test_pages.py: the pages of a table's b-tree, damaged copies of an export, and
the child process that reads each damaged copy through the pages and through SQL.

Run as ``python -m tests.io.pages_cases BASE SPECS WORK``: for each mutation in the JSON list
SPECS, BASE's bytes are changed as it says and written to WORK, then read both ways. One JSON
line per mutation goes to stdout; a ``{"start": i, "step": ...}`` line before each read, so a
crash or a hang names the mutation and the read it happened in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import resource
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

HEADER = 100
LEAF, INTERIOR = 13, 5
#: the tables the page decoder answers for in real exports (the big ones)
BIG = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "StringIds",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
)
#: extra address space a child may take beyond what it has after its imports
MEMORY_HEADROOM = 3 << 30


# -- the file's layout ------------------------------------------------------------------------


def u16(data: bytes | bytearray, p: int) -> int:
    return int.from_bytes(data[p : p + 2], "big")


def u32(data: bytes | bytearray, p: int) -> int:
    return int.from_bytes(data[p : p + 4], "big")


def varint(data: bytes | bytearray, p: int) -> tuple[int, int]:
    """SQLite's varint at ``p`` (as unsigned) and the position after it."""
    v = 0
    for k in range(8):
        b = data[p + k]
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, p + k + 1
    return (v << 8) | data[p + 8], p + 9


def page_size(data: bytes | bytearray) -> int:
    ps = u16(data, 16)
    return 65536 if ps == 1 else ps


def head_of(pg: int, ps: int) -> int:
    """Where page ``pg``'s b-tree header starts in the file."""
    return (pg - 1) * ps + (HEADER if pg == 1 else 0)


def roots(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        rows = conn.execute("SELECT name, rootpage FROM sqlite_master WHERE type = 'table'")
        return {name: root for name, root in rows if isinstance(root, int) and root > 0}
    finally:
        conn.close()


def tree(data: bytes, root: int) -> tuple[list[int], list[int]]:
    """The interior pages and the leaves (in rowid order) of the table b-tree at ``root``, of
    an undamaged file."""
    ps = page_size(data)
    interior: list[int] = []
    leaves: list[int] = []
    level = [root]
    while level:
        below = []
        for pg in level:
            h = head_of(pg, ps)
            if data[h] == LEAF:
                leaves.append(pg)
                continue
            assert data[h] == INTERIOR, (pg, data[h])
            interior.append(pg)
            base = (pg - 1) * ps
            below += [u32(data, base + u16(data, h + 12 + 2 * i)) for i in range(u16(data, h + 3))]
            below.append(u32(data, h + 8))
        level = below
    return interior, leaves


def cells(data: bytes, pg: int) -> list[int]:
    """Where the cells of page ``pg`` start in the file."""
    ps = page_size(data)
    h = head_of(pg, ps)
    start = 12 if data[h] == INTERIOR else 8
    return [(pg - 1) * ps + u16(data, h + start + 2 * i) for i in range(u16(data, h + 3))]


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


class _Broken(Exception):
    pass


def known_damage(data: bytes, root: int, alias: int | None) -> str | None:
    """The decoder's known blind spots this damaged table b-tree falls into (None: neither):
    ``"order"``, rowids out of order (an interior key not above the one before it, or a row
    outside the key range its parent gives its page, or not above the row before it), where
    SQLite's rowid seeks, which trust the keys, answer other rows than a scan; ``"alias"``, an
    INTEGER PRIMARY KEY (record column ``alias``) whose slot in a record is not NULL, where SQL
    reads the rowid and the decoder the slot; ``"overread"``, a cell whose header runs past
    its page's end, where SQLite reads bytes beyond the page in memory, which differ from run
    to run (so does what SQL answers); ``"broken"``, a tree that cannot be walked."""
    ps = page_size(data)
    found: set[str] = set()
    last: list[int] = []

    def walk(pg: int, low: int | None, high: int | None, depth: int) -> None:
        try:
            step(pg, low, high, depth)
        except (_Broken, IndexError):  # this subtree: the rest is still walked
            found.add("broken")

    def step(pg: int, low: int | None, high: int | None, depth: int) -> None:
        if depth > 20 or not 1 <= pg <= len(data) // ps:
            raise _Broken
        h, base = head_of(pg, ps), (pg - 1) * ps
        n = u16(data, h + 3)
        if data[h] == INTERIOR:
            prev = low
            for i in range(n):
                q = base + u16(data, h + 12 + 2 * i)
                key, end = varint(data, q + 4)
                key = _signed(key)
                if end > base + ps:
                    found.add("overread")
                if (prev is not None and key <= prev) or (high is not None and key > high):
                    found.add("order")
                walk(u32(data, q), prev, key, depth + 1)
                prev = key
            walk(u32(data, h + 8), prev, high, depth + 1)
            return
        if data[h] != LEAF:
            raise _Broken
        for i in range(n):
            _, p = varint(data, base + u16(data, h + 8 + 2 * i))
            rowid, p = varint(data, p)
            rowid = _signed(rowid)
            if varint(data, p)[1] > base + ps:  # and the record's header size
                found.add("overread")
            if (low is not None and rowid <= low) or (high is not None and rowid > high):
                found.add("order")
            if last and rowid <= last[0]:
                found.add("order")
            last[:] = [rowid]
            if alias is not None:
                _, q = varint(data, p)
                for _ in range(alias + 1):
                    t, q = varint(data, q)
                if t != 0:
                    found.add("alias")

    walk(root, None, None, 0)
    return ",".join(sorted(found)) or None


# -- mutations ------------------------------------------------------------------------------


@dataclasses.dataclass
class Mutation:
    """Bytes written over a copy of an export (``writes``: offset and hex), then maybe the copy
    cut to ``truncate`` bytes; ``table`` is the one whose pages were hit."""

    kind: str
    table: str
    page: int
    writes: list[tuple[int, str]]
    truncate: int | None = None

    def apply(self, data: bytes) -> bytes:
        out = bytearray(data)
        for at, hexed in self.writes:
            raw = bytes.fromhex(hexed)
            out[at : at + len(raw)] = raw
        return bytes(out[: self.truncate] if self.truncate is not None else out)

    def said(self) -> str:
        """The mutation in a line: what to write where, to reproduce it."""
        writes = ", ".join(f"@{at}: {h[:40]}{'…' if len(h) > 40 else ''}" for at, h in self.writes)
        cut = f" truncate to {self.truncate} bytes" if self.truncate is not None else ""
        return f"{self.kind} on {self.table} page {self.page}: {writes}{cut}"


def mutations(base: Path, seed: int, per_kind: int) -> list[Mutation]:
    """``per_kind`` mutations of each kind, in the big tables' pages of ``base``."""
    data = base.read_bytes()
    ps = page_size(data)
    npages = len(data) // ps
    rng = random.Random(seed)
    trees = {t: tree(data, r) for t, r in roots(base).items() if t in BIG}
    trees = {t: v for t, v in trees.items() if v[1]}
    every_leaf = [pg for t, r in roots(base).items() for pg in tree(data, r)[1]]
    out: list[Mutation] = []

    def pick(interior: bool = False) -> tuple[str, int] | None:
        options = [t for t, (inner, _) in trees.items() if inner or not interior]
        if not options:
            return None
        table = rng.choice(sorted(options))
        inner, leaves = trees[table]
        return table, rng.choice(inner if interior else inner + leaves if inner else leaves)

    def leaf() -> tuple[str, int]:
        table = rng.choice(sorted(trees))
        return table, rng.choice(trees[table][1])

    def put(kind: str, table: str, pg: int, at: int, value: bytes) -> None:
        out.append(Mutation(kind, table, pg, [(at, value.hex())]))

    for _ in range(per_kind):
        table, pg = pick() or leaf()
        base_at = (pg - 1) * ps
        flips = [
            (at, bytes([data[at] ^ rng.randrange(1, 256)]).hex())
            for at in (base_at + rng.randrange(ps) for _ in range(rng.randint(1, 4)))
        ]
        out.append(Mutation("flip", table, pg, flips))

        table, pg = pick() or leaf()
        h = head_of(pg, ps)
        put("page type", table, pg, h, bytes([rng.choice([0, 1, 2, 5, 10, 13, 0x8D, 0xFF])]))

        table, pg = pick() or leaf()
        h = head_of(pg, ps)
        n = u16(data, h + 3)
        value = rng.choice([0, 1, n - 1, n + 1, n + 7, (ps - 8) // 6 + 1, 0xFFFF])
        put("cell count", table, pg, h + 3, max(value, 0).to_bytes(2, "big"))

        table, pg = pick() or leaf()
        h = head_of(pg, ps)
        start = 12 if data[h] == INTERIOR else 8
        ptrs = [u16(data, h + start + 2 * i) for i in range(u16(data, h + 3))]
        if ptrs:
            i = rng.randrange(len(ptrs))
            value = rng.choice(
                [
                    0,
                    1,
                    8,
                    start + 2 * len(ptrs),
                    ps - 1,
                    ps,
                    ps + 10,
                    0xFFFF,
                    rng.choice(ptrs),
                    ptrs[i] + 1,
                    ptrs[i] - 1,
                    rng.randrange(0x10000),
                ]
            )
            put("cell pointer", table, pg, h + start + 2 * i, (value & 0xFFFF).to_bytes(2, "big"))

        table, pg = leaf()
        at = rng.choice(cells(data, pg) or [head_of(pg, ps)])
        k = rng.randint(1, 9)
        put("0xFF run in a cell's varints", table, pg, at + rng.randrange(4), b"\xff" * k)

        table, pg = leaf()
        spots = cells(data, pg)
        if spots:
            q = rng.choice(spots)
            size, p = varint(data, q)
            _, p = varint(data, p)
            head, after = varint(data, p)
            if rng.random() < 0.3:
                value = rng.choice([0, 1, head - 1, head + 1, 0x7F, size, size + 1])
                put("record header size", table, pg, p, bytes([value & 0x7F]))
            else:
                at = rng.randrange(after, p + head) if p + head > after else after
                value = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0x7F, 0x81])
                put("serial type", table, pg, at, bytes([value]))

        got = pick(interior=True)
        if got:
            table, pg = got
            h = head_of(pg, ps)
            inner, leaves = trees[table]
            spots = cells(data, pg)
            at = rng.choice([*spots, h + 8])
            value = rng.choice(
                [
                    0,
                    1,
                    pg,
                    inner[0],
                    rng.choice(inner),
                    rng.choice(leaves),
                    rng.choice(every_leaf),
                    npages,
                    npages + 1,
                    0xFFFFFFFF,
                    0x7FFFFFFF,
                    rng.randrange(1, npages + 1),
                ]
            )
            put("child pointer", table, pg, at, value.to_bytes(4, "big"))

        got = pick(interior=True)
        if got:
            table, pg = got
            q = rng.choice(cells(data, pg))
            value = rng.choice(
                [b"\x00", b"\x7f", b"\xff" * rng.randint(1, 9), bytes([rng.randrange(256)])]
            )
            put("interior key", table, pg, q + 4, value)

        table, pg = pick() or leaf()
        cut = (pg - 1) * ps + rng.choice([0, 0, 1, ps // 2, ps - 1, ps])
        out.append(Mutation("truncate", table, pg, [], truncate=cut))

        table, pg = pick() or leaf()
        fill = rng.choice([b"\x00", b"\xff", None])
        raw = bytes(rng.randrange(256) for _ in range(ps)) if fill is None else fill * ps
        if pg == 1:
            raw = raw[HEADER:]
        put("page overwritten", table, pg, head_of(pg, ps), raw)

        table, pg = leaf()
        others = [p for p in trees[table][1] if p != pg]
        if others:
            other = rng.choice(others)
            a, b = (pg - 1) * ps, (other - 1) * ps
            out.append(
                Mutation(
                    "leaves swapped",
                    table,
                    pg,
                    [(a, data[b : b + ps].hex()), (b, data[a : a + ps].hex())],
                )
            )

        table, pg = leaf()
        other = rng.choice([p for p in every_leaf if p not in trees[table][1] and p != 1] or [pg])
        b = (other - 1) * ps
        put("another table's leaf copied", table, pg, (pg - 1) * ps, data[b : b + ps])

        table, pg = pick() or leaf()
        h = head_of(pg, ps)
        field = rng.choice([(1, 2), (5, 2), (7, 1)])  # first free block, content start, fragments
        value = rng.choice([0, 1, 7, ps - 1, ps, 0xFFFF, rng.randrange(0x10000)])
        put(
            "page header free space",
            table,
            pg,
            h + field[0],
            (value % (256 ** field[1])).to_bytes(field[1], "big"),
        )

        table, pg = pick() or leaf()
        at = (pg - 1) * ps + rng.randrange(ps)
        put("0xFF run", table, pg, at, b"\xff" * rng.randint(2, 32))

    for value in (1, 8, 32, 255):  # reserved bytes at the end of each page
        out.append(Mutation("file header reserved bytes", "-", 1, [(20, bytes([value]).hex())]))
    out.append(
        Mutation("file header page size", "-", 1, [(16, (ps * 2 % 65536).to_bytes(2, "big").hex())])
    )
    out.append(
        Mutation("file header page size", "-", 1, [(16, (ps // 2).to_bytes(2, "big").hex())])
    )
    out.append(Mutation("file header text encoding", "-", 1, [(56, (2).to_bytes(4, "big").hex())]))
    for t, r in roots(base).items():  # a root page number in the schema: the table's tree moved
        if t == "CUPTI_ACTIVITY_KIND_KERNEL":
            out.append(Mutation("first page cut off", t, r, [], truncate=len(data) - ps))
    return [m for m in out if all(at + len(h) // 2 <= len(data) for at, h in m.writes)]


# -- the child: each mutation read both ways --------------------------------------------------


def trace_difference(a: Any, b: Any) -> str | None:
    """The first field in which two traces differ, or None."""
    import polars as pl

    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pl.DataFrame):
            if not (isinstance(y, pl.DataFrame) and x.schema == y.schema and x.equals(y)):
                return field.name
        elif x != y:
            return field.name
    return None


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def classify(pages: tuple[str, Any], sql: tuple[str, Any], differ: str | None) -> str:
    """a: both raised; b: both read the same; c: only SQL raised (damage the pages missed);
    d: they read different data, or only the pages raised."""
    if pages[0] == "err" and sql[0] == "err":
        return "a"
    if pages[0] == "ok" and sql[0] == "ok":
        return "b" if differ is None else "d"
    return "c" if sql[0] == "err" else "d"


def _step(i: int, step: str) -> None:
    print(json.dumps({"start": i, "step": step}), flush=True)


def read_twice(i: int, path: Path, answered: list[str]) -> dict[str, Any]:
    """``read_nsys_sqlite`` through the pages, then through SQL."""
    from nsysmoe.io.nsys_sqlite import read_nsys_sqlite

    got = {}
    for mode in ("pages", "sql"):
        os.environ["NSYSMOE_READER"] = mode
        _step(i, f"read ({mode})")
        answered.clear()
        t0 = time.perf_counter()
        try:
            got[mode] = ("ok", read_nsys_sqlite(path))
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome here
            got[mode] = ("err", _said(exc))
        got[mode + " s"] = time.perf_counter() - t0
        if mode == "pages":
            got["answered"] = sorted(set(answered))
    os.environ["NSYSMOE_READER"] = "pages"
    pages, sql = got["pages"], got["sql"]
    differ = trace_difference(pages[1], sql[1]) if pages[0] == sql[0] == "ok" else None
    return {
        "class": classify(pages, sql, differ),
        "pages": pages[1] if pages[0] == "err" else "ok",
        "sql": sql[1] if sql[0] == "err" else "ok",
        "differ": differ,
        "answered": got["answered"],
        "pages s": round(got["pages s"], 3),
    }


def expected_rows(
    conn: sqlite3.Connection, table: str, columns: list[str], text: list[bool], where: str
) -> list[list[Any]]:
    """What SQL answers for ``Pages.select``: one list per column."""
    exprs = [
        f"CAST(coalesce(\"{c}\", '') AS BLOB)" if t else f'"{c}"'
        for c, t in zip(columns, text, strict=True)
    ]
    sql = f'SELECT {", ".join(exprs)} FROM "{table}"' + (f" WHERE {where}" if where else "")
    rows = conn.execute(sql).fetchall()
    return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in columns]


def compare_select(got: list[Any] | None, want: list[list[Any]], text: list[bool]) -> str | None:
    """Why ``Pages.select``'s answer ``got`` is not SQL's ``want`` (None: it is, or got is None
    and may be). Where SQL gives a value no Int64 holds, only None may answer."""
    import polars as pl

    if got is None:
        return None
    if len(got) != len(want):
        return f"{len(got)} columns, SQL {len(want)}"
    for j, (series, values, t) in enumerate(zip(got, want, text, strict=True)):
        dtype = pl.Binary if t else pl.Int64
        odd = [v for v in values if v is not None and type(v) is not (bytes if t else int)]
        if odd:
            return f"column {j}: answered, but SQL reads {odd[0]!r} (not {dtype})"
        if series.dtype != dtype:
            return f"column {j}: dtype {series.dtype}, not {dtype}"
        mine = series.to_list()
        if mine != values:
            at = next(
                (k for k, (x, y) in enumerate(zip(mine, values, strict=False)) if x != y),
                min(len(mine), len(values)),
            )
            return (
                f"column {j}: {len(mine)} rows, SQL {len(values)}; first difference at row "
                f"{at}: {mine[at : at + 1]} vs SQL {values[at : at + 1]}"
            )
    return None


def select_twice(i: int, path: Path, table: str, wheres: list[str]) -> list[dict[str, Any]]:
    """``Pages.select`` of every column of ``table`` against SQL, for each of ``wheres``."""
    from nsysmoe.io import nsys_db

    out = []
    try:
        with nsys_db.opened(path) as db:
            if db.pages is None or not db.has(table):
                return out
            info = db.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            columns = [r[1] for r in info]
            text = [str(r[2]).upper() == "TEXT" for r in info]
            for where in wheres:
                _step(i, f"select {where!r}")
                try:
                    got = ("ok", db.pages.select(table, columns, text, where))
                except Exception as exc:  # noqa: BLE001
                    got = ("err", _said(exc))
                try:
                    want = ("ok", expected_rows(db.conn, table, columns, text, where))
                except Exception as exc:  # noqa: BLE001
                    want = ("err", _said(exc))
                differ = None
                if got[0] == want[0] == "ok":
                    differ = compare_select(got[1], want[1], text)
                if got[0] == "ok" and got[1] is None and want[0] == "err":
                    cls = "a"  # no answer, SQL raised: what Db.select does then
                else:
                    cls = classify(got, want, differ)
                out.append(
                    {
                        "where": where,
                        "class": cls,
                        "differ": differ,
                        "pages": got[1]
                        if got[0] == "err"
                        else ("None" if got[1] is None else "answered"),
                        "sql": want[1] if want[0] == "err" else "ok",
                    }
                )
    except Exception as exc:  # noqa: BLE001 - opening the damaged file failed (both ways)
        out.append(
            {
                "where": "(open)",
                "class": "a",
                "pages": _said(exc),
                "sql": _said(exc),
                "differ": None,
            }
        )
    return out


def alias_of(base: Path, table: str) -> int | None:
    """The record column of ``table``'s INTEGER PRIMARY KEY (the rowid's alias), if any."""
    conn = sqlite3.connect(f"file:{base}?mode=ro&immutable=1", uri=True)
    try:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    finally:
        conn.close()
    keys = [r for r in info if r[5]]
    if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER":
        return int(keys[0][0])
    return None


def conditions(base: Path, table: str) -> list[str]:
    """WHEREs as the readers write them for ``table`` of the undamaged ``base``: none, rowid
    ranges (thirds of its rowids), and one integer column's ``IN`` list."""
    conn = sqlite3.connect(f"file:{base}?mode=ro&immutable=1", uri=True)
    try:
        low, high = conn.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        ints = [r[1] for r in info if str(r[2]).upper() == "INTEGER"]
        out = [""]
        if low is not None:
            a, b = low + (high - low) // 3, low + 2 * (high - low) // 3
            out += [f"rowid <= {a}", f"rowid > {a} AND rowid <= {b}", f"(rowid > {b})"]
        if ints:
            rows = conn.execute(f'SELECT DISTINCT "{ints[-1]}" FROM "{table}" LIMIT 3').fetchall()
            values = [str(r[0]) for r in rows if type(r[0]) is int]
            if values:
                out.append(f'("{ints[-1]}" IN ({", ".join(values)}))')
                if low is not None:
                    out.append(f"(rowid <= {a}) AND ({ints[-1]} IN ({', '.join(values)}))")
        return out
    finally:
        conn.close()


def main(argv: list[str]) -> None:
    base, specs, work = Path(argv[0]), json.loads(Path(argv[1]).read_text()), Path(argv[2])
    wheres = {t: conditions(base, t) for t in roots(base) if t in BIG}
    from nsysmoe.io import pages as pages_module

    pages_module.warm()  # compiled before the first read (else that read is SQL's)
    answered: list[str] = []
    original = pages_module.Pages.select

    def recording(self: Any, table: str, *args: Any) -> Any:
        got = original(self, table, *args)
        if got is not None:
            answered.append(table)
        return got

    pages_module.Pages.select = recording  # type: ignore[method-assign]
    # a decoder that allocates without bound gets a MemoryError, not the machine's OOM killer
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + MEMORY_HEADROOM, resource.RLIM_INFINITY))
    data = base.read_bytes()
    tables = {t: (r, alias_of(base, t)) for t, r in roots(base).items() if t in BIG}
    for i, spec in enumerate(specs):
        m = Mutation(**{**spec, "writes": [tuple(w) for w in spec["writes"]]})
        damaged = m.apply(data)
        work.write_bytes(damaged)
        result = {"i": i, **read_twice(i, work, answered)}
        known = {t: known_damage(damaged, r, a) for t, (r, a) in tables.items()}
        result["known"] = {t: k for t, k in known.items() if k}
        if m.table in BIG:
            pages_module.Pages.select = original  # type: ignore[method-assign]
            result["select"] = select_twice(i, work, m.table, wheres[m.table])
            pages_module.Pages.select = recording  # type: ignore[method-assign]
        if "d" in [result["class"], *(s["class"] for s in result.get("select", []))]:
            # SQLite reads past a page's end where a damaged cell says so, into memory whose
            # bytes vary from run to run: the same file may read, or be "malformed", by turns
            again = read_twice(i, work, answered)
            result["unstable"] = [again[k] for k in ("class", "pages", "sql", "differ")] != [
                result[k] for k in ("class", "pages", "sql", "differ")
            ]
            if m.table in BIG:
                pages_module.Pages.select = original  # type: ignore[method-assign]
                twice = select_twice(i, work, m.table, wheres[m.table])
                pages_module.Pages.select = recording  # type: ignore[method-assign]
                result["unstable"] |= twice != result["select"]
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
