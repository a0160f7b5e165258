"""Every command the README and docs/ show runs, and every output they show is what it prints.

What counts as a command: each line of a ```bash block (a trailing ``\\`` joins the next line;
``# …`` after it is a comment), and each inline code span (on one line) ``nsysmoe
analyze|kernels|examples|steps …`` or ``nsysmoe --…`` in the text. Each runs once (the same
command on several pages too) in bash, in a fresh folder that holds what the docs' names stand
for (:data:`EXAMPLES`, :data:`SHARED`, :data:`FILES`), with ``nsysmoe`` and ``python`` this
checkout's (``python -m nsysmoe``); a ``python bench/…`` or ``python dev/…`` script is this
checkout's. It must exit 0, or N where its comment says ``exit N``. ``a && b`` runs part by part:
a part that matches :data:`SKIPS` is left out (the README's first command installs, then runs
``nsysmoe analyze $(nsysmoe examples)``: that runs).

What counts as an output: a ```text block right after a ```bash block shows what the block's last
command printed: the same lines (trailing blanks aside) as its stdout, its stderr, or both
(stderr first), where a line ``…`` stands for lines left out — a block starts at the output's first
line unless its first line is ``…``, and ends at the output's last unless its last line is ``…``.

```python blocks run as scripts, in the same kind of folder.

What cannot run here is in :data:`SKIPS`, each with its reason, and shows as a skipped test; a
SKIPS entry no documented command needs fails (no stale skips). Commands on the shared real traces
skip without them, and fail under CI=true (conftest.require_shared).

To see what a command prints here (to paste an output after a change)::

    python -m tests.test_docs 'nsysmoe analyze off.sqlite on.sqlite'
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO, TRACES, require_shared
from tests.fixtures.example_logs import log_lines

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ELIDED = "…"
README_LIMIT = 250  # lines: the README is for a newcomer; the reference is in docs/

#: names the docs use for a user's exports → the shipped example copied there
EXAMPLES = {"run.sqlite": "on", "off.sqlite": "off", "on.sqlite": "on", "off.log": "off.log",
            "on.log": "on.log"}  # fmt: skip
#: names the docs use → the shared real trace (a file, or a folder of rank files) linked there
SHARED = {
    "base.sqlite": "nsys/nersc-ddp-4gpu-baseline.sqlite",
    "cap.sqlite": "nsys/nersc-ddp-4gpu-bucketcap100mb.sqlite",
    "ranks": "nsys/nccl-allreduce-6ranks",
    "off_dir": "kineto/trace-filter-2ranks",
    "on_dir": "kineto/trace-filter-2ranks",
    "dlrm-8ranks": "kineto/dlrm-8ranks",
    "deepseek-v3-rank0.json.gz": "kineto/deepseek-v3-ep64-train/rank0.json.gz",
    "megatron-ci": "logs/megatron-ci",  # Megatron-LM CI's per-step metrics: pairs of runs
}
#: files the docs show being used, with the content the docs show for them
FILES = {
    "my_rules.toml": "[[rule]]\nclass = \"comm\"\nsubclass = \"ep.mine\"\n"
                     "pattern = 'my_ep::(dispatch|combine)_kernel'\n",
    # a third rung after off.log and on.log: overlap and HybridEP tuning (synthetic, like them)
    "tuned.log": "\n".join(log_lines("tuned")) + "\n",
}  # fmt: skip

#: names the docs use for the settings of a sweep → the dispatcher's SMs the fixture generator
#: writes them with (DeepEP, EP overlap on: tests/test_sweep.py), made for a command naming them
GENERATED = {"sms8.sqlite": 8, "sms20.sqlite": 20, "sms48.sqlite": 48}

#: (pattern searched in one part of a command, why that part does not run here)
SKIPS = [
    (r"^python3 -m venv \.venv$", "creates a virtual environment (set-up; CI's fresh clone does)"),
    (r"^\. \.venv/bin/activate$", "activates that environment (set-up)"),
    (r"^pip install ", "installs packages (set-up; no package index from a test)"),
    (r"^ruff check \.$|^lint-imports$|^pytest ", "the test command itself: CI runs it (.ci/run; "
     "test_ci_runs_the_readme_test_command checks the two are the same)"),
    (r"--dask tcp://", "needs a Dask scheduler at that address (--dask local runs)"),
    (r"\.nsys-rep\b", "needs nsys on PATH and a .nsys-rep, neither here; "
     "tests/test_small_things.py runs a .nsys-rep through a stand-in nsys"),
    (r"\bnsys recipe\b", "needs nsys 2023.4 and its recipe framework's Python; "
     "tests/test_recipe.py runs the recipe (get-nsys fetches nsys)"),
    (r"^nsysmoe recipe-path$", "prints where this machine installed nsysmoe (no output to "
     "check); tests/test_recipe.py checks the folder holds the recipe"),
    (r"^python dev/golden\.py ", "runs every report of every shared trace (minutes): a "
     "developer's before/after check of a refactor"),
    (r"^python dev/mutate\.py ", "re-runs a module's tests once per mutant (minutes)"),
    (r"^python bench/run\.py", "the speed benchmark: generates GBs of exports, runs for minutes"),
    (r"^python -m tests\.fixtures\.generate ", "rewrites tests/fixtures/examples_truth/ in the "
     "checkout while other tests read it; tests/test_fixtures.py regenerates the examples and "
     "checks them against the shipped ones"),
]  # fmt: skip
#: the README's Python example is run by tests/test_api.py (test_readme_api_example_runs_as_written)
PYTHON_RUN_ELSEWHERE = {"README.md"}

_FENCE = re.compile(r"^```(\w*)\s*$")
_INLINE = re.compile(r"`(nsysmoe (?:analyze|kernels|examples|steps)\b[^`]+|nsysmoe --[^`]+)`")
_EXIT = re.compile(r"#.*\bexit (\d)\b")


@dataclass
class Command:
    text: str  # as documented, comment removed
    where: list[str] = field(default_factory=list)  # "page:line"
    rc: int = 0
    outputs: list[tuple[str, list[str]]] = field(default_factory=list)  # (where, shown lines)


def _split_comment(line: str) -> tuple[str, str]:
    """A command line and its trailing ``# comment`` (a ``#`` outside quotes, after a space)."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] == " "):
            return line[:i].strip(), line[i:]
    return line.strip(), ""


