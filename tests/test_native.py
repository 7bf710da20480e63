"""The native build (``make native``, ppsched/native.py): which modules run, and that the compiled
and the pure-Python modules give the same outputs.

``tests/test_sim_golden.py`` checks the modules this process imports against the reference
digests; here the same test runs on the pure-Python modules in a child process, so that a run of
the suite on the native build checks both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ppsched
from ppsched import native

ROOT = Path(__file__).resolve().parents[1]


def _child(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, **env}, check=True)
    return out.stdout.strip()


def test_pure_env_imports_the_sources():
    origin = _child("import ppsched, ppsched.sim.engine.loop as m; "
                    "print(ppsched.NATIVE, m.__file__)", PPSCHED_PURE="1")
    assert origin.split() == ["False", str(ROOT / "ppsched" / "sim" / "engine" / "loop.py")]


def test_a_current_build_runs_compiled():
    if not native.built_modules():
        pytest.skip("no native build here (make native)")
    assert native.stale_sources() == [], "the native build is stale: make native"
    import ppsched.predictor.alp  # noqa: F401
    import ppsched.sim.engine.loop  # noqa: F401

    assert ppsched.NATIVE
    assert native.compiled("ppsched.sim.engine.loop") and native.compiled("ppsched.predictor.alp")
    assert not native.compiled("ppsched.native")  # the gate itself stays Python


def test_stale_sources_name_every_mismatch(tmp_path):
    record = tmp_path / "native_build.json"
    assert native.stale_sources(record) == list(native.MODULES)  # no record: nothing is current
    digests = native.source_digests()
    record.write_text(json.dumps({"sources": digests}))
    assert native.stale_sources(record) == []
    changed = dict(digests, **{native.MODULES[3]: "0" * 64, "ppsched.gone": "1" * 64})
    del changed[native.MODULES[5]]
    record.write_text(json.dumps({"sources": changed}))
    assert native.stale_sources(record) == [native.MODULES[3], native.MODULES[5], "ppsched.gone"]
    record.write_text("{not json")
    assert native.stale_sources(record) == list(native.MODULES)


def test_an_edited_source_runs_as_edited(tmp_path):
    """A build older than its sources is never imported: the child warns and runs pure."""
    if not native.built_modules():
        pytest.skip("no native build here (make native)")
    record = json.loads(native.BUILD_RECORD.read_text())
    record["sources"][native.MODULES[0]] = "0" * 64
    stale = tmp_path / "native_build.json"
    stale.write_text(json.dumps(record))
    code = ("import warnings, ppsched.native as n; n.BUILD_RECORD = n.Path(" + repr(str(stale))
            + "); warnings.simplefilter('error')\n"
            "try:\n    n.select()\nexcept RuntimeWarning as w:\n    print('warned', w)")
    assert "changed since the native build" in _child(code)


def test_the_pure_modules_give_the_reference_digests():
    if not ppsched.NATIVE:
        pytest.skip("this process runs the pure modules: test_sim_golden.py checks them")
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_sim_golden.py::test_outputs_match_the_reference_digest"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, native.PURE_ENV: "1"})
    assert child.returncode == 0, child.stdout[-3000:]
    assert " passed" in child.stdout and "skipped" not in child.stdout
