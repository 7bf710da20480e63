"""The user's candidates are the candidates: each controller picks only among those sizes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS
from ppsched.core.policy_context import PolicyContext
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement
from ppsched.dcp.registry import build_chunk_controller
from ppsched.dcp.signals import usable_candidates

SMALL = (16, 32, 64, 128)
ODD = (100, 300, 1000, 1500)  # no 128 grid anywhere
MODEL = BUILTIN_MODELS["qwen2.5-32b"]
LOOSE = Slo(2000.0, 200.0)


def ctx(cands: tuple[int, ...], slo: Slo = LOOSE) -> PolicyContext:
    return PolicyContext(pp_size=4, slo=slo, model=MODEL, chunk_candidates=cands)


def build(spec: str, cands: tuple[int, ...], slo: Slo = LOOSE):
    def timer(n: int) -> float:  # a convex prefill time: SGLang's fit accepts it
        return 1e-6 * n * n + 0.03 * n + 4.0

    return build_chunk_controller(spec, ctx(cands, slo), predictor=LinearFake(),
                                  prefill_timer=timer)


def mixed(ctl):
    ctl.observe(StageMeasurement(0.0, 0, 0, BatchShape(((0, 64),), 2, 100), 12.0))
    return ctl


SPECS = ("greedy", "greedy-paper", "predictive", "predictive-paper", "sglang-dynamic")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SPECS), st.sampled_from((SMALL, ODD)), st.booleans(),
       st.lists(st.tuples(st.lists(st.integers(1, 8000), max_size=5),
                          st.lists(st.integers(0, 300), min_size=4, max_size=4),
                          st.floats(0.0, 3.0), st.integers(0, 4000)),
                min_size=1, max_size=12))
def test_every_decision_is_a_user_candidate(spec, cands, mixed_loop, steps):
    ctl = build(spec, cands)
    if mixed_loop:
        mixed(ctl)
    for it, (tokens, decodes, waited, done) in enumerate(steps):
        q = [waiting(i, 100.0 - waited, t) for i, t in enumerate(tokens)]
        ch = waiting(99, 99.0, 5000, remaining=5000 - done) if done else None
        d = ctl.decide(make_snap(iteration=it, queue=q, chunked=ch, decodes=tuple(decodes),
                                 ttft=(waited * 1000.0,), tpot=(150.0,)))
        assert d.chunk_tokens in cands, (spec, d)


@pytest.mark.parametrize("spec", ["predictive", "predictive-paper"])
def test_predictive_uses_sizes_below_128_under_a_tight_tpot(spec):
    # LinearFake stage = 10 + 0.02 * tokens; the TPOT bound leaves 11.5 ms per stage, so only
    # chunks <= 75 tokens meet it: the controllers must reach below 128 to the user's 64 or less
    tight = Slo(2000.0, 4 * 11.5 / 1.05)
    d = build(spec, SMALL, tight).decide(make_snap(queue=[waiting(0, 99.0, 9000)]))
    assert d.chunk_tokens < 128 and d.chunk_tokens in SMALL


def test_greedy_walks_the_user_sizes_one_step_at_a_time():
    ctl = build("greedy-paper", ODD)
    seen = []
    for it in range(0, 40, 4):  # TTFT well above 0.3 SLO, TPOT low: grow every decision
        seen.append(ctl.decide(make_snap(iteration=it, ttft=(1500.0,), tpot=(20.0,))).chunk_tokens)
    # starts at 128 snapped down to 100, then one candidate up per decision, capped at 1500
    assert seen[:4] == [300, 1000, 1500, 1500]


def test_static_must_be_one_of_the_candidates():
    assert build("static:64", SMALL).decide(make_snap()).chunk_tokens == 64
    with pytest.raises(UserError, match="candidates"):
        build("static:256", SMALL)


def test_bad_candidates_are_user_errors():
    for bad in ((), (0, 64), (-16,)):
        with pytest.raises(UserError):
            ctx(bad)


def test_usable_candidates_never_invents_a_size():
    assert usable_candidates(ODD, 1200) == (100, 300, 1000)
    assert usable_candidates(ODD, 50) == (100,)  # none fits: the smallest (the engine clamps)
    assert usable_candidates(None, 2048) == tuple(range(128, 2049, 128))
