"""Imports flow one way: no package of kvpool has an import circle among its own modules.

A self-contained checker (``ast`` only, so it runs on a fresh clone): it reads every
``.py`` file of a package folder, resolves ``import kvpool.x.y``, ``from kvpool.x import
y`` and relative imports to files (imports inside functions and under ``TYPE_CHECKING``
included: a circle is one in the design even when it never bites at run time), and
finds the strongly connected groups of two or more modules. The tests below show it
catches a circle, both a made-up one and one seeded into a copy of ``oracle/``.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = "kvpool"
PACKAGES = ("spec", "impl", "oracle", "proofs", "contracts", "mutants")
"""The package folders at the top of the repository (linked into ``kvpool/``)."""


def modules(root: Path, folders: tuple[str, ...]) -> dict[str, Path]:
    """Every module under ``folders`` (of ``root``), by its name under ``kvpool``."""
    out: dict[str, Path] = {}
    for folder in folders:
        for f in sorted((root / folder).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([PKG, *parts])] = f
    return out


def import_graph(files: dict[str, Path]) -> dict[str, dict[str, set[str]]]:
    """module -> {module it imports: the names it takes} (modules of ``files`` only)."""
    edges: dict[str, dict[str, set[str]]] = {m: {} for m in files}
    for mod, f in files.items():
        pkg = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            found: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                found = [(a.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.append((sub if sub in files else base, a.name))
            for target, name in found:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges[mod].setdefault(target, set()).add(name)
    return edges


def circles(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(groups)


def describe(edges: dict[str, dict[str, set[str]]], group: list[str]) -> str:
    lines = [f"circle of {len(group)} modules:"]
    for a in group:
        for b in sorted(set(edges[a]) & set(group)):
            lines.append(f"  {a} -> {b}: {', '.join(sorted(edges[a][b]))}")
    return "\n".join(lines)


def check(root: Path, folders: tuple[str, ...]) -> list[str]:
    edges = import_graph(modules(root, folders))
    return [describe(edges, g) for g in circles(edges)]


@pytest.mark.parametrize("folder", PACKAGES)
def test_no_import_circle_within_a_package(folder: str) -> None:
    found = check(ROOT, (folder,))
    assert not found, "\n".join(found)


def test_no_import_circle_across_the_packages() -> None:
    found = check(ROOT, PACKAGES)
    assert not found, "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_finds_a_two_module_circle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import x\ny = 1\n",
            "pkg/b.py": "x = 1\n\ndef f():\n    from kvpool.pkg.a import y\n    return y\n",
            "pkg/c.py": "from .a import y\n",  # imports into the circle, not part of it
        },
    )
    found = check(tmp_path, ("pkg",))
    assert found == [
        "circle of 2 modules:\n  kvpool.pkg.a -> kvpool.pkg.b: x\n  kvpool.pkg.b -> kvpool.pkg.a: y"
    ]


def test_the_checker_finds_circles_through_every_import_form(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from . import a\n",
            "pkg/a.py": "import kvpool.pkg.sub.b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..c import Thing\n",
            "pkg/c.py": "from kvpool.pkg import a\n",
        },
    )
    found = check(tmp_path, ("pkg",))
    assert len(found) == 1 and found[0].startswith("circle of 3 modules:"), found
    assert "kvpool.pkg.sub.b -> kvpool.pkg.c: Thing" in found[0]


def test_the_checker_passes_a_one_way_package(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import x\nfrom kvpool.pkg import c\n",
            "pkg/b.py": "from .c import z\nx = z\n",
            "pkg/c.py": "import json\nz = 1\n",
        },
    )
    assert check(tmp_path, ("pkg",)) == []


def test_a_circle_seeded_into_the_oracle_is_caught(tmp_path: Path) -> None:
    """The trace format is the oracle's bottom layer: make it import the search."""
    shutil.copytree(ROOT / "oracle", tmp_path / "oracle")
    assert check(tmp_path, ("oracle",)) == []
    fmt = tmp_path / "oracle" / "traceformat.py"
    fmt.write_text(fmt.read_text(encoding="utf-8") + "\nfrom .conformance import conform\n")
    found = check(tmp_path, ("oracle",))
    assert len(found) == 1, found
    assert "kvpool.oracle.traceformat -> kvpool.oracle.conformance: conform" in found[0]
