"""Hostile PyTorch profiler traces: a real-shaped Kineto JSON damaged one way each (values of the
wrong type or beyond range, missing fields, markup and control characters in names, bad
encodings, broken or bomb-like gzip). A mutation maps the trace's bytes to new bytes."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable

Mutation = Callable[[bytes], bytes]


def _sub(pattern: str, repl: str, count: int = 0) -> Mutation:
    rx = re.compile(pattern.encode())

    def apply(data: bytes) -> bytes:
        return rx.sub(repl.encode(), data, count=count)

    return apply


def _every(pattern: str, repl: str, k: int) -> Mutation:
    """Replace every k-th match only, so good events remain beside bad ones."""
    rx = re.compile(pattern.encode())
    template = repl.encode()
    backref = re.search(rb"\\\d", template) is not None  # else the replacement is literal

    def apply(data: bytes) -> bytes:
        seen = [0]

        def one(m: re.Match[bytes]) -> bytes:
            seen[0] += 1
            if seen[0] % k:
                return m.group(0)
            return m.expand(template) if backref else template

        return rx.sub(one, data)

    return apply


def _then_gzip(m: Mutation | None = None) -> Mutation:
    return lambda data: gzip.compress((m or (lambda d: d))(data), mtime=0)


def _const(value: bytes) -> Mutation:
    return lambda data: value


TS = r'"ts": (-?[0-9.]+)'
DUR = r', "dur": (-?[0-9.]+)'
DEVICE = r'"device": (\d+)'


def mutations() -> dict[str, Mutation]:
    m: dict[str, Mutation] = {}
    for label, value in (("huge-exp", "1.5e99999"), ("inf-literal", "Infinity"),
                         ("nan", "NaN"), ("string", '"abc"'), ("null", "null"), ("list", "[1]"),
                         ("neg-epoch", "-1700000000000000.000"), ("over-int64", "9" * 30),
                         ("1e400", "1e400"), ("bool", "true"), ("object", '{"a": 1}'),
                         ("many-decimals", "12.3456789012345678901234567890")):  # fmt: skip
        m[f"ts-{label}"] = _every(TS, f'"ts": {value}', 3)
        m[f"dur-{label}"] = _every(DUR, f', "dur": {value}', 3)
    m["dur-missing"] = _every(DUR, "", 2)
    m["dur-negative"] = _every(DUR, r', "dur": -\1', 2)
    m["args-number"] = _every(r'"args": \{', '"args": 5, "x": {', 2)
    m["args-list"] = _every(r'"args": \{[^{}]*\}', '"args": []', 2)
    m["args-null"] = _every(r'"args": \{[^{}]*\}', '"args": null', 2)
    for label, value in (("string", '"gpu0"'), ("negative", "-3"), ("huge", str(2**70)),
                         ("float", "0.5"), ("list", "[0]"), ("null", "null")):  # fmt: skip
        m[f"device-{label}"] = _every(DEVICE, f'"device": {value}', 2)
    m["stream-string"] = _every(r'"stream": (\d+)', '"stream": "s"', 2)
    m["correlation-string"] = _every(r'"correlation": (\d+)', '"correlation": "c"', 2)
    m["correlation-huge"] = _every(r'"correlation": (\d+)', f'"correlation": {2**64}', 2)
    m["cat-number"] = _every(r'"cat": "kernel"', '"cat": 7', 2)
    m["ph-null"] = _every(r'"ph": "X"', '"ph": null', 3)
    m["pid-huge"] = _every(r'"pid": (\d+)', f'"pid": {2**80}', 2)
    m["tid-string"] = _every(r'"tid": (\d+)', '"tid": "main"', 2)
    m["name-markup"] = _every(r'"name": "', r'"name": "<img src=x onerror=alert(1)>\n| x |', 2)
    m["name-control"] = _every(r'"name": "', r'"name": "\u001b[2J\u001b]0;pwn\u0007\u202e', 2)
    m["name-huge"] = _every(r'"name": "', '"name": "' + "a" * 100_000, 7)
    m["name-number"] = _every(r'"name": "[^"]*"', '"name": 12', 3)
    m["name-bad-utf8"] = lambda d: _every(r'"name": "', "__BAD__", 3)(d).replace(
        b"__BAD__", b'"name": "\xff\xfe\x80')
    m["rank-huge"] = _sub(r'"rank": \d+', f'"rank": {2**90}')
    m["rank-negative"] = _sub(r'"rank": \d+', '"rank": -4')
    m["rank-string"] = _sub(r'"rank": \d+', '"rank": "zero"')
    props = r'"deviceProperties": \['
    m["device-properties-string"] = _sub(props, '"deviceProperties": "x", "y": [')
    m["device-properties-junk"] = _sub(props, '"deviceProperties": [1, null, "a", ')
    m["schema-markup"] = _sub(r'"schemaVersion": \d+', '"schemaVersion": "<script>\\n# x"')
    m["trace-events-object"] = _sub(r'"traceEvents": \[', '"traceEvents": {"a": [')
    m["trace-events-missing"] = _sub(r'"traceEvents"', '"traceEventz"')
    m["no-kernels"] = _sub(r'"cat": "kernel"', '"cat": "python_function"')
    m["no-runtime"] = _sub(r'"cat": "cuda_runtime"', '"cat": "other"')
    m["no-annotations"] = _sub(r'"cat": "(user_annotation|cpu_op)"', '"cat": "other"')
    m["truncated-half"] = lambda d: d[: len(d) // 2]
    m["truncated-end"] = lambda d: d[:-3]
    m["bom"] = lambda d: b"\xef\xbb\xbf" + d
    m["utf16"] = lambda d: d.decode().encode("utf-16")
    m["json-array"] = _const(b"[1, 2, 3]")
    m["json-number"] = _const(b"42")
    m["json-string"] = _const(b'"traceEvents"')
    m["deep-nesting"] = _const(b"{" + b'"a": [' * 50_000 + b"]" * 50_000 + b"}")
    m["empty"] = _const(b"")
    m["whitespace"] = _const(b"  \n\t ")
    m["brace"] = _const(b"{")
    m["binary"] = _const(bytes(range(256)) * 20)
    m["gzip"] = _then_gzip()
    m["gzip-truncated"] = lambda d: gzip.compress(d, mtime=0)[: len(d) // 8]
    m["gzip-garbage"] = _const(b"\x1f\x8b\x08\x00" + b"\x13" * 500)
    m["gzip-twice"] = lambda d: gzip.compress(gzip.compress(d, mtime=0), mtime=0)
    m["gzip-of-markup"] = _then_gzip(_every(r'"name": "', '"name": "<b>', 2))
    return m


def bomb(size: int) -> bytes:
    """``size`` bytes of spaces, gzipped: ~1000x smaller than what it inflates to."""
    return gzip.compress(b" " * size, compresslevel=9, mtime=0)
