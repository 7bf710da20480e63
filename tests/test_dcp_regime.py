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
# (the typed fields stripped), computed on the code before decisions were typed, for the rules
# typing did not otherwise change: SteadyRule (plain loop) and predictive-paper, 200 requests,
# seed 3. The mixed loop's runs (SloRule) are pinned by tests/test_sim_golden.py.
DIGESTS = [
    ("azure-conv", 5.0, 1.0, "off", "mixed", None),
    ("azure-conv", 6.0, 0.6, "on", "mixed", None),
    ("sharegpt", 3.0, 0.4, "off", "mixed", None),
    ("azure-code", 4.0, 1.0, "on", "mixed", None),
    ("mooncake-synthetic", 1.0, 1.0, "off", "mixed", None),
    ("azure-conv", 5.0, 1.0, "on", "plain", "f923af7a21cd2538"),
    ("synthetic-decode", 6.0, 1.0, "on", "mixed", None),
    ("synthetic-prefill", 3.0, 0.6, "on", "mixed", None),
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
def test_every_decision_carries_its_regime_and_slacks(name, rate, scale, ds, loop, expected):
    result = _run(name, rate, scale, ds, loop)
    if expected is not None:
        assert _digest(result) == expected
    chunks = [d for d in result.decisions if d["type"] == "chunk"]
    for d in chunks:  # the label is the regime's, with the shell's modifiers
        if d["reason"] != "hold+safety-floor":
            assert d["reason"].startswith(Regime[d["regime"]].label), d
        for slack in ("ttft_slack", "tpot_slack"):
            assert d[slack] is None or isinstance(d[slack], float), d
    if loop == "mixed":  # the SLO rule prices every decision it makes while a slot decodes
        ours = [d for d in chunks if Regime[d["regime"]] in (Regime.WITHIN, Regime.SHORT)]
        assert ours and all(d["ttft_slack"] is not None or d["inputs"]["deadlines"] == 0
                            for d in ours)  # every deadline set aside: no TTFT to price
        assert sum(d["tpot_slack"] is not None for d in ours) > len(ours) / 2


def test_the_slacks_are_the_choices_predictions():
    # nothing arriving: a decode's round is pp decode-only stages whatever the chunk (one
    # decode of 1000 context in slot 1, the mean slot's load rounds down to none: 0 ms), so the
    # TTFT of the queued 8000 tokens (and of nothing behind them) is the smallest slack
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    d = mixed_ctl().decide(snap)
    assert (d.regime, d.reason) == (Regime.WITHIN, "slo:max-min-slack")
    assert d.tpot_slack == pytest.approx(1.0)
    stage, c = d.predicted_stage_ms, d.chunk_tokens  # ceil(8000 / c) pieces, 3 stages across
    assert d.ttft_slack == pytest.approx(1 - (-(-8000 // c) * stage + 3 * stage) / 2000.0)


def test_the_decision_logs_write_the_regime_by_name():
    decision = ChunkDecision(512, "slo:max-min-slack:short", (("x", 1.0),), 20.0, Regime.SHORT,
                             0.5, -0.1)
    fields = _decision_fields(3, 1, 512, decision, 4, None)
    assert (fields["regime"], fields["ttft_slack"], fields["tpot_slack"]) == ("SHORT", 0.5, -0.1)
    assert ChunkDecision(512, "keep").regime_fields() == dict.fromkeys(ADDED)


def test_one_label_per_regime():
    assert len({r.label for r in Regime}) == len(Regime)
    assert {r for r in Regime if r.label.startswith("slo:")} == {Regime.WITHIN, Regime.SHORT}


def test_no_control_flow_reads_a_reason_label():
    root = Path(__file__).resolve().parents[1] / "ppsched"
    found = [str(p) for p in root.rglob("*.py") if "reason.startswith" in p.read_text()]
    assert not found
