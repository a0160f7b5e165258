"""The result cache (``--cache``): a repeat is served from the stored result or report, byte for
byte what a fresh run writes, and never stale — each part of the key (the input's content at
the same size and mtime, the rules edited in place, the scope, nsysmoe's own source, its version)
makes a miss; a damaged entry is rebuilt, an unusable cache folder is a note."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import api, fingerprint, pipeline, result_cache
from nsysmoe.model import STEADY, WHOLE
from nsysmoe.renderers import render

OFF, ON = api.example_paths()
KINETO = api.example_paths("kineto")[0]


def run_cli(*args: str, env: dict[str, str],
            check: bool = True) -> subprocess.CompletedProcess[str]:  # fmt: skip
    cmd = [sys.executable, "-c", "from nsysmoe.cli import main; main()", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env})  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times an analysis was computed (not served from the cache)."""
    calls: list[int] = []
    real = pipeline.analyze_trace

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "analyze_trace", counted)
    return calls


def _same_size_edit(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length) in ``path`` and put its mtime back."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


# --- the stored result is the result -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "markdown", "terminal"])
def test_stored_results_render_as_the_computed_ones(tmp_path: Path, fmt: str) -> None:
    """An analysis, an A/B and a many-rank run render the same from a stored result."""
    computed = [api.analyze(OFF, scope=STEADY), api.compare(OFF, ON),
                api.analyze_many([str(OFF), str(ON)])]  # fmt: skip
    for i, result in enumerate(computed[:2]):
        assert result_cache.store(tmp_path, f"k{i}", result) is None
        loaded = result_cache.load(tmp_path, f"k{i}")
        assert type(loaded) is type(result)
        assert render(loaded, fmt) == render(result, fmt)
    for i, a in enumerate(computed[2].analyses):  # per-file results of a many-rank run
        assert result_cache.store(tmp_path, f"r{i}", a) is None
        assert render(result_cache.load(tmp_path, f"r{i}"), fmt) == render(a, fmt)


def test_encoding_is_exact_for_every_kind_of_value(tmp_path: Path) -> None:
    """Tuples stay tuples, dicts keep non-string keys, ints stay ints, floats keep every bit
    (NaN and infinities too), frames keep their dtypes — an independent equality check."""
    from nsysmoe.results import Failure, Totals

    frame = pl.DataFrame({"a": [1, None], "b": ["x", "y"], "c": [0.1, float("nan")]},
                         schema_overrides={"a": pl.UInt32})  # fmt: skip
    value = {"t": (1, 2.5, None, True), (1, "k"): [Failure("p", "e")], 3: frame,
             "f": (0.1 + 0.2, float("inf"), -0.0, 2**62 + 1),
             "totals": Totals(1, 2, 3, 4, 5, 6, 7, None, 9, 10), "empty": pl.DataFrame()}
    tables: list[bytes] = []
    doc = json.loads(json.dumps(result_cache._encode(value, tables)))
    back = result_cache._decode(doc, [pl.read_ipc_stream(t) for t in tables])
    assert back[3].schema == frame.schema and back[3].equals(frame)
    assert back["empty"].shape == (0, 0)
    assert back["t"] == value["t"] and back[(1, "k")] == value[(1, "k")]
    assert back["totals"] == value["totals"]
    assert [x.hex() if isinstance(x, float) else x for x in back["f"]] == [
        x.hex() if isinstance(x, float) else x for x in value["f"]]  # fmt: skip
    with pytest.raises(TypeError):
        result_cache._encode(object(), [])


def test_only_result_types_are_built_from_an_entry() -> None:
    with pytest.raises(ValueError, match="not a result module"):
        result_cache._decode({"c": "os:system", "v": {}}, [])


# --- the API: served on a repeat, never stale ---------------------------------------------------


