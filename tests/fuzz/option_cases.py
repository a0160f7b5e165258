"""Hostile command lines: option values out of range or malformed, contradicting options,
output paths that are inputs, directories or unwritable, rule files that are not rule files."""

from __future__ import annotations

from pathlib import Path

#: (name, arguments with {good}/{other}/{tmp} placeholders, allowed exit codes)
OPTIONS: list[tuple[str, tuple[str, ...], frozenset[int]]] = []
OK_OR_ERROR = frozenset({0, 2})
ERROR = frozenset({2})


def _add(name: str, *args: str, codes: frozenset[int] = OK_OR_ERROR) -> None:
    OPTIONS.append((name, args, codes))


for w in ("garbage", ":", "5-3", "3-3", "0-0", "-1s:2s", "2s:1s", "1e400s:", ":1e400s",
          "99999999999999999999s:", "+99999999999s:", "1:2:3", "+:+", "iterations:1-2",
          "1.5.5s:2s", "1ks:2s", "nan:inf", "  7 - 9 ", "0:1ns", "+0:+1ns", "\x00:1"):  # fmt: skip
    _add(f"window-{w!r}", "analyze", "{good}", "--window", w)
for w in ("garbage", "5-3", "0-0", "2s:1s", "99999999999999999999s:", "+99999999999s:"):
    _add(f"ab-window-{w!r}", "analyze", "{good}", "{other}", "--window", w)
for top in ("-1", "0", "999999999999999999999", "x", "1e3"):
    _add(f"kernels-top-{top}", "kernels", "{good}", "--top", top)
for klass in ("comm", "nope", "", "<b>"):
    _add(f"kernels-class-{klass!r}", "kernels", "{good}", "--class", klass)
for skip in ("-1", "99999", "x"):
    _add(f"skip-{skip}", "analyze", "{good}", "--skip", skip)
_add("skip-with-time-window", "analyze", "{good}", "--skip", "1", "--window", "1s:2s",
     codes=ERROR)
for pat in ("(", "(a+)+$", "(?<=x)y", "[", "iteration (\\d+)", "\\", "(?P<x>", ""):
    _add(f"step-range-{pat!r}", "analyze", "{good}", "--step-range", pat)
for cond in ("garbage", "hidden_pct<<3", "bogus<1", "hidden_pct<1e400", "hidden_pct<", "<3",
             "hidden_pct<nan", "hidden_pct==0", "hidden_pct!=0", "kernels>=0",
             "matched==1"):  # fmt: skip
    _add(f"fail-if-{cond!r}", "analyze", "{good}", "--fail-if", cond,
         codes=frozenset({0, 1, 2}))  # fmt: skip
for cond in ("garbage", "bogus<1", "hidden_pct<1e400", "matched==1", "step_time_delta_pct>0"):
    _add(f"ab-fail-if-{cond!r}", "analyze", "{good}", "{other}", "--fail-if", cond,
         codes=frozenset({0, 1, 2}))  # fmt: skip
for fmt in ("xml", "", "JSON", "csv"):
    _add(f"format-{fmt!r}", "analyze", "{good}", "--format", fmt, codes=ERROR)
for jobs in ("0", "-2", "x", "100000"):
    _add(f"jobs-{jobs}", "analyze", "{good}", "{good}", "{good}", "--jobs", jobs)
for addr in ("", "::::", "tcp://", "tcp://host:notaport", "http://[::1", "local:5",
             "tcp://256.256.256.256:99999"):  # fmt: skip
    _add(f"dask-{addr!r}", "analyze", "{good}", "{other}", "{good}", "--dask", addr)
_add("dask-single-file", "analyze", "{good}", "--dask", "tcp://127.0.0.1:1")
_add("compat-with-window", "analyze", "{good}", "--compat", "hta", "--window", "1-2", codes=ERROR)
_add("compat-with-plot", "analyze", "{good}", "--compat", "hta", "--plot", "{tmp}/p", codes=ERROR)
_add("compat-unknown", "analyze", "{good}", "--compat", "nsight", codes=ERROR)
_add("output-is-input", "analyze", "{good}", "-o", "{good}", codes=ERROR)
_add("output-is-other-input", "analyze", "{good}", "{other}", "-o", "{other}", codes=ERROR)
_add("output-is-directory", "analyze", "{good}", "-o", "{tmp}", codes=ERROR)
_add("output-in-missing-dir", "analyze", "{good}", "-o", "{tmp}/no/such/dir/r.txt")
_add("output-dev-full", "analyze", "{good}", "-o", "/dev/full")
_add("plot-is-a-file", "analyze", "{good}", "--plot", "{good}", codes=ERROR)
_add("plot-under-a-file", "analyze", "{good}", "--plot", "{good}/figs", codes=ERROR)
for rules in ("{tmp}/missing.toml", "{tmp}", "/dev/null", "{rules_empty}", "{rules_binary}",
              "{rules_bad_toml}", "{rules_bad_regex}", "{rules_lookaround}", "{rules_huge}",
              "{rules_wrong_types}", "{rules_utf16}"):  # fmt: skip
    _add(f"rules-{Path(rules).name}", "analyze", "{good}", "--rules", rules)
    _add(f"kernels-rules-{Path(rules).name}", "kernels", "{good}", "--rules", rules)
_add("rules-replace-alone", "analyze", "{good}", "--rules-replace")
_add("unknown-option", "analyze", "{good}", "--frobnicate", codes=ERROR)
_add("no-traces", "analyze", codes=ERROR)
_add("missing-trace", "analyze", "{tmp}/missing.sqlite", codes=ERROR)
_add("directory-without-traces", "analyze", "{tmp}/emptydir", codes=ERROR)
_add("glob-matching-nothing", "analyze", "{tmp}/*.nothing", codes=ERROR)
_add("literal-glob-name", "analyze", "{bracket}")
_add("dash-name", "analyze", "{dash}")
_add("three-same-file", "analyze", "{good}", "{good}", "{good}", "--jobs", "1")


def rule_files(tmp: Path) -> dict[str, str]:
    """The rule files the cases name, written into ``tmp``."""
    files = {
        "rules_empty": b"",
        "rules_binary": bytes(range(256)),
        "rules_bad_toml": b"[[rule]\nclass = 'comm'",
        "rules_bad_regex": b"[[rule]]\nclass = 'comm'\nsubclass = 'x'\npattern = '('\n",
        "rules_lookaround": b"[[rule]]\nclass = 'comm'\nsubclass = 'x'\npattern = '(?<=a)b'\n",
        "rules_huge": b"# " + b"x" * (3 << 20) + b"\n",
        "rules_wrong_types": b"[[rule]]\nclass = 1\nsubclass = []\npattern = {}\n",
        "rules_utf16": "[[rule]]\nclass = 'comm'\n".encode("utf-16"),
    }
    out = {}
    for key, data in files.items():
        path = tmp / f"{key}.toml"
        path.write_bytes(data)
        out[key] = str(path)
    return out
