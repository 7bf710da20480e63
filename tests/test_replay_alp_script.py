"""scripts/replay_alp.py: a decision log's stages replayed offline through a fresh ALP."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def replay(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "replay_alp.py"), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_replay_reports_mape_with_and_without_the_device_fit(tmp_path):
    rng = random.Random(0)
    log = tmp_path / "decisions.jsonl"
    lines = [json.dumps({"kind": "start", "rank": 0})]
    for _ in range(300):  # a device unlike the A100 profile: prefix attention dominates
        prefix, extend = rng.randrange(0, 600), rng.randrange(8, 129)
        ms = (3.0 + 0.1 * extend + 2e-4 * prefix * extend) * rng.uniform(0.98, 1.02)
        lines.append(json.dumps({"kind": "stage", "rank": 0, "learned": True, "mode": "prefill",
                                 "prefill": [[prefix, extend]], "prefill_tokens": extend,
                                 "decode_count": 0, "decode_ctx": 0, "measured_ms": ms}))
    log.write_text("\n".join(lines) + "\n")
    mape = {}
    for flag in ("", "--no-device-fit"):
        out = replay(str(log), "--model", "qwen2.5-32b", "--pp-size", "4",
                     *([flag] if flag else []))
        assert out.returncode == 0, out.stderr
        mape[flag] = float(re.search(r"ALP MAPE ([\d.]+)%", out.stdout).group(1))
    assert mape[""] < 5.0 < mape["--no-device-fit"]


def test_bad_input_exits_2(tmp_path):
    out = replay(str(tmp_path / "missing.jsonl"), "--model", "qwen2.5-32b", "--pp-size", "4")
    assert out.returncode == 2 and "no such file" in out.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"kind": "decision", "rank": 0}) + "\n")
    out = replay(str(empty), "--model", "qwen2.5-32b", "--pp-size", "4")
    assert out.returncode == 2 and "no learned rank-0 stage records" in out.stderr
