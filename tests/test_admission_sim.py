"""Admission control wired into the simulator (`--admission on|off`, off by default)."""

from __future__ import annotations

import json

from ppsched.cli.main import main
from ppsched.experiments.run_config import RunConfig
from ppsched.sim import simulate
from ppsched.traces import load_workload


def _key(res) -> list[tuple]:
    return [(r.req_id, r.rejected, r.first_token_s, r.finish_s) for r in res.records]


def test_off_is_the_default():
    assert RunConfig().admission == "off"


def test_light_load_admits_everything_and_changes_nothing():
    wl = load_workload("azure-conv", rate=1.0, num_requests=60, seed=3)
    off = simulate(RunConfig(), wl)
    on = simulate(RunConfig(admission="on"), wl)
    assert on.summary["rejected"] == 0
    assert _key(on) == _key(off)


def test_overload_rejects_at_arrival_with_a_reason_and_keeps_ttft():
    wl = load_workload("azure-conv", rate=23.6, duration_s=20.0, seed=0)
    off = simulate(RunConfig(), wl)
    on = simulate(RunConfig(admission="on"), wl)  # invariants checked inside
    rejected = [r for r in on.records if r.rejected]
    assert rejected and all(r.reject_reason.startswith("admission: ") for r in rejected)
    assert off.summary["rejected"] == 0
    admitted = [r for r in on.records if not r.rejected]
    assert on.summary["ttft_ms"]["p90"] < off.summary["ttft_ms"]["p90"]
    # what admission predicted for the admitted ones holds on most of them
    assert sum(r.ttft_ms <= 2000.0 for r in admitted) >= 0.9 * len(admitted)


def test_run_cli_flag(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", "--workload", "azure-conv", "--rate", "23.6", "--duration", "10",
               "--admission", "on", "--out", str(out)])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rejected"] > 0
    text = capsys.readouterr().out
    assert f"rejected {summary['rejected']}" in text
