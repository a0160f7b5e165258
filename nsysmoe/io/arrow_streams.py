"""``nsys export --type arrow``: one ``.arrows`` file holding every table as an Arrow IPC stream,
one after another, each named in its schema's metadata (``table_name``).

An IPC stream is a run of messages (``0xFFFFFFFF``, the metadata's length, a Message
flatbuffer, then a body of the length the Message gives) ending with an end-of-stream marker
(``0xFFFFFFFF 00000000``). :func:`table_streams` walks those headers only — never a body — and
finds where each table's stream starts and ends and its name, so a reader then reads one table's
bytes with polars. The few flatbuffer fields needed (Message.header_type, .header, .bodyLength;
Schema.custom_metadata; KeyValue.key, .value) are read here, every offset bounds-checked: a
damaged or foreign file is :class:`BadStream`, never an IndexError or a read past the end.
"""

from __future__ import annotations

import struct
from pathlib import Path

#: the first bytes of an encapsulated IPC message (the continuation marker)
CONTINUATION = b"\xff\xff\xff\xff"
_SCHEMA = 1  # MessageHeader.Schema
_HEADER = 64 << 20  # a Message flatbuffer longer than this is not one nsys wrote


class BadStream(Exception):
    """The file is not a run of Arrow IPC streams (truncated, damaged or another format)."""


class _Buffer:
    """Little-endian reads of a flatbuffer, each checked against its length."""

    def __init__(self, data: bytes):
        self.data = data

    def _unpack(self, fmt: str, at: int) -> int:
        if at < 0 or at + struct.calcsize(fmt) > len(self.data):
            raise BadStream(f"a flatbuffer offset points outside its message ({at})")
        return int(struct.unpack_from(fmt, self.data, at)[0])

    def u16(self, at: int) -> int:
        return self._unpack("<H", at)

    def u32(self, at: int) -> int:
        return self._unpack("<I", at)

    def i32(self, at: int) -> int:
        return self._unpack("<i", at)

    def i64(self, at: int) -> int:
        return self._unpack("<q", at)

    def u8(self, at: int) -> int:
        return self._unpack("<B", at)

    def field(self, table: int, index: int) -> int:
        """The position of a table's field ``index``, or 0 where it is absent (its default)."""
        vtable = table - self.i32(table)
        at = 4 + 2 * index
        if at + 2 > self.u16(vtable):
            return 0
        offset = self.u16(vtable + at)
        return table + offset if offset else 0

    def ref(self, at: int) -> int:
        """Follow the uoffset stored at ``at``."""
        return at + self.u32(at)

    def string(self, at: int) -> str:
        start = self.ref(at)
        size = self.u32(start)
        if start + 4 + size > len(self.data):
            raise BadStream("a string runs past its message")
        return self.data[start + 4 : start + 4 + size].decode("utf-8", "replace")


def _table_name(meta: _Buffer, message: int) -> str | None:
    """The ``table_name`` of a Schema message's custom metadata, if it has one."""
    header = meta.field(message, 2)
    if not header:
        return None
    schema = meta.ref(header)
    vec_at = meta.field(schema, 2)  # Schema.custom_metadata
    if not vec_at:
        return None
    vec = meta.ref(vec_at)
    for k in range(meta.u32(vec)):
        kv = meta.ref(vec + 4 + 4 * k)
        key_at, value_at = meta.field(kv, 0), meta.field(kv, 1)
        if key_at and value_at and meta.string(key_at) == "table_name":
            return meta.string(value_at)
    return None


#: where one table's stream lies in the file: (start, end, end of its schema message)
Span = tuple[int, int, int]
#: the end-of-stream marker
EOS = CONTINUATION + b"\x00\x00\x00\x00"


def table_streams(path: Path) -> dict[str, Span]:
    """Each table's stream in the ``.arrows`` file at ``path``. Raises :class:`BadStream` (or
    OSError) for anything that is not a run of named Arrow IPC streams, each name once. A file
    cut exactly between two streams cannot be told from a whole one here (the format has no
    footer): the reader warns where the PROCESSES table every export holds is missing."""
    found: dict[str, Span] = {}
    size = path.stat().st_size
    with path.open("rb") as fh:
        pos, start, name, first, schema_end = 0, 0, None, True, 0
        while pos < size:
            fh.seek(pos)
            head = fh.read(8)
            if len(head) < 8 or head[:4] != CONTINUATION:
                raise BadStream(f"no Arrow IPC message at byte {pos}")
            length = struct.unpack("<i", head[4:])[0]
            if length == 0:  # end of one table's stream
                pos += 8
                if name is None:
                    raise BadStream(f"the stream ending at byte {pos} names no table")
                if name in found:  # two reports' tables in one file, or a file appended to
                    raise BadStream(f"table {name} appears twice (at bytes {found[name][0]} and "
                                    f"{start})")  # fmt: skip
                found[name] = (start, pos, schema_end)
                start, name, first, schema_end = pos, None, True, 0
                continue
            if not 0 < length <= _HEADER or pos + 8 + length > size:
                raise BadStream(f"a message at byte {pos} claims {length} bytes of metadata")
            meta = _Buffer(fh.read(length))
            message = meta.u32(0)
            kind_at = meta.field(message, 1)
            kind = meta.u8(kind_at) if kind_at else 0
            if first:
                if kind != _SCHEMA:
                    raise BadStream(f"the stream at byte {pos} does not open with a schema")
                name = _table_name(meta, message)
                first = False
            body_at = meta.field(message, 3)
            body = meta.i64(body_at) if body_at else 0
            if body < 0 or pos + 8 + length + body > size:
                raise BadStream(f"a message at byte {pos} claims a body past the file's end")
            pos += 8 + length + body
            schema_end = schema_end or pos
        if not first:
            raise BadStream("the last stream has no end-of-stream marker (the file is cut short)")
    return found


def read_stream(path: Path, span: Span, schema_only: bool = False) -> bytes:
    """The bytes of one table's stream; ``schema_only``: its schema message and an end marker,
    a stream of no rows (what its columns are, without reading its rows)."""
    with path.open("rb") as fh:
        fh.seek(span[0])
        if schema_only:
            return fh.read(span[2] - span[0]) + EOS
        return fh.read(span[1] - span[0])
