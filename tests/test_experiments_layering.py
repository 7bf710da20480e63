"""experiments/ is a library: it never imports the CLI, and its modules import each other in one
direction only (no cycles), so the CLI (cli/cmd_experiments, cli/cmd_paper) calls into it."""

from __future__ import annotations

import ast
from pathlib import Path

import ppsched.experiments

ROOT = Path(ppsched.experiments.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_experiments_never_import_the_cli():
    offenders = {p.name: sorted(m for m in _imports(p) if m.startswith("ppsched.cli"))
                 for p in ROOT.glob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_import_cycles_inside_experiments():
    graph = {p.stem: {m.rsplit(".", 1)[1] for m in _imports(p)
                      if m.startswith("ppsched.experiments.")} for p in ROOT.glob("*.py")}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})):
                return True
        return False

    cycles = [m for m in graph if reaches(m, m, {m})]
    assert cycles == []