def test_detached_repeat_is_served_and_matches(tmp_path: Path, counting: list[int]) -> None:
    first = api.analyze(OFF, scope=STEADY, cache_dir=tmp_path, detached=True)
    again = api.analyze(OFF, scope=STEADY, cache_dir=tmp_path, detached=True)
    assert len(counting) == 1 and again.source is None
    assert render(again, "json") == render(first, "json") == render(api.analyze(OFF, scope=STEADY),
                                                                    "json")  # fmt: skip
    api.compare(OFF, ON, cache_dir=tmp_path, detached=True)
    n = len(counting)
    c = api.compare(OFF, ON, cache_dir=tmp_path, detached=True)
    assert len(counting) == n and render(c, "json") == render(api.compare(OFF, ON), "json")


def test_not_detached_is_never_served_from_the_result_cache(
    tmp_path: Path, counting: list[int]
) -> None:
    """A caller that may draw figures gets the classified source: computed every time."""
    api.analyze(OFF, cache_dir=tmp_path, detached=True)
    a = api.analyze(OFF, cache_dir=tmp_path)
    assert len(counting) == 2 and a.source is not None


def test_scope_and_rules_are_in_the_key(tmp_path: Path, counting: list[int]) -> None:
    from nsysmoe.classify import load_rules

    api.analyze(OFF, scope=STEADY, cache_dir=tmp_path, detached=True)
    api.analyze(OFF, scope=WHOLE, cache_dir=tmp_path, detached=True)
    assert len(counting) == 2
    rules = tmp_path / "rules.toml"
    rules.write_text('version = 1\n[[rule]]\nclass = "gemm"\nsubclass = "x"\npattern = "zzzz"\n')
    a = api.analyze(OFF, scope=WHOLE, rules=load_rules(rules), cache_dir=tmp_path, detached=True)
    _same_size_edit(rules, b'"zzzz"', b'"nccl"')  # in place: same path, size and mtime
    b = api.analyze(OFF, scope=WHOLE, rules=load_rules(rules), cache_dir=tmp_path, detached=True)
    assert len(counting) == 4
    assert render(a, "json") != render(b, "json")


@pytest.mark.parametrize("part", ["source", "version", "format"])
def test_code_version_and_format_are_in_the_key(part: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                counting: list[int]) -> None:  # fmt: skip
    api.analyze(OFF, cache_dir=tmp_path, detached=True)
    api.analyze(OFF, cache_dir=tmp_path, detached=True)
    assert len(counting) == 1
    if part == "source":
        monkeypatch.setattr(result_cache, "source_hash", lambda: "an edited checkout")
    elif part == "version":
        monkeypatch.setattr(result_cache, "__version__", "99.0")
    else:
        monkeypatch.setattr(result_cache, "FORMAT", result_cache.FORMAT + 1)
    api.analyze(OFF, cache_dir=tmp_path, detached=True)
    assert len(counting) == 2


def test_source_hash_sees_an_edit_of_any_package_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "nsysmoe"
    shutil.copytree(fingerprint.PACKAGE, copy, ignore=shutil.ignore_patterns("examples",
                                                                             "__pycache__"))
    monkeypatch.setattr(fingerprint, "PACKAGE", copy)
    seen = set()
    for edit in (None, "measure/overlap.py", "rules/default.toml"):
        if edit:
            with (copy / edit).open("a") as fh:
                fh.write("\n# edited\n")
        fingerprint.source_hash.cache_clear()
        seen.add(fingerprint.source_hash())
    (copy / "notes.txt").write_text("not source")  # neither .py nor .toml: not hashed
    fingerprint.source_hash.cache_clear()
    seen.add(fingerprint.source_hash())
    fingerprint.source_hash.cache_clear()
    assert len(seen) == 3


