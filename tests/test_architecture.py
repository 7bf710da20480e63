"""The one rule: policy packages never import an engine (sim, sglang_patch, sglang)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ppsched"
POLICY_PACKAGES = ("dcp", "predictor", "delay_sched", "admission", "core")
ENGINE_PREFIXES = ("ppsched.sim", "ppsched.sglang_patch", "sglang", "torch")


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _policy_files() -> list[Path]:
    return [p for pkg in POLICY_PACKAGES for p in sorted((PACKAGE / pkg).rglob("*.py"))]


def test_policy_packages_exist() -> None:
    assert all((PACKAGE / pkg / "__init__.py").is_file() for pkg in POLICY_PACKAGES)


@pytest.mark.parametrize("path", _policy_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_policy_module_imports_no_engine(path: Path) -> None:
    # torch is allowed only in the optional profiler, imported lazily inside a function.
    allowed_torch = path.name == "collect.py"
    bad = [name for name in _imports(path)
           if name.startswith(ENGINE_PREFIXES) and not (allowed_torch and name == "torch")]
    assert not bad, f"{path} imports engine modules {bad}"