def blocks(page: Path) -> list[tuple[str, int, list[str]]]:
    """The fenced blocks of ``page``: (language, first line number, lines)."""
    out, lang, start, body = [], None, 0, []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        m = _FENCE.match(line.strip()) if line.lstrip().startswith("```") else None
        if lang is None and m:
            lang, start, body = m.group(1), n + 1, []
        elif lang is not None and line.strip() == "```":
            out.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def documented() -> tuple[dict[str, Command], list[tuple[str, str]]]:
    """Every documented command (by its text) and every Python block (where, code)."""
    commands: dict[str, Command] = {}
    python: list[tuple[str, str]] = []

    def add(text: str, comment: str, where: str) -> Command:
        cmd = commands.setdefault(text, Command(text))
        cmd.where.append(where)
        if m := _EXIT.search(comment):
            cmd.rc = int(m.group(1))
        return cmd

    for page in PAGES:
        name = page.relative_to(REPO).as_posix()
        found = blocks(page)
        last: Command | None = None
        end_of_last = -1
        for lang, start, body in found:
            if lang in ("bash", "sh"):
                last, joined, first = None, "", start
                for n, line in enumerate(body, start):
                    if not joined:
                        first = n
                    if line.rstrip().endswith("\\"):
                        joined += line.rstrip()[:-1] + " "
                        continue
                    text, comment = _split_comment(joined + line)
                    joined = ""
                    if text:
                        last = add(text, comment, f"{name}:{first}")
                end_of_last = start + len(body)
            elif lang == "text" and last is not None and start - end_of_last <= 3:
                last.outputs.append((f"{name}:{start}", body))
                last = None
            elif lang == "python":
                if name not in PYTHON_RUN_ELSEWHERE:
                    python.append((f"{name}:{start}", "\n".join(body) + "\n"))
                last = None
            else:
                last = None
        prose = _without_blocks(page.read_text())
        for n, line in enumerate(prose.splitlines(), 1):
            for m in _INLINE.finditer(line):
                add(m.group(1).strip(), "", f"{name}:{n}")
    return commands, python


