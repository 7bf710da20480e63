"""A run's cache key hashes its own chunk controller's files only (experiments.cache): what makes
that safe is ppsched.dcp's import graph, checked here from the sources."""

import ast
from pathlib import Path

import pytest

import ppsched
from ppsched.experiments.cache import (
    CONTROLLER_FILES,
    code_fingerprint,
    controller_family,
    fingerprint_files,
    run_key,
)
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.workload_spec import WorkloadSpec

ROOT = Path(ppsched.__file__).resolve().parent
FAMILY_OF = {f: name for name, files in CONTROLLER_FILES.items() for f in files}
DISPATCH = {"dcp/registry.py", "dcp/__init__.py"}  # imports every family to build one


def _imports(path: Path) -> set[str]:
    """ppsched files this source imports (``from ppsched.x.y import z`` -> x/y.py)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            if name.startswith("ppsched."):
                rel = Path(*name.split(".")[1:])
                for cand in (rel.with_suffix(".py"), rel / "__init__.py"):
                    if (ROOT / cand).is_file():
                        out.add(cand.as_posix())
    return out


def test_every_listed_file_exists():
    for files in CONTROLLER_FILES.values():
        for f in files:
            assert (ROOT / f).is_file(), f


def test_a_family_imports_no_other_familys_file():
    for f, family in FAMILY_OF.items():
        for dep in _imports(ROOT / f):
            assert FAMILY_OF.get(dep, family) == family, f"{f} ({family}) imports {dep}"


def test_nothing_shared_imports_a_family_file():
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in FAMILY_OF or rel in DISPATCH:
            continue
        hits = _imports(path) & set(FAMILY_OF)
        # the live plugin, CLI and figures reach controllers through the registry; a direct
        # import from a file that every run hashes would let a family edit change other runs
        assert not hits, f"{rel} imports {sorted(hits)}"


@pytest.mark.parametrize("spec,family", [
    ("static:256", "static"), ("greedy", "greedy"), ("greedy-paper", "greedy"),
    ("predictive", "predictive"), ("predictive-paper", "predictive"),
    ("predictive-paper-alp", "predictive"), ("sglang-dynamic", "sglang-dynamic"),
    ("something-new", None), (None, None)])
def test_spec_family(spec, family):
    assert controller_family(spec) == family


def test_a_family_hashes_its_files_and_no_other_familys():
    rel = {name: {p.relative_to(ROOT).as_posix() for p in fingerprint_files(name)}
           for name in CONTROLLER_FILES}
    everything = {p.relative_to(ROOT).as_posix() for p in fingerprint_files(None)}
    for name, files in CONTROLLER_FILES.items():
        assert set(files) <= rel[name]
        assert not (set(FAMILY_OF) - set(files)) & rel[name]
        assert rel[name] == everything - (set(FAMILY_OF) - set(files))
    assert "dcp/signals.py" in rel["static"] and "sim/engine/loop.py" in rel["static"]
    assert len({code_fingerprint(name) for name in CONTROLLER_FILES} | {code_fingerprint()}) == \
        len(CONTROLLER_FILES) + 1


def test_keys_of_different_controllers_use_their_own_fingerprint():
    w = WorkloadSpec("synthetic-decode", rate=2.0, num_requests=40, seed=3).to_dict()
    static, pred = RunConfig(chunk="static:512").to_dict(), RunConfig(chunk="predictive").to_dict()
    assert run_key(static, w) == run_key(static, w, code_fingerprint("static"))
    assert run_key(pred, w) == run_key(pred, w, code_fingerprint("predictive"))
    assert run_key(static, w) != run_key(static, w, code_fingerprint())
