"""The README's CPU recipe, run as written: ``ppsched serve`` on the CPU build of SGLang, then
``ppsched run`` and SGLang's own ``bench_serving`` against it. Every request must complete with
its exact length (the replay caps requests at what the server serves in full).

The commands are the README's, word for word, in README_CPU_RECIPE. The test changes only what a
shared test machine needs: files go to a temporary folder instead of /tmp, the server listens on
a free port instead of 30000, the SGLang python is the one the live tests use
(PPSCHED_SGLANG_VENV honoured), the hub is offline (no network at test time), and bench_serving
runs in the temporary folder (it writes its result file where it runs). The setup line
(``bash scripts/setup_sglang_cpu.sh``) is what ``make test`` runs before the live tests; without
its venv this test is skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ppsched.policy_config import PolicyConfig
from ppsched.sglang_patch.cpu_server import REPO, Server, free_port, sglang_python

# The README's "On the CPU" block, one entry per command (setup line left out, see above).
README_CPU_RECIPE = (
    "PY=~/.cache/ppsched/sglang-venv/bin/python",
    "$PY scripts/make_tiny_qwen2.py /tmp/tiny && $PY scripts/make_offline_tokenizer.py "
    "/tmp/tiny-tok",
    """SGLANG_USE_CPU_ENGINE=1 SGLANG_CPU_OMP_THREADS_BIND='0|1' OMP_NUM_THREADS=1 \\
ppsched serve --python $PY --chunk predictive --ds on --candidates 32,64,128 --boundary-unit 4 \\
    --decision-log /tmp/ppsched.jsonl -- \\
    --model-path /tmp/tiny --tokenizer-path /tmp/tiny-tok --device cpu --pp-size 2 \\
    --attention-backend torch_native \\
    --sampling-backend pytorch --max-total-tokens 8192 --context-length 1024 \\
    --max-running-requests 16 --cuda-graph-backend-decode disabled \\
    --cuda-graph-backend-prefill disabled --enable-metrics --host 127.0.0.1 --port 30000""",
    """ppsched run --engine http://127.0.0.1:30000 --workload sharegpt --rate 2 --num-requests 40 \\
    --out /tmp/live""",
    """$PY -m sglang.bench_serving --backend sglang --port 30000 --dataset-name random-ids \\
    --tokenizer /tmp/tiny-tok --num-prompts 40 --random-input-len 200 --random-output-len 16""",
)
SET_PY, MAKE_MODEL, SERVE, REPLAY, BENCH = README_CPU_RECIPE
README_PY = "~/.cache/ppsched/sglang-venv/bin/python"

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None or os.environ.get("PPSCHED_LIVE_GPU") == "1",
                                 reason="needs the SGLang CPU venv (scripts/setup_sglang_cpu.sh)")]


def _requests(command: str, flag: str) -> int:
    return int(re.search(rf"{flag} (\d+)", command).group(1))


def _for_this_machine(command: str, tmp: Path, port: int) -> str:
    """The README command with the test machine's paths and port (nothing else changes)."""
    out = command.replace(README_PY, str(PY)).replace("/tmp/", f"{tmp}/")
    return out.replace("30000", str(port))


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme-cpu")
    port = free_port(33000, 33999)
    steps = [_for_this_machine(c, tmp, port) for c in README_CPU_RECIPE]
    set_py, make_model, serve, replay, bench = steps
    # `ppsched` as installed beside this python; the hub offline (no network in tests)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           **{k: "" for k in os.environ if k.startswith("PPSCHED_") and k != "PPSCHED_SGLANG_VENV"
              and k != "PPSCHED_SGLANG_PYTHON"}}

    def shell(command: str, timeout_s: float, cwd: Path = REPO) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f"{set_py}\n{command}"], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout_s)

    made = shell(make_model, 300)
    assert made.returncode == 0, made.stderr[-3000:]
    log_path = tmp / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen(["bash", "-c", f"{set_py}\n{serve}"], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(proc, port, log_path, log)
    try:
        deadline = time.monotonic() + 300
        while not server.healthy():
            assert proc.poll() is None, f"server exited {proc.returncode}: " \
                                        f"{server.log_text()[-4000:]}"
            assert time.monotonic() < deadline, f"server not healthy: {server.log_text()[-4000:]}"
            time.sleep(1.0)
        ran = shell(replay, 900)
        benched = shell(bench, 600, cwd=tmp)  # it writes sglang_*.jsonl where it runs
    finally:
        server.stop()
    return {"ran": ran, "benched": benched, "out": tmp / "live",
            "decisions": tmp / "ppsched.jsonl"}


def test_replay_completes_every_request(recipe):
    ran = recipe["ran"]
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    summary = json.loads((recipe["out"] / "summary.json").read_text())
    asked = _requests(REPLAY, "--num-requests")
    assert summary["live_failed"] == 0, summary["live_failures"]
    assert summary["completed"] == asked
    # the caps are the server's published limits of --context-length 1024
    assert (summary["live_max_context"], summary["live_max_prompt"]) == (1022, 1017)


def test_bench_serving_completes_every_request(recipe):
    benched = recipe["benched"]
    assert benched.returncode == 0, benched.stdout[-3000:] + benched.stderr[-3000:]
    done = re.search(r"^Successful requests:\s+(\d+)", benched.stdout, re.M)
    assert done is not None, benched.stdout[-3000:]
    assert int(done.group(1)) == _requests(BENCH, "--num-prompts")


def test_the_plugin_served_the_recipe(recipe):
    records = [json.loads(line) for line in recipe["decisions"].read_text().splitlines()
               if line.strip()]
    kinds = [r["kind"] for r in records]
    assert kinds.count("enabled") == 2 and "decision" in kinds  # both PP ranks agreed, acted
    # each rank's enabled record says which knobs ran: the recipe passes no --policy-config
    assert all(r["config"]["policy"] == PolicyConfig().to_dict() for r in records
               if r["kind"] == "enabled")