def _without_blocks(text: str) -> str:
    """``text`` with every fenced block's lines blanked (line numbers kept)."""
    out, inside = [], False
    for line in text.splitlines():
        fence = line.lstrip().startswith("```")
        out.append("" if inside or fence else line)
        if fence:
            inside = not inside
    return "\n".join(out)


def skip_reason(part: str) -> str | None:
    for pattern, reason in SKIPS:
        if re.search(pattern, part):
            return reason
    return None


def parts(text: str) -> list[str]:
    return [p.strip() for p in text.split(" && ")]


def _needs_shared(text: str) -> bool:
    return any(re.search(rf"(?<![\w./-]){re.escape(n)}(?![\w.-])", text) for n in SHARED)


def workspace(folder: Path, shared: bool) -> None:
    """Fill ``folder`` with what the docs' names stand for."""
    examples = dict(zip(("off", "on", "off.log", "on.log"), _example_paths(), strict=True))
    for name, side in EXAMPLES.items():
        shutil.copyfile(examples[side], folder / name)
    for name, text in FILES.items():
        (folder / name).write_text(text)
    if not shared:
        return
    for name, rel in SHARED.items():
        src = TRACES / rel
        if src.is_dir():  # a folder of rank files, as a user has it: the files linked one by one
            (folder / name).mkdir()
            for f in sorted(src.iterdir()):
                (folder / name / f.name).symlink_to(f)
        else:
            (folder / name).symlink_to(src)


def generate(folder: Path, text: str) -> None:
    """The sweep settings ``text`` names (:data:`GENERATED`), written into ``folder``."""
    from tests.fixtures.generate import write_export
    from tests.fixtures.scenarios import moe_step_scenario

    for name, sms in GENERATED.items():
        if re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w.-])", text):
            spec, _ = moe_step_scenario(dispatcher="deepep", overlap=True, steps=8, seed=7,
                                        dispatcher_sms=sms, label=name.removesuffix(".sqlite"))
            write_export(folder / name, spec, "3.13.2")


def _example_paths() -> list[Path]:
    """The example traces (off, on), then their training logs (off, on)."""
    folder = REPO / "nsysmoe" / "examples"
    return [*sorted(folder.glob("moe-hybridep-overlap-*.sqlite")),
            *sorted(folder.glob("moe-hybridep-overlap-*.log"))]  # fmt: skip


def environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["NSYSMOE_CACHE_DIR"] = str(folder / ".cache")
    env["NSYSMOE_PY"] = sys.executable
    return env


PRELUDE = 'nsysmoe() { "$NSYSMOE_PY" -m nsysmoe "$@"; }; python() { "$NSYSMOE_PY" "$@"; }\n'


