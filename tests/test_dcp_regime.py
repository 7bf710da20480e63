"""Decisions are typed: each carries the regime that chose it and the slacks it acted on, and no
control flow reads a reason label."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from test_dcp_rule_slo import ELSEWHERE, mixed_ctl
from test_dcp_support import make_snap, waiting

from ppsched.core.policy import ChunkDecision
from ppsched.core.slo import Slo
from ppsched.dcp.regime import Regime
from ppsched.experiments.run_config import RunConfig
from ppsched.sglang_patch.decide import _decision_fields
from ppsched.sim import simulate
from ppsched.traces import load_workload

ADDED = ("regime", "ttft_slack", "tpot_slack")  # the typed record's fields, not in the digest

# (workload, rate, SLO scale, DS, loop) -> sha256 prefix of the run's requests and decisions
# (the typed fields stripped): predictive's SloRule (mixed loop), SteadyRule (plain loop) and
# predictive-paper, 200 requests, seed 3. A change to a rule's decisions changes them
# (``python tests/test_dcp_regime.py`` prints them for the code on the path).
DIGESTS = [
    ("azure-conv", 5.0, 1.0, "off", "mixed", "7e7ea81c5b774602"),
    ("azure-conv", 6.0, 0.6, "on", "mixed", "57c20b5cc20c1b8f"),
    ("sharegpt", 3.0, 0.4, "off", "mixed", "073d809e595787f2"),
    ("azure-code", 4.0, 1.0, "on", "mixed", "62aa03dfe590364f"),
    ("mooncake-synthetic", 1.0, 1.0, "off", "mixed", "46ca13020be430d8"),
    ("azure-conv", 5.0, 1.0, "on", "plain", "f923af7a21cd2538"),
    ("synthetic-decode", 6.0, 1.0, "on", "mixed", "588c636569ecb540"),
    ("synthetic-prefill", 3.0, 0.6, "on", "mixed", "efd422f6d3eab39d"),
    ("sharegpt", 2.0, 1.0, "off", "paper", "e40f70cccb822953"),
]


def _run(name: str, rate: float, scale: float, ds: str, loop: str):
    workload = load_workload(name, rate=rate, num_requests=200, seed=3)
    chunk = "predictive-paper" if loop == "paper" else "predictive"
    return simulate(RunConfig(chunk=chunk, ds=ds, mixed_chunk=loop != "plain",
                              slo=Slo().scaled(scale), seed=3), workload)


def _digest(result) -> str:
    h = hashlib.sha256()
    for record in result.records:
        h.update(json.dumps(dataclasses.asdict(record), sort_keys=True, default=repr).encode())
    for decision in result.decisions:
        kept = {k: v for k, v in decision.items() if k not in ADDED}
        h.update(json.dumps(kept, sort_keys=True, default=repr).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name, rate, scale, ds, loop, expected", DIGESTS)
def test_typed_decisions_and_the_runs_digests(name, rate, scale, ds, loop, expected):
    result = _run(name, rate, scale, ds, loop)
    assert _digest(result) == expected
    chunks = [d for d in result.decisions if d["type"] == "chunk"]
    for d in chunks:  # the label is the regime's, with the shell's modifiers
        if d["reason"] != "hold+safety-floor":
            assert d["reason"].startswith(Regime[d["regime"]].label), d
        for slack in ("ttft_slack", "tpot_slack"):
            assert d[slack] is None or isinstance(d[slack], float), d
    if loop == "mixed":  # every decision of the SLO rule carries its TPOT slack
        ours = [d for d in chunks if d["reason"].startswith(("slo:", "tpot-tight:least-stage"))]
        assert ours and all(d["tpot_slack"] is not None for d in ours)


def test_the_slacks_are_the_choices_predictions():
    # LinearFake, pp 4: 1920 tokens take 10 + 0.02 * 1920 = 48.4 ms; SLO_TPOT 200 ms
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    d = mixed_ctl().decide(snap)
    assert d.regime is Regime.WITHIN_BUDGET and d.reason == "slo:within-budget"
    assert d.tpot_slack == pytest.approx(1 - 4 * d.predicted_stage_ms / 200.0)
    assert d.ttft_slack is None  # no P90 prompt before ten prompts were seen


def test_the_decision_logs_write_the_regime_by_name():
    decision = ChunkDecision(512, "slo:eased", (("x", 1.0),), 20.0, Regime.EASED, 0.5, -0.1)
    fields = _decision_fields(3, 1, 512, decision, 4, None)
    assert (fields["regime"], fields["ttft_slack"], fields["tpot_slack"]) == ("EASED", 0.5, -0.1)
    assert ChunkDecision(512, "keep").regime_fields() == dict.fromkeys(ADDED)


def test_one_label_per_regime():
    assert len({r.label for r in Regime}) == len(Regime)


def test_no_control_flow_reads_a_reason_label():
    root = Path(__file__).resolve().parents[1] / "ppsched"
    found = [str(p) for p in root.rglob("*.py") if "reason.startswith" in p.read_text()]
    assert not found


if __name__ == "__main__":
    for row in DIGESTS:
        print(*row[:5], _digest(_run(*row[:5])))
