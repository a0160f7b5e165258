"""Mutation testing for one module: do its tests catch wrong answers, not only wrong shapes?

A developer tool, never run in CI (a run re-runs the tests once per mutant: minutes, not
seconds). Usage, from the repository root with the virtual environment active::

    python dev/mutate.py MODULE.py TEST_PATH [TEST_PATH ...] [--timeout S] [--list-survivors]
    python dev/mutate.py nsysmoe/ab/verdict.py tests/ab/test_verdict.py tests/ab/test_compare.py

The per-module commands the project measures (each module against its own unit tests)::

    python dev/mutate.py nsysmoe/intervals.py tests/test_intervals.py tests/test_intervals_edges.py
    python dev/mutate.py nsysmoe/measure/projection.py tests/measure/test_projection.py \\
        tests/measure/test_projection_edges.py
    python dev/mutate.py nsysmoe/measure/overlap.py tests/measure/test_overlap.py
    python dev/mutate.py nsysmoe/ab/verdict.py tests/ab/test_verdict.py tests/ab/test_compare.py
    python dev/mutate.py nsysmoe/model.py tests/measure/test_overlap.py --only-lines 106-146

(the last one: only ``Window`` and the int64 bounds, lines 106-146 today). A TEST_PATH may be a
pytest node id (``tests/test_pipeline.py::test_moe_scenarios``) to leave a failing test out.

How it works: the module is parsed with :mod:`ast` and one mutant is made per site, each a single
change of the source text (so line numbers and comments stay put):

* comparisons: ``<`` → ``<=`` / ``>``, ``<=`` → ``<`` / ``>=``, ``>`` → ``>=`` / ``<``,
  ``>=`` → ``>`` / ``<=``, ``==`` ↔ ``!=``, ``is`` ↔ ``is not``, ``in`` ↔ ``not in``
* arithmetic: ``+`` ↔ ``-``, ``*`` ↔ ``/``, ``//`` → ``/``, ``%`` → ``*``, ``**`` → ``*``, and the
  same in augmented assignments; bitwise ``&`` ↔ ``|``, ``^`` → ``|``, ``<<`` ↔ ``>>``
* boolean: ``and`` ↔ ``or``; ``not``, unary ``-`` and ``~`` removed
* constants: an int ``n`` → ``n + 1`` (so 0 → 1), a float ``x`` → ``x + 1``, ``True`` ↔ ``False``
* strings used as values (compared, returned, assigned, the two branches of ``a if c else b``
  — swapped —, or passed to a constructor): → ``""`` (``""`` → ``"x"``)

Docstrings, type annotations, f-strings and exception messages are left alone, and so is every
line carrying ``# pragma: no mutate`` (for a justified equivalent mutant) or named in
``--skip-lines``. Known equivalent mutants of the measured modules are listed in ``EQUIVALENT``
below with a one-line reason; they are still run, and the summary gives the score both over all
mutants and over the non-equivalent ones.

Safety: the working tree is never mutated. The repository's files (``git ls-files``, tracked and
untracked-but-not-ignored) are copied to a temporary directory, the mutant is written there and
the tests run there (cwd and ``PYTHONPATH`` = the copy, which is checked to be what
``import nsysmoe`` loads, ahead of the editable install), so concurrent test runs in the checkout
never see a mutant. The copy's module is restored after every mutant in a ``finally`` (Ctrl-C
too) and, at the end, both it and the checkout's module are checked against their checksums.

Each mutant runs ``python -m pytest -x -q -p no:cacheprovider TEST_PATHS`` with a fixed
Hypothesis seed, no bytecode cache (so a same-size mutant can never reuse a stale .pyc) and a
timeout (default 120 s; a timeout counts as killed). The unmutated module must pass first.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRAGMA = "# pragma: no mutate"

#: Known equivalent mutants (they cannot change any result): module → {(text of the source line
#: or a part of it that tells it apart, "orig → mutant" as --list prints it): why}. Keyed by text,
#: not line number, so edits elsewhere keep entries valid; an entry whose line changed stops
#: matching, and its mutant counts as an ordinary survivor again.
EQUIVALENT: dict[str, dict[tuple[str, str], str]] = {
    "nsysmoe/intervals.py": {
        (
            "@dataclass(frozen=True, eq=False)",
            "False → True",
        ): "the class defines __eq__ and __hash__ itself; dataclass keeps both either way",
        (
            "return arr.astype(np.int64, copy=False)",
            "False → True",
        ): "only one more copy: callers sort/mask the result or _frozen copies it anyway",
        (
            "starts.setflags(write=False)",
            "False → True",
        ): "__post_init__ then copies the writable array and freezes the copy: same values",
        (
            "ends.setflags(write=False)",
            "False → True",
        ): "__post_init__ then copies the writable array and freezes the copy: same values",
        (
            "last[-1:] = True",
            "- → ∅",
        ): "last[1:] = True: np.not_equal overwrites last[:-1] on the next line",
        (
            "last[-1:] = True",
            "1 → 2",
        ): "last[-2:] = True: np.not_equal overwrites last[:-1] on the next line",
        (
            "if points.size == 0:",
            "0 → 1",
        ): "points.size is never 1, and with 0 points the general path also gives the empty set",
        (
            "return df.select(by).with_columns(union_ns=pl.lit(0, pl.Int64)).clear()",
            "0 → 1",
        ): "the frame is cleared: the literal only sets the column's type",
    },
    "nsysmoe/measure/projection.py": {
        (
            'comm = (pl.col("class") == COMM) if "class" in kernels.columns else pl.lit(False)',
            "False → True",
        ): "without a class column no comm_ns/compute_ns/hidden_ns is made: the flag is unread",
        (
            'memops.select(*cols, pl.lit(False).alias("is_kernel"), pl.lit(False).alias("comm")),',
            "False → True #2",
        ): "comm_ns/compute_ns take kernels only (is_kernel & comm): a memop's flag is unread",
        (
            "return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s",
            "- → ∅",
        ): "duplicate ends stay; searchsorted (left) still gives order-preserving ranks that "
        "index back to the same end",
        (
            'return calls.unique(maintain_order=True).with_row_index("call_id")',
            "True → False",
        ): "call_id is only a join key: no output depends on how calls are numbered",
        (
            "rank = np.unique(times, return_inverse=True)[1].astype(np.int64).reshape(-1)",
            "1 → 2 #2",
        ): "reshape(-2): numpy reads any negative size as 'infer', the same 1-D array",
        (
            '.rank("dense").cast(pl.Int64).to_numpy() << 32',
            "32 → 33",
        ): "the thread only has to sit above the rank bits (< 2**32); bit 33 does too",
        (
            "@dataclass(frozen=True)",
            "True → False",
        ): "_GroupedOps is internal, never assigned to or hashed",
        ("new[:1] = True", "1 → 2"): "np.not_equal overwrites new[1:] on the next line",
        (
            "group = np.cumsum(new, dtype=np.int64) - 1",
            "- → +",
        ): "group numbers are only compared with each other; starting at 2, not 0, changes none",
        (
            "reach = np.maximum.accumulate(np.where(mask, self.end_key, -1))",
            "1 → 2",
        ): "masked-out rows only need a negative key (prev >= 0 rejects -1 and -2 alike)",
        (
            "prev = np.concatenate(([-1], reach[:-1]))",
            "1 → 2",
        ): "the first row's previous reach only needs to be negative (prev >= 0 rejects it)",
    },
    "nsysmoe/ab/verdict.py": {
        (
            'good = change < 0 if row.better == "lower" else change > 0',
            "< → <=",
        ): "reached only when |change| > floor >= 0 (a floor is >= MIN_NOISE): change != 0",
        (
            'good = change < 0 if row.better == "lower" else change > 0',
            "> → >=",
        ): "reached only when |change| > floor >= 0 (a floor is >= MIN_NOISE): change != 0",
    },
}

_BINOPS: dict[type[ast.operator], tuple[str, tuple[str, ...]]] = {
    ast.Add: ("+", ("-",)),
    ast.Sub: ("-", ("+",)),
    ast.Mult: ("*", ("/",)),
    ast.Div: ("/", ("*",)),
    ast.FloorDiv: ("//", ("/",)),
    ast.Mod: ("%", ("*",)),
    ast.Pow: ("**", ("*",)),
    ast.BitAnd: ("&", ("|",)),
    ast.BitOr: ("|", ("&",)),
    ast.BitXor: ("^", ("|",)),
    ast.LShift: ("<<", (">>",)),
    ast.RShift: (">>", ("<<",)),
}
_CMPOPS: dict[type[ast.cmpop], tuple[str, tuple[str, ...]]] = {
    ast.Lt: ("<", ("<=", ">")),
    ast.LtE: ("<=", ("<", ">=")),
    ast.Gt: (">", (">=", "<")),
    ast.GtE: (">=", (">", "<=")),
    ast.Eq: ("==", ("!=",)),
    ast.NotEq: ("!=", ("==",)),
    ast.Is: ("is", ("is not",)),
    ast.IsNot: ("is not", ("is",)),
    ast.In: ("in", ("not in",)),
    ast.NotIn: ("not in", ("in",)),
}
_UNARY = {ast.Not: "not", ast.USub: "-", ast.Invert: "~"}


@dataclass(frozen=True)
class Mutant:
    line: int
    col: int
    edits: tuple[tuple[int, int, str], ...]  # (start, end, replacement) char offsets
    what: str  # "orig → mutant", with " #2" for the second identical change on its line

    def apply(self, src: str) -> str:
        for start, end, text in sorted(self.edits, reverse=True):
            src = src[:start] + text + src[end:]
        return src


class _Source:
    """Offsets and tokens of a module's text (ast columns are UTF-8 bytes, tokens characters)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.lines = src.splitlines(keepends=True)
        self.line_start = [0]
        for line in self.lines:
            self.line_start.append(self.line_start[-1] + len(line))
        self.tokens: list[tuple[int, int, str]] = []
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type in (tokenize.OP, tokenize.NAME):
                self.tokens.append((self._at(*tok.start), self._at(*tok.end), tok.string))

    def _at(self, row: int, col: int) -> int:
        return self.line_start[row - 1] + col

    def offset(self, lineno: int, byte_col: int) -> int:
        line = self.lines[lineno - 1]
        return self._at(lineno, len(line.encode()[:byte_col].decode()))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def token(self, lo: int, hi: int, text: str) -> tuple[int, int] | None:
        """Span of the first token(s) spelling ``text`` (one or two words) within [lo, hi)."""
        words = text.split()
        for i, (s, e, t) in enumerate(self.tokens):
            if s >= lo and e <= hi and t == words[0]:
                if len(words) == 1:
                    return s, e
                nxt = self.tokens[i + 1]
                if nxt[2] == words[1]:
                    return s, nxt[1]
        return None


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: annotations, docstrings, f-strings, exception messages."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots += [a.annotation for a in _all_args(node.args) if a.annotation is not None]
            if node.returns is not None:
                roots.append(node.returns)
        if isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        if isinstance(node, ast.JoinedStr):
            roots.append(node)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                roots.append(body[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id.endswith(("Error", "Exception", "Warning")) or node.func.id in (
                "TypeVar",
                "print",
            ):
                roots += node.args
    return {id(n) for root in roots for n in ast.walk(root)}


def _all_args(a: ast.arguments) -> list[ast.arg]:
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]


def _string_used_as_value(node: ast.Constant, parent: ast.AST | None) -> bool:
    if isinstance(parent, ast.Compare | ast.Return):
        return True
    if isinstance(parent, ast.Assign | ast.AnnAssign) and parent.value is node:
        return True
    if isinstance(parent, ast.IfExp) and node is not parent.test:
        return True
    return (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id[:1].isupper()
        and node in parent.args
    )


def mutants(src: str, skip_lines: set[int] = frozenset()) -> Iterator[Mutant]:  # type: ignore[assignment]
    """Every single-change mutant of ``src`` that still parses, in source order."""
    tree = ast.parse(src)
    text = _Source(src)
    skipped = _skipped_nodes(tree)
    parent: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
    found: list[Mutant] = []

    def add(span: tuple[int, int] | None, orig: str, new: str, node: ast.AST) -> None:
        if span is not None:
            found.append(Mutant(node.lineno, node.col_offset, ((*span, new),), f"{orig} → {new}"))  # type: ignore[attr-defined]

    swapped_ifexp: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            sym, news = _BINOPS[type(node.op)]
            span = text.token(text.end(node.left), text.start(node.right), sym)
            for new in news:
                add(span, sym, new, node)
        elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOPS:
            sym, news = _BINOPS[type(node.op)]
            span = text.token(text.end(node.target), text.start(node.value), sym + "=")
            for new in news:
                add(span, sym + "=", new + "=", node)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                sym, news = _CMPOPS[type(op)]
                span = text.token(text.end(operands[i]), text.start(operands[i + 1]), sym)
                for new in news:
                    add(span, sym, new, node)
        elif isinstance(node, ast.BoolOp):
            sym = "and" if isinstance(node.op, ast.And) else "or"
            new = "or" if sym == "and" else "and"
            for a, b in zip(node.values, node.values[1:], strict=False):
                add(text.token(text.end(a), text.start(b), sym), sym, new, node)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            sym = _UNARY[type(node.op)]
            span = text.token(text.start(node), text.start(node.operand), sym)
            if span is not None:
                found.append(Mutant(node.lineno, node.col_offset, ((*span, ""),), f"{sym} → ∅"))
        elif isinstance(node, ast.IfExp) and all(
            isinstance(b, ast.Constant) and isinstance(b.value, str)
            for b in (node.body, node.orelse)
        ):
            body, orelse = node.body, node.orelse
            assert isinstance(body, ast.Constant) and isinstance(orelse, ast.Constant)
            swapped_ifexp |= {id(body), id(orelse)}
            edits = (
                (text.start(body), text.end(body), repr(orelse.value)),
                (text.start(orelse), text.end(orelse), repr(body.value)),
            )
            what = f"{body.value!r} if … else {orelse.value!r} → swapped"
            found.append(Mutant(node.lineno, node.col_offset, edits, what))
        elif isinstance(node, ast.Constant) and id(node) not in swapped_ifexp:
            v, span = node.value, (text.start(node), text.end(node))
            orig = src[span[0] : span[1]]
            if isinstance(v, bool):
                add(span, orig, repr(not v), node)
            elif isinstance(v, int):
                add(span, orig, repr(v + 1), node)
            elif isinstance(v, float):
                add(span, orig, repr(v + 1.0), node)
            elif isinstance(v, str) and _string_used_as_value(node, parent.get(id(node))):
                add(span, orig, repr("x" if v == "" else ""), node)

    seen: dict[tuple[int, str], int] = {}
    for m in sorted(found, key=lambda m: (m.line, m.col, m.edits)):
        n = seen[m.line, m.what] = seen.get((m.line, m.what), 0) + 1
        if n > 1:  # the same change twice on a line: "1 → 2 #2" names the second one
            m = replace(m, what=f"{m.what} #{n}")
        line = text.lines[m.line - 1]
        if m.line in skip_lines or PRAGMA in line:
            continue
        try:
            ast.parse(m.apply(src))
        except SyntaxError:
            continue
        yield m


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy_repo(dest: Path) -> None:
    """Tracked and untracked-but-not-ignored files of the checkout (read-only git query)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "-co", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout.decode()  # fmt: skip
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:  # not a git checkout: copy the tree minus the usual clutter
        ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".hypothesis", "*.pyc")
        shutil.copytree(ROOT, dest, ignore=ignore, dirs_exist_ok=True)
        return
    for rel in files:
        src = ROOT / rel
        if src.is_file():  # listed files deleted from the working tree are skipped
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[str, str]:
    """("pass" | "fail" | "timeout", output tail); the test process group is always ended."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", ""
    finally:
        if proc.poll() is None:  # Ctrl-C or any error while waiting
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return ("pass" if proc.returncode == 0 else "fail"), out.decode(errors="replace")[-3000:]


def _line_set(text: str) -> set[int]:
    """ "12,40-45" → {12, 40, 41, 42, 43, 44, 45}."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="module to mutate, e.g. nsysmoe/intervals.py")
    ap.add_argument("tests", nargs="+", help="test files, directories or node ids to run")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant (killed)")
    ap.add_argument(
        "--list-survivors",
        action="store_true",
        help="also list the known-equivalent survivors, with their reasons",
    )
    ap.add_argument("--skip-lines", default="", help="lines to leave out, e.g. 12,40-45")
    ap.add_argument("--only-lines", default="", help="mutate only these lines, e.g. 106-146")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = ap.parse_args(argv)

    module = Path(args.module).resolve()
    try:
        rel = module.relative_to(ROOT).as_posix()
    except ValueError:
        ap.error(f"{args.module} is not inside {ROOT}")
    src = module.read_text()
    skip, only = _line_set(args.skip_lines), _line_set(args.only_lines)
    todo = [m for m in mutants(src, skip) if not only or m.line in only]
    lines = src.splitlines()
    equivalent = EQUIVALENT.get(rel, {})

    def describe(m: Mutant) -> str:
        return f"L{m.line}: {m.what:<28} | {lines[m.line - 1].strip()}"

    if args.list:
        for m in todo:
            print(describe(m))
        print(f"{len(todo)} mutants")
        return 0

    original_sha = _sha(module)
    tmp = Path(tempfile.mkdtemp(prefix="nsysmoe-mutate-"))
    copy = tmp / "repo"
    copy.mkdir()
    target = copy / rel
    survivors: list[Mutant] = []
    counts = {"killed": 0, "timeout": 0, "survived": 0}
    try:
        _copy_repo(copy)
        for t in args.tests:  # a path, or a pytest node id (path::test) to run part of a file
            if not (copy / t.split("::")[0]).exists():
                ap.error(f"test path {t} is not in the copied checkout")
        env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
        env.setdefault("NSYSMOE_SHARED", str(ROOT.parent / "shared"))  # tests find real traces
        probe = subprocess.run(
            [sys.executable, "-c", "import nsysmoe; print(nsysmoe.__file__)"],
            cwd=copy, env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        if not Path(probe).resolve().is_relative_to(copy.resolve()):
            print(f"abort: the copy's `import nsysmoe` loads {probe}", file=sys.stderr)
            return 2
        print(f"copy: {copy} (import nsysmoe → {probe})", file=sys.stderr)

        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        if importlib.util.find_spec("hypothesis") is not None:
            cmd.append("--hypothesis-seed=0")
        cmd += args.tests
        t0 = time.monotonic()
        status, out = _run(cmd, copy, env, max(args.timeout, 600.0))
        if status != "pass":
            print(out, file=sys.stderr)
            print("abort: the tests fail on the unmutated module", file=sys.stderr)
            return 2
        print(f"baseline passes in {time.monotonic() - t0:.1f}s; {len(todo)} mutants of {rel}",
              file=sys.stderr)  # fmt: skip

        backup = target.read_bytes()
        for i, m in enumerate(todo, 1):
            try:
                target.write_text(m.apply(src))
                status, _ = _run(cmd, copy, env, args.timeout)
            finally:
                target.write_bytes(backup)
            result = {"pass": "survived", "fail": "killed", "timeout": "timeout"}[status]
            counts[result] += 1
            print(f"[{i}/{len(todo)}] {result:<8} {describe(m)}", file=sys.stderr, flush=True)
            if result == "survived":
                survivors.append(m)
    finally:
        restored = target.exists() and _sha(target) == original_sha
        shutil.rmtree(tmp, ignore_errors=True)
        untouched = _sha(module) == original_sha
        print(f"checksums: copy's {rel} restored: {restored}; checkout's {rel} unchanged: "
              f"{untouched}", file=sys.stderr)  # fmt: skip

    def why_equivalent(m: Mutant) -> str | None:
        line = lines[m.line - 1]
        return next((why for (t, w), why in equivalent.items() if w == m.what and t in line), None)

    known = [m for m in survivors if why_equivalent(m) is not None]
    real = [m for m in survivors if m not in known]
    print(f"\nsurvivors of {rel} ({len(real)} not known to be equivalent):")
    for m in real:
        print("  " + describe(m))
    if args.list_survivors and known:
        print(f"known equivalent ({len(known)}):")
        for m in known:
            print(f"  {describe(m)}\n      {why_equivalent(m)}")
    total, killed = len(todo), counts["killed"] + counts["timeout"]
    scored = total - len(known)
    print(
        f"summary {rel}: total {total}, killed {killed} (timeouts {counts['timeout']}), "
        f"survived {len(survivors)} (known equivalent {len(known)}); "
        f"score {100.0 * killed / max(total, 1):.1f}%, "
        f"non-equivalent {100.0 * killed / max(scored, 1):.1f}%"
    )
    return 0 if restored and untouched else 3


if __name__ == "__main__":
    sys.exit(main())
