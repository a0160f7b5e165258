"""Summarise the package's import graph: modules, imports, and every import cycle.

``python dev/import_graph.py [PACKAGE_DIR]`` (default: this checkout's ``nsysmoe``). Lazy imports
inside functions count: they hide a cycle from Python, not from the reader. The layer contract
itself is ``lint-imports`` (pyproject's ``[tool.importlinter]``); this is for the numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp


def strongly_connected(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Tarjan's algorithm over module-level imports; components of two or more are cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v) & modules:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for m in sorted(modules):
        if m not in index:
            visit(m)
    return out


def main() -> int:
    pkg = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "nsysmoe")
    sys.path.insert(0, str(pkg.resolve().parent))
    graph = grimp.build_graph(pkg.name, cache_dir=None)
    modules = {m for m in graph.modules if m != pkg.name}  # the root re-exports the API
    imports = sum(len(graph.find_modules_directly_imported_by(m) & modules) for m in modules)
    cycles = strongly_connected(graph, modules)
    print(f"{len(modules)} modules, {imports} internal imports, {len(cycles)} import cycle(s)")
    for comp in cycles:
        print(f"  cycle of {len(comp)}: {', '.join(comp)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