def test_damaged_entry_is_removed_and_rebuilt(tmp_path: Path, counting: list[int]) -> None:
    want = render(api.analyze(OFF, scope=STEADY), "json")
    counting.clear()
    damages = [lambda e: (e / "tables.arrow").write_bytes(b"garbage"),
               lambda e: (e / "result.json").write_text("{"),
               lambda e: (e / "result.json").write_text('{"tables": [], "result": {"c": "x"}}'),
               lambda e: (e / "tables.arrow").unlink()]  # fmt: skip
    for damage in damages:
        api.analyze(OFF, scope=STEADY, cache_dir=tmp_path, detached=True)
        (entry,) = (tmp_path / "results").iterdir()
        damage(entry)
        got = api.analyze(OFF, scope=STEADY, cache_dir=tmp_path, detached=True)
        assert render(got, "json") == want
        assert (entry / "result.json").is_file()
        api.analyze(OFF, scope=STEADY, cache_dir=tmp_path, detached=True)
        assert len(counting) == 2  # stored, rebuilt, then served
        counting.clear()
        shutil.rmtree(tmp_path / "results")


# --- the CLI: byte-identical repeats, never stale ------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "markdown", "terminal"])
def test_cli_repeat_is_byte_identical(fmt: str, tmp_path: Path) -> None:
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    outs = []
    for i, cache in enumerate(("", "--cache", "--cache")):
        out = tmp_path / f"out{i}"
        proc = run_cli("analyze", str(OFF), *[cache][:bool(cache)], "--format", fmt, "-o",
                       str(out), env=env)  # fmt: skip
        assert proc.stderr == f"wrote {out}\n"
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    assert len(list((tmp_path / "cache" / "results").iterdir())) == 2  # the result, the report


def test_cli_ab_repeat_is_byte_identical(tmp_path: Path) -> None:
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    plain = run_cli("analyze", str(OFF), str(ON), "--format", "json", env=env).stdout
    first = run_cli("analyze", str(OFF), str(ON), "--cache", "--format", "json", env=env).stdout
    again = run_cli("analyze", str(OFF), str(ON), "--cache", "--format", "json", env=env).stdout
    assert plain == first == again


SERVED = ("import sys\nfrom nsysmoe.cli import main\nsys.argv = ['nsysmoe', *sys.argv[1:]]\n"
          "try:\n    main()\nfinally:\n    print('POLARS' if 'polars' in sys.modules else 'LEAN',"
          " file=sys.stderr)\n")  # fmt: skip


def test_cli_repeat_is_served_without_polars(tmp_path: Path) -> None:
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(OFF), "--cache", "--format", "json"]
    cmd = [sys.executable, "-c", SERVED, *args]
    runs = [subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ,
                           **env}) for _ in range(2)]  # fmt: skip
    assert [r.stderr.split()[-1] for r in runs] == ["POLARS", "LEAN"]
    assert runs[0].stdout == runs[1].stdout


def test_cli_sees_a_same_size_same_mtime_edit_of_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_bytes(gzip.decompress(KINETO.read_bytes()))
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(trace), "--whole-trace", "--format", "json"]
    first = run_cli(*args, "--cache", env=env).stdout
    assert run_cli(*args, "--cache", env=env).stdout == first
    # one GEMM kernel 1 ns longer (a digit of its µs duration), same size, mtime put back
    old, new = b'"ts": 5758.656, "dur": 326.863', b'"ts": 5758.656, "dur": 326.864'
    _same_size_edit(trace, old, new)
    edited = run_cli(*args, "--cache", env=env).stdout
    assert edited != first
    assert edited == run_cli(*args, env=env).stdout  # what a fresh run says


def test_cli_sees_the_rules_edited_in_place(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('version = 1\n[[rule]]\nclass = "gemm"\nsubclass = "x"\npattern = "zzzz"\n')
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(OFF), "--rules", str(rules), "--format", "json"]
    first = run_cli(*args, "--cache", env=env).stdout
    assert run_cli(*args, "--cache", env=env).stdout == first
    _same_size_edit(rules, b'"zzzz"', b'"nccl"')
    edited = run_cli(*args, "--cache", env=env).stdout
    assert edited != first and edited == run_cli(*args, env=env).stdout


@pytest.mark.parametrize("option", [["--skip", "1"], ["--whole-trace"], ["--wide"],
                                    ["--labels", "a,b"], ["--format", "markdown"]])