def run(text: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """``text`` in bash in ``folder``, its skipped parts left out."""
    runnable = [p for p in parts(text) if skip_reason(p) is None]
    script = " && ".join(re.sub(r"^python (bench|dev)/", rf"python {REPO}/\1/", p)
                         for p in runnable)  # fmt: skip
    return subprocess.run(["bash", "-c", PRELUDE + script], cwd=folder, env=environment(folder),
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def shown_in(shown: list[str], printed: str) -> bool:
    """Whether the output block ``shown`` is what was ``printed`` (see the module docstring)."""
    have = [line.rstrip() for line in printed.rstrip("\n").splitlines()]
    want = [line.rstrip() for line in shown]
    while want and not want[-1]:
        want.pop()
    segments: list[list[str]] = [[]]
    for line in want:
        if line == ELIDED:
            segments.append([])
        else:
            segments[-1].append(line)
    open_start, open_end = want[:1] == [ELIDED], want[-1:] == [ELIDED]
    at = 0
    for i, seg in enumerate(segments):
        if not seg:
            continue
        first, last = i == 0 and not open_start, i == len(segments) - 1 and not open_end
        starts = [at] if first else range(at, len(have) - len(seg) + 1)
        hit = next((s for s in starts if have[s : s + len(seg)] == seg), None)
        if hit is None or (last and hit + len(seg) != len(have)):
            return False
        at = hit + len(seg)
    return True


COMMANDS, PYTHON = documented()


@pytest.mark.parametrize("text", list(COMMANDS), ids=[c.where[0] for c in COMMANDS.values()])
def test_documented_command_runs_and_prints_what_is_shown(text: str, tmp_path: Path) -> None:
    cmd = COMMANDS[text]
    runnable = [p for p in parts(text) if skip_reason(p) is None]
    if not runnable:
        pytest.skip("; ".join(sorted({skip_reason(p) or "" for p in parts(text)})))
    shared = _needs_shared(text)
    if shared:
        require_shared()
    workspace(tmp_path, shared)
    generate(tmp_path, text)
    out = run(text, tmp_path)
    said = f"{text!r} ({', '.join(cmd.where)}) exited {out.returncode}\n{out.stderr[-3000:]}"
    assert out.returncode == cmd.rc, said
    assert "Traceback" not in out.stderr, said
    for where, shown in cmd.outputs:
        printed = (out.stdout, out.stderr, out.stderr + out.stdout)
        assert any(shown_in(shown, p) for p in printed), (
            f"{where}: the output shown is not what {text!r} prints; it prints (stdout):\n"
            f"{out.stdout[:4000]}\n--- stderr:\n{out.stderr[:2000]}"
        )


@pytest.mark.parametrize("code", [c for _, c in PYTHON], ids=[w for w, _ in PYTHON])
def test_documented_python_runs(code: str, tmp_path: Path) -> None:
    workspace(tmp_path, False)
    out = subprocess.run([sys.executable, "-"], input=code, cwd=tmp_path, capture_output=True,
                         text=True, env=environment(tmp_path), timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]


def test_every_skip_is_needed() -> None:
    every = [p for text in COMMANDS for p in parts(text)]
    for pattern, reason in SKIPS:
        assert any(re.search(pattern, p) for p in every), f"no documented command needs: {reason}"


def test_ci_runs_the_readme_test_command() -> None:
    """The README's first two commands are the set-up (install + examples) and the test command,
    and .ci/run runs exactly that test command."""
    readme = [c for c in COMMANDS.values() if c.where[0].startswith("README.md:")]
    install, tests = readme[0].text, readme[1].text
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . &&")
    assert tests.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install ")
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.startswith("python3 -m venv")]  # fmt: skip
    assert ci == [tests]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _without_blocks(page.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def test_links_between_pages_resolve() -> None:
    pages = [*PAGES, REPO / "bench" / "README.md"]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", _without_blocks(page.read_text())):
            if re.match(r"\w+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.relative_to(REPO)}: link to {target} (no such file)"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest), f"{page.relative_to(REPO)}: no #{anchor} in {path}"


def test_every_docs_page_is_linked_and_the_readme_stays_short() -> None:
    index = (REPO / "docs" / "README.md").read_text()
    readme = (REPO / "README.md").read_text()
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not link {page.name}"
            assert f"](docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"
    assert len(readme.splitlines()) <= README_LIMIT


def main(argv: list[str]) -> int:
    """Print what each command given prints in the docs' folder (stderr, then stdout)."""
    import tempfile

    for text in argv:
        with tempfile.TemporaryDirectory() as tmp:
            workspace(Path(tmp), _needs_shared(text) and (TRACES / "nsys").is_dir())
            out = run(text, Path(tmp))
            print(f"$ {text}   (exit {out.returncode})\n{out.stderr}{out.stdout}", end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
