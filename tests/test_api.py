"""The public Python API: what ``ppsched`` exports, that importing it stays light, and that each
wrapper checks its input and returns what its docstring says."""

from __future__ import annotations

import inspect
import os
import pydoc
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import ppsched
from ppsched.core.errors import UserError

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pandas", "matplotlib", "scipy", "torch")
FUNCTIONS = ("load_workload", "simulate", "goodput", "chunk_controller", "decode_trimmer",
             "admission_controller")


def test_import_loads_no_heavy_library():
    code = ("import sys, ppsched; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.strip()
    assert out == "[]"


def test_every_public_name_resolves_and_help_lists_it():
    assert set(FUNCTIONS) <= set(ppsched.__all__)
    for name in ppsched.__all__:
        assert getattr(ppsched, name) is not None, name
    assert set(ppsched.__all__) <= set(dir(ppsched))
    text = pydoc.render_doc(ppsched, renderer=pydoc.plaintext)
    assert f"VERSION\n    {ppsched.__version__}" in text
    for name in set(ppsched.__all__) - {"__version__"}:  # under FUNCTIONS, CLASSES or DATA
        value = getattr(ppsched, name)
        entry = (f"class {name}(" if isinstance(value, type) else
                 f"\n    {name}(" if callable(value) else f"\n    {name} = ")
        assert entry in text, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        ppsched.nothing_here  # noqa: B018 - the lookup is the test


def test_public_functions_are_typed_and_documented():
    for name in FUNCTIONS:
        func = getattr(ppsched, name)
        assert func.__doc__ and len(func.__doc__) > 80, name
        signature = inspect.signature(func)
        assert signature.return_annotation is not inspect.Signature.empty, name
        untyped = [p for p in signature.parameters.values()
                   if p.annotation is inspect.Parameter.empty]
        assert untyped == [], (name, untyped)


def test_simulate_returns_the_summary_and_a_requests_frame():
    workload = ppsched.load_workload("azure-conv", rate=2.0, num_requests=40, seed=0)
    result = ppsched.simulate(ppsched.RunConfig(chunk="static:512"), workload)
    assert isinstance(result, ppsched.SimResult)
    frame = result.requests
    assert isinstance(frame, pd.DataFrame) and len(frame) == 40
    assert frame["id"].tolist() == list(range(40))
    assert result.summary["requests"] == 40
    assert result.summary["completed"] == int((~frame["rejected"]).sum())
    assert frame["ttft_ms"].dropna().gt(0).all()


def test_simulate_refuses_what_is_not_a_config_or_a_workload():
    workload = ppsched.load_workload("azure-conv", rate=2.0, num_requests=5)
    with pytest.raises(UserError, match="expected a ppsched.RunConfig"):
        ppsched.simulate({"chunk": "static:512"}, workload)
    with pytest.raises(UserError, match="expected a ppsched.Workload"):
        ppsched.simulate(ppsched.RunConfig(), "azure-conv")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"workload": "no-such-trace"}, "no-such-trace"),
    ({"workload": 3}, "expected a catalog name"),
    ({"policies": "predictive"}, "expected a non-empty sequence of policy keys"),
    ({"policies": []}, "expected a non-empty sequence of policy keys"),
    ({"policies": ["fastest"]}, "policy 'fastest'"),
    ({"slo_scales": [0.0]}, "expected a non-empty sequence of finite numbers > 0"),
    ({"slo_scales": []}, "expected a non-empty sequence of finite numbers > 0"),
])
def test_goodput_refuses_bad_arguments_before_any_run(kwargs, message, tmp_path):
    args = {"workload": "azure-conv", "policies": ["predictive"], "slo_scales": [1.0], **kwargs}
    with pytest.raises(UserError, match=message):
        ppsched.goodput(args.pop("workload"), cache_dir=tmp_path, **args)
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_controller_factories_build_what_the_spec_names():
    context = ppsched.RunConfig(chunk="predictive", ds="on").policy_context()
    assert isinstance(ppsched.chunk_controller("static:256", context), ppsched.ChunkController)
    assert ppsched.chunk_controller("greedy", context).name == "greedy"
    assert isinstance(ppsched.decode_trimmer("on", context), ppsched.DecodeTrimmer)
    assert ppsched.decode_trimmer("off", context) is None
    assert ppsched.admission_controller("off") is None
    assert ppsched.admission_controller("on", ppsched.AdmissionConfig()) is not None
    with pytest.raises(UserError, match="unknown chunk controller 'fast'"):
        ppsched.chunk_controller("fast", context)
    with pytest.raises(UserError, match="--ds 'maybe'"):
        ppsched.decode_trimmer("maybe", context)