def test_cli_options_are_in_the_key(option: list[str], tmp_path: Path) -> None:
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    base = ["analyze", str(OFF), str(ON), "--cache"]
    run_cli(*base, "--format", "json", env=env)
    fmt = [] if "--format" in option else ["--format", "json"]
    got = run_cli(*base, *option, *fmt, env=env).stdout
    assert got == run_cli(*base[:-1], *option, *fmt, env=env).stdout


def test_cli_terminal_width_is_in_the_key(tmp_path: Path) -> None:
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    wide = run_cli("analyze", str(OFF), "--cache", env={**env, "COLUMNS": "160"}).stdout
    narrow = run_cli("analyze", str(OFF), "--cache", env={**env, "COLUMNS": "60"}).stdout
    assert wide != narrow
    assert narrow == run_cli("analyze", str(OFF), env={**env, "COLUMNS": "60"}).stdout


def test_cli_with_plot_draws_every_figure_on_a_repeat(tmp_path: Path) -> None:
    """Figures need the classified traces: a cached result never stands in for them."""
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    for i in range(2):
        run_cli("analyze", str(OFF), "--cache", "--format", "json", env=env)
        run_cli("analyze", str(OFF), "--cache", "--plot", str(tmp_path / f"f{i}"), "--format",
                "markdown", "-o", str(tmp_path / f"r{i}.md"), env=env)  # fmt: skip
    names = [sorted(p.name for p in (tmp_path / f"f{i}").iterdir()) for i in range(2)]
    assert names[0] == names[1] and any(n.startswith("timeline-") for n in names[0])


def test_cli_unusable_cache_dir_is_a_note_and_the_report_is_whole(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    env = {"NSYSMOE_CACHE_DIR": str(blocker)}
    want = run_cli("analyze", str(OFF), "--format", "json", env=env).stdout
    for _ in range(2):
        proc = run_cli("analyze", str(OFF), "--cache", "--format", "json", env=env)
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"nsysmoe: warning: --cache: {blocker} ")
        assert proc.stdout == want
    assert blocker.read_text() == "not a folder"


def test_cli_damaged_report_entry_is_rebuilt(tmp_path: Path) -> None:
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(OFF), "--cache", "--format", "json"]
    want = run_cli(*args, env=env).stdout
    for entry in (tmp_path / "cache" / "results").iterdir():
        if (entry / "report.txt").is_file():
            (entry / "report.txt").unlink()
            (entry / "report.txt").mkdir()  # unreadable as text
    assert run_cli(*args, env=env).stdout == want
    assert run_cli(*args, env=env).stdout == want


def test_cache_writes_nothing_next_to_the_inputs(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    a, b = shutil.copy(OFF, inputs), shutil.copy(ON, inputs)
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        run_cli("analyze", a, b, "--cache", "--format", "json", env=env)
        run_cli("analyze", str(inputs), "--cache", "--format", "json", "--jobs", "1", env=env)
    assert sorted(p.name for p in inputs.iterdir()) == sorted([OFF.name, ON.name])


def test_cli_repeat_never_writes_over_an_input(tmp_path: Path) -> None:
    """The served path checks ``-o`` like the computed one: a repeat aimed at an input (or the
    rules file, or a folder) is refused, with the input unchanged."""
    trace = Path(shutil.copy(OFF, tmp_path / "t.sqlite"))
    rules = tmp_path / "rules.toml"
    rules.write_text('version = 1\n[[rule]]\nclass = "gemm"\nsubclass = "x"\npattern = "zzzz"\n')
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    base = ["analyze", str(trace), "--cache", "--rules", str(rules), "--format", "json"]
    run_cli(*base, "-o", str(tmp_path / "out.json"), env=env)
    before = trace.read_bytes(), rules.read_bytes()
    for target in (trace, tmp_path / "." / "t.sqlite", rules, tmp_path):
        proc = run_cli(*base, "-o", str(target), env=env, check=False)
        assert proc.returncode == 2 and "-o" in proc.stderr, proc.stderr
    assert (trace.read_bytes(), rules.read_bytes()) == before
