"""In the real SGLang venv (no server): the entry point loads, a bad PPSCHED_* value makes the
plugin refuse (one clear line, no hook registered: SGLang stays stock), a good one registers.

One interpreter runs every case (importing sglang costs seconds): each case resets the
HookRegistry, sets the environment and calls the entry point's function.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from ppsched.sglang_patch.cpu_server import sglang_python

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None, reason="SGLang CPU venv absent: run "
                                 "scripts/setup_sglang_cpu.sh")]

BAD = [
    ({"PPSCHED_DS": "sometimes"}, "PPSCHED_DS='sometimes'"),
    ({"PPSCHED_CHUNK": "static:64", "PPSCHED_SLO_TPOT_MS": "-1"}, "PPSCHED_SLO_TPOT_MS"),
    ({"PPSCHED_CHUNK": "static:64", "PPSCHED_CANDIDATES": "a,b"}, "PPSCHED_CANDIDATES"),
    ({"PPSCHED_SLO_TTFT_MS": "100"}, "nothing to enable"),
]
GOOD = {"PPSCHED_CHUNK": "static:64", "PPSCHED_DS": "on"}
OTHER_VERSION = {**GOOD, "_FAKE_SGLANG_VERSION": "0.5.99"}

PROBE = r"""
import io, json, logging, os, sys
from importlib.metadata import entry_points
from sglang.srt.plugins.hook_registry import HookRegistry
buf = io.StringIO()
logging.basicConfig(level=logging.INFO, stream=buf)
cases = json.loads(sys.argv[1])
eps = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "ppsched"]
load = eps[0].load()  # the entry point resolves to our function
out = {"entry_point": eps[0].value, "cases": []}
import ppsched.sglang_patch.version_guard as guard
real_version = guard.installed_version
for env in cases:
    for k in [k for k in os.environ if k.startswith("PPSCHED_")]:
        del os.environ[k]
    env = dict(env)
    fake = env.pop("_FAKE_SGLANG_VERSION", None)  # the guard's off path on the real install
    guard.installed_version = (lambda: fake) if fake else real_version
    os.environ.update(env)
    HookRegistry.reset()
    buf.seek(0); buf.truncate()
    load()
    out["cases"].append({"hooks": sorted(HookRegistry._hooks), "log": buf.getvalue()})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def probed():
    cases = [env for env, _ in BAD] + [{}, GOOD, OTHER_VERSION,
                                        {**OTHER_VERSION, "PPSCHED_FORCE": "1"}]
    done = subprocess.run([str(PY), "-c", PROBE, json.dumps(cases)], capture_output=True,
                          text=True, cwd="/", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_entry_point_is_ours(probed):
    assert probed["entry_point"] == "ppsched.sglang_patch.plugin:load"


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_env_refuses_and_registers_nothing(probed, i):
    case = probed["cases"][i]
    assert case["hooks"] == []
    assert "plugin refuses to enable" in case["log"] and BAD[i][1] in case["log"]
    assert "WARNING" in case["log"]


def test_unconfigured_registers_nothing_and_configured_registers_hooks(probed):
    off, on = probed["cases"][len(BAD)], probed["cases"][len(BAD) + 1]
    assert off["hooks"] == [] and "not configured" in off["log"]
    assert any(h.endswith("Scheduler.get_new_batch_prefill") for h in on["hooks"])
    assert any(h.endswith("Scheduler.update_running_batch") for h in on["hooks"])
    assert any(h.endswith("SchedulerRequestReceiver._pull_raw_reqs") for h in on["hooks"])


def test_hooked_functions_have_the_expected_shapes_on_the_real_install(probed):
    """The guard passes on the installed SGLang: its EXPECTED signatures are the real ones."""
    on = probed["cases"][len(BAD) + 1]
    assert "plugin OFF" not in on["log"] and "hooks registered" in on["log"]


def test_version_guard_off_path_registers_only_the_reporting_hook(probed):
    off = probed["cases"][len(BAD) + 2]
    assert [h.rsplit(".", 1)[1] for h in off["hooks"]] == ["init_request_dispatcher"]
    lines = [line for line in off["log"].splitlines() if "plugin OFF" in line]
    assert len(lines) == 1 and "WARNING" in lines[0]
    assert "sglang 0.5.99" in lines[0] and "PPSCHED_FORCE=1" in lines[0]


def test_force_hooks_a_different_version_loudly(probed):
    forced = probed["cases"][len(BAD) + 3]
    assert any(h.endswith("Scheduler.update_running_batch") for h in forced["hooks"])
    assert "PPSCHED_FORCE=1: hooking an SGLang that differs" in forced["log"]
