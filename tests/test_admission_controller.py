"""Admission control: drain measurement, TTFT prediction, guards, config validation."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.admission import (
    AdmissionConfig,
    AdmissionController,
    AdmissionGate,
    AdmissionSnapshot,
    DrainRateEstimator,
    build_admission,
)
from ppsched.admission.guard import SampleGuard, percentile
from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.core.rounds import DecodeCadence
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement

SLO = Slo(2000.0, 200.0)


def snap(now: float, prompt: int = 100, queued: int = 0, *, stages: tuple[float, ...] = (),
         pp: int = 1, chunk: int = 1000, tpot: tuple[float, ...] = ()) -> AdmissionSnapshot:
    return AdmissionSnapshot(now, prompt, queued, 1 if queued else 0, SLO, pp_size=pp,
                             chunk_tokens=chunk, recent_stage_ms=stages, recent_tpot_ms=tpot)


# --- drain rate -------------------------------------------------------------------------------
def test_drain_rate_counts_only_backlogged_intervals():
    est = DrainRateEstimator(half_life_s=1e9, min_window_s=0.0)
    est.update(0.0, 0)
    est.admitted(5000)
    est.update(1.0, 4000)  # 1000 served of 5000 queued: backlogged -> sample 1000 tok/s
    assert est.rate_tokens_per_s == pytest.approx(1000.0)
    est.update(3.0, 0)  # 4000 served of 4000: the queue may have run dry -> no sample
    assert est.samples == 1
    est.admitted(3000)
    est.update(4.0, 0)  # drained again: no sample
    est.admitted(9000)
    est.update(5.0, 6000)  # 3000 served of 9000 in 1 s
    assert est.rate_tokens_per_s == pytest.approx((1000 + 3000) / 2.0)


def test_drain_rate_waits_for_min_window_and_skips_retraction_growth():
    est = DrainRateEstimator(half_life_s=20.0, min_window_s=1.0)
    est.update(0.0, 0)
    est.admitted(10_000)
    est.update(0.5, 10_000)  # nothing built in 0.5 s: a real sample, but too short to trust
    assert est.rate_tokens_per_s is None
    est.update(1.0, 11_000)  # the queue grew without an admission (a retraction): skipped
    assert est.samples == 1 and est.rate_tokens_per_s is None
    est.update(2.0, 9_000)
    assert est.rate_tokens_per_s is not None and est.rate_tokens_per_s > 0


def test_drain_rate_decays_old_samples():
    est = DrainRateEstimator(half_life_s=1.0, min_window_s=0.0)
    est.update(0.0, 0)
    est.admitted(100_000)
    est.update(1.0, 90_000)  # 10000 tok/s
    for k in range(2, 12):  # then 1000 tok/s for 10 half-lives
        est.update(float(k), 90_000 - 1000 * (k - 1))
    assert est.rate_tokens_per_s == pytest.approx(1000.0, rel=0.01)


@pytest.mark.parametrize("kwargs", [{"half_life_s": 0.0}, {"half_life_s": math.inf},
                                    {"min_window_s": -1.0}, {"min_window_s": 30.0}])
def test_drain_rate_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        DrainRateEstimator(**kwargs)


# --- prediction and decisions -----------------------------------------------------------------
def test_cold_start_admits_without_prediction():
    ctl = AdmissionController()
    d = ctl.admit(snap(0.0, 30_000, 10**6))
    assert d.admit and math.isnan(d.predicted_ttft_ms) and "no drain estimate" in d.reason


def test_fallback_rate_is_one_chunk_per_median_stage_plus_pipeline_tail():
    ctl = AdmissionController()
    s = snap(0.0, 500, 1500, stages=(10.0, 20.0, 30.0), pp=4, chunk=1000)
    # 1000 tokens per 20 ms -> 50 tokens/ms; 2000 tokens ahead -> 40 ms; tail 4 x 30 ms
    predicted, rate = ctl.predict_ttft_ms(s)
    assert rate == pytest.approx(50_000.0)
    assert predicted == pytest.approx(40.0 + 120.0)


def test_rejects_when_the_queue_cannot_drain_in_time_and_says_why():
    ctl = AdmissionController(AdmissionConfig(headroom=1.0))
    s = snap(0.0, 1000, 99_000, stages=(100.0,), chunk=1000)  # 10 tok/ms -> 10 s
    d = ctl.admit(s)
    assert not d.admit and d.predicted_ttft_ms == pytest.approx(10_100.0)
    assert d.reason.startswith("admission: predicted TTFT 10100 ms > 2000 ms")
    assert "99000 tokens queued" in d.reason
    assert ctl.rejected == 1 and ctl.admitted == 0


def test_measured_drain_replaces_the_fallback_under_backlog():
    cfg = AdmissionConfig(headroom=1.0, min_window_s=0.0, guard_percentile=None)
    ctl = AdmissionController(cfg)
    stages = (10.0,)  # fallback: 100 tokens/ms, far faster than the measured drain
    assert ctl.admit(snap(0.0, 8000, 0, stages=stages)).admit
    # 8000 queued, 1 s later 7000 remain: measured drain 1000 tokens/s
    d = ctl.admit(snap(1.0, 100, 7000, stages=stages))
    assert d.predicted_ttft_ms == pytest.approx(1000.0 * 7100 / 1000 + 10.0)
    assert not d.admit
    # an empty queue: nothing ahead, own prefill at the fallback rate
    assert ctl.admit(snap(9.0, 100, 0, stages=stages)).admit


def test_rejected_tokens_do_not_count_as_queued():
    cfg = AdmissionConfig(headroom=1.0, min_window_s=0.0, guard_percentile=None)
    ctl = AdmissionController(cfg)
    assert ctl.admit(snap(0.0, 4000, 0, stages=(1000.0,), chunk=4000)).admit
    # fallback rate 4 tok/ms: 4000 ahead + 50000 own -> reject; must not join the queue count
    assert not ctl.admit(snap(0.5, 50_000, 4000, stages=(1000.0,), chunk=4000)).admit
    ctl.admit(snap(1.0, 10, 2000, stages=(1000.0,), chunk=4000))
    # samples: 0 tokens in [0, 0.5] s, then 2000 in [0.5, 1] s (had the rejected 50000 been
    # counted, the second would read 52000)
    keep = 0.5 ** (0.5 / cfg.half_life_s)
    assert ctl.drain.rate_tokens_per_s == pytest.approx(2000.0 / (0.5 * keep + 0.5), rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(queued=st.integers(0, 10**6), extra=st.integers(0, 10**6), prompt=st.integers(1, 32768),
       stage=st.floats(1.0, 500.0), pp=st.integers(1, 8))
def test_more_work_ahead_never_turns_a_reject_into_an_admit(queued, extra, prompt, stage, pp):
    def decide(q: int) -> tuple[bool, float]:
        d = AdmissionController().admit(snap(0.0, prompt, q, stages=(stage,), pp=pp))
        return d.admit, d.predicted_ttft_ms

    (a_small, p_small), (a_big, p_big) = decide(queued), decide(queued + extra)
    assert p_big >= p_small
    assert a_small or not a_big


# --- observed-SLO guards ----------------------------------------------------------------------
def test_percentile_matches_linear_interpolation():
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([7.0], 50) == 7.0


def test_tpot_guard_rejects_while_recent_requests_miss_and_names_it():
    ctl = AdmissionController()
    bad_tpot = (150.0,) * 10 + (400.0,) * 2  # P90 above the 200 ms SLO
    d = ctl.admit(snap(0.0, 100, 0, stages=(10.0,), tpot=bad_tpot))
    assert not d.admit and "recent P90 TPOT" in d.reason and "> SLO 200 ms" in d.reason
    ok = ctl.admit(snap(0.1, 100, 0, stages=(10.0,), tpot=(150.0,) * 12))
    assert ok.admit


def test_guard_needs_samples_and_ignores_stale_ones():
    ctl = AdmissionController(AdmissionConfig(guard_min_samples=8, guard_stale_s=5.0))
    late = (900.0,) * 7
    assert ctl.admit(snap(0.0, 100, 0, stages=(10.0,), tpot=late)).admit  # too few samples
    late = (900.0,) * 7 + (math.nan,) * 3 + (901.0,)  # NaN (1-token requests) do not count
    assert ctl.admit(snap(0.5, 100, 0, stages=(10.0,), tpot=late[:-1])).admit
    assert not ctl.admit(snap(1.0, 100, 0, stages=(10.0,), tpot=late)).admit
    assert not ctl.admit(snap(6.0, 100, 0, stages=(10.0,), tpot=late)).admit  # 5 s: still fresh
    assert ctl.admit(snap(6.1, 100, 0, stages=(10.0,), tpot=late)).admit  # stale: ignored


DECODE = BatchShape(decode_count=8, decode_ctx_sum=800)
PREFILL = BatchShape(prefill=((0, 512),))


def _m(t: float, shape: BatchShape, stage: int = 0, slot: int = 0) -> StageMeasurement:
    return StageMeasurement(t, slot, stage, shape, 10.0)


def test_decode_cadence_is_span_times_slots_over_decode_turns():
    cad = DecodeCadence(window=64, stale_s=1.0)
    assert cad.tpot_ms(0.0) is None
    for k in range(9):  # 4 slots, a decode batch every 10 ms: each slot decodes every 40 ms
        cad.observe(_m(0.01 * k, DECODE, slot=k % 4))
        cad.observe(_m(0.01 * k, DECODE, stage=1, slot=k % 4))  # later stages are ignored
    assert cad.tpot_ms(0.08) == pytest.approx(40.0)
    for k in range(9, 17):  # now every other batch is a prefill: half the decode turns
        cad.observe(_m(0.01 * k, PREFILL if k % 2 else DECODE, slot=k % 4))
    assert cad.tpot_ms(0.16) == pytest.approx(1000 * 0.16 * 4 / 12)
    assert cad.tpot_ms(1.2) is None  # nothing measured for a second: stale


def test_decode_cadence_counts_only_slots_that_decode():
    cad = DecodeCadence()
    for k in range(5):  # one request in slot 2 of 4: its slot comes back every 30 ms
        cad.observe(_m(0.03 * k, DECODE, slot=2))
    assert cad.tpot_ms(0.12) == pytest.approx(30.0)


def test_decode_cadence_window_forgets_old_turns():
    cad = DecodeCadence(window=4)
    for k in range(4):
        cad.observe(_m(0.01 * k, DECODE))
    for k in range(4, 8):
        cad.observe(_m(0.01 * k, PREFILL))
    assert cad.tpot_ms(0.07) is None  # no decode turn left in the window
    with pytest.raises(ValueError):
        DecodeCadence(window=1)


def test_cadence_guard_rejects_while_prefill_displaces_decodes():
    ctl = AdmissionController(AdmissionConfig(headroom=0.8))
    for k in range(21):  # 1 slot: a decode turn only every 5th batch of 40 ms -> 200 ms gaps
        ctl.observe(_m(0.04 * k, DECODE if k % 5 == 0 else PREFILL))
    d = ctl.admit(snap(0.8, 100, 0, stages=(40.0,)))
    assert not d.admit and d.reason.startswith("admission: decode cadence TPOT 200 ms > 160 ms")
    off = AdmissionController(AdmissionConfig(cadence_guard=False))
    for k in range(20):
        off.observe(_m(0.04 * k, DECODE if k % 5 == 0 else PREFILL))
    assert off.admit(snap(0.8, 100, 0, stages=(40.0,))).admit


def test_guards_off_admits_despite_misses():
    ctl = AdmissionController(AdmissionConfig(guard_percentile=None))
    assert ctl.admit(snap(0.0, 100, 0, stages=(10.0,), tpot=(900.0,) * 20)).admit


def test_sample_guard_validates_percentile():
    with pytest.raises(ValueError):
        SampleGuard(0.0, 1, 1.0)


# --- config, factory, gate, snapshot ----------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"headroom": 0}, {"headroom": -1}, {"headroom": math.nan}, {"headroom": True},
    {"half_life_s": 0}, {"min_window_s": 20.0}, {"guard_percentile": 0},
    {"guard_percentile": 101}, {"guard_min_samples": 0}, {"guard_stale_s": -1},
])
def test_bad_config_is_a_user_error(kwargs):
    with pytest.raises(UserError, match="admission"):
        AdmissionConfig(**kwargs)


def test_build_admission_modes():
    assert build_admission("off") is None
    assert isinstance(build_admission("on"), AdmissionController)
    with pytest.raises(UserError, match="--admission 'maybe': expected one of on, off"):
        build_admission("maybe")


def test_gate_fills_the_run_constants():
    gate = AdmissionGate(AdmissionController(AdmissionConfig(headroom=1.0)), SLO, pp_size=2,
                         chunk_tokens=500)
    d = gate.check(0.0, 100, 400, 1, [5.0, 5.0])  # 500 tok per 5 ms -> 5 ms; tail 2 x 5 ms
    assert d.admit and d.predicted_ttft_ms == pytest.approx(15.0)
    assert not gate.check(0.1, 100, 400, 1, [5.0], [300.0] * 10).admit  # TPOT guard fed
    for k in range(10):
        gate.observe(_m(0.2 + 0.1 * k, PREFILL if k % 4 else DECODE))
    assert gate.controller.cadence.tpot_ms(1.1) is not None


@pytest.mark.parametrize("kwargs", [{"now_s": -1.0}, {"now_s": math.nan}, {"prompt_tokens": 0},
                                    {"queued_prompt_tokens": -1}, {"pp_size": 0},
                                    {"chunk_tokens": 0}])
def test_snapshot_validates(kwargs):
    base = {"now_s": 0.0, "prompt_tokens": 1, "queued_prompt_tokens": 0, "queued_requests": 0,
            "slo": SLO}
    with pytest.raises(ValueError):
        AdmissionSnapshot(**{**base, **kwargs})


def test_admission_package_imports_no_engine():
    root = Path(__file__).resolve().parents[1] / "ppsched" / "admission"
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad = [n for n in names if n.startswith(("ppsched.sim", "ppsched.sglang_patch",
                                                     "sglang"))]
            assert not bad, f"{path.name} imports {bad}"


@settings(max_examples=30, deadline=None)
@given(per_cs=st.integers(1, 10_000), gaps_cs=st.lists(st.integers(1, 200), min_size=3,
                                                       max_size=40),
       prompts=st.lists(st.integers(1, 32768), min_size=40, max_size=40))
def test_drain_rate_recovers_a_constant_backlogged_drain(per_cs, gaps_cs, prompts):
    """A queue drained at a constant rate and never empty reads back as exactly that rate
    (whole tokens per centisecond, so every interval serves a whole number of tokens)."""
    est = DrainRateEstimator(half_life_s=20.0, min_window_s=0.0)
    queued, now_cs = 10**12, 0  # a backlog deep enough never to run dry
    est.update(0.0, queued)
    for gap, prompt in zip(gaps_cs, prompts, strict=False):
        est.admitted(prompt)
        queued += prompt - per_cs * gap
        now_cs += gap
        est.update(now_cs / 100.0, queued)
    assert est.rate_tokens_per_s == pytest.approx(100.0 * per_cs, rel=1e-9)
