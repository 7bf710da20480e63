"""DS rules on scripted snapshots: boundary, balance, victim order, bound, skip, determinism."""

from __future__ import annotations

import pytest
from test_ds_support import SLO_TPOT_MS, req, snap, trimmer

from ppsched.core.policy import DecodeTrimmer


def _check_partition(decision, s) -> None:
    members = [r.req_id for r in (*s.running, *s.held)]
    assert sorted(decision.run_ids + decision.hold_ids) == sorted(members)
    assert not set(decision.run_ids) & set(decision.hold_ids)
    assert decision.run_ids or not members


def test_is_a_decode_trimmer() -> None:
    assert isinstance(trimmer(), DecodeTrimmer)


@pytest.mark.parametrize("sizes", [(130,), (130, 130, 130, 130), (130, 100, 100, 100)])
def test_130_over_boundary_128_holds_2(sizes) -> None:
    s = snap([req(i) for i in range(130)], slot_sizes=sizes)
    d = trimmer().select(s)
    _check_partition(d, s)
    assert len(d.hold_ids) == 2 and len(d.run_ids) == 128
    assert d.reason.startswith("boundary")


def test_boundaries_come_from_the_ladder_not_128() -> None:
    s = snap([req(i) for i in range(145)])
    assert trimmer((100, 200, 300)).select(s).hold_ids == ()  # 145-100 = 45 > 0.4*100 band
    s = snap([req(i) for i in range(103)])
    assert len(trimmer((100, 200, 300)).select(s).hold_ids) == 3


def test_no_trim_far_above_a_boundary_when_balanced() -> None:
    s = snap([req(i) for i in range(190)], slot_sizes=(190, 190, 190, 190))
    d = trimmer().select(s)
    assert d.hold_ids == () and d.reason == "no-trim"


def test_exactly_on_a_boundary_is_not_trimmed() -> None:
    s = snap([req(i) for i in range(128)], slot_sizes=(128, 128))
    assert trimmer().select(s).hold_ids == ()


def test_balance_moves_a_large_slot_toward_the_mean() -> None:
    # mean 125 lies in the (0, 128] step: the 200-slot is a whole step above it and drops to 128,
    # though 200 is far (72 > 51.2) above its own boundary.
    sizes = (200, 100, 100, 100)
    s = snap([req(i) for i in range(200)], slot_sizes=sizes)
    d = trimmer().select(s)
    _check_partition(d, s)
    assert len(d.run_ids) == 128 and d.reason.startswith("balance")
    assert dict(d.inputs)["slot_mean"] == pytest.approx(125.0)


def test_balance_resumes_held_requests_of_a_small_slot() -> None:
    held = [req(i, held_streak=0) for i in range(90, 100)]
    s = snap([req(i) for i in range(90)], held, slot_sizes=(200, 100, 100, 100), slot=1)
    d = trimmer(k=3).select(s)
    _check_partition(d, s)
    assert d.hold_ids == () and len(d.run_ids) == 100


def test_empty_slots_do_not_drag_the_mean_down() -> None:
    s = snap([req(i) for i in range(200)], slot_sizes=(200, 0, 0, 0))
    assert trimmer().select(s).hold_ids == ()


@pytest.mark.parametrize(("recent", "expect_oldest"), [((50.0,) * 10, False),
                                                       ((185.0,) * 10, True)])
def test_victim_order_flips_with_tpot_slack(recent, expect_oldest) -> None:
    s = snap([req(i) for i in range(130)], recent_tpot_ms=recent)
    d = trimmer().select(s)
    assert d.hold_ids == ((0, 1) if expect_oldest else (128, 129))
    assert d.reason.endswith("hold-oldest" if expect_oldest else "hold-newest")


def test_tight_threshold_reads_p90_of_recent_tpot() -> None:
    # 9 of 10 samples well inside, one above 0.9*SLO: P90 is the 9th value, so loose.
    recent = (10.0,) * 9 + (190.0,)
    d = trimmer().select(snap([req(i) for i in range(130)], recent_tpot_ms=recent))
    assert d.reason.endswith("hold-newest")
    recent = (10.0,) * 8 + (190.0,) * 2
    d = trimmer().select(snap([req(i) for i in range(130)], recent_tpot_ms=recent))
    assert d.reason.endswith("hold-oldest")


def test_starvation_bound_skips_requests_at_k_consecutive_holds() -> None:
    running = [req(i) for i in range(128)]
    held = [req(128, held_streak=1), req(129, held_streak=1)]
    s = snap(running, held)
    d = trimmer(k=1).select(s)
    _check_partition(d, s)
    assert 128 in d.run_ids and 129 in d.run_ids
    assert d.hold_ids == (126, 127)  # the next newest instead
    assert trimmer(k=2).select(s).hold_ids == (128, 129)


def test_requests_over_the_tpot_slo_are_unholdable() -> None:
    running = [req(i) for i in range(128)] + [req(128, tpot_ms=SLO_TPOT_MS + 1),
                                              req(129, tpot_ms=SLO_TPOT_MS + 5)]
    d = trimmer().select(snap(running))
    assert d.hold_ids == (126, 127)


def test_k_zero_never_holds() -> None:
    d = trimmer(k=0).select(snap([req(i) for i in range(130)]))
    assert d.hold_ids == () and d.reason == "boundary:bound-blocked"


def test_skip_when_work_waits_and_kv_has_headroom() -> None:
    running = [req(i) for i in range(130)]
    d = trimmer().select(snap(running, queued_tokens=1025, kv_free=0.5))
    assert d.hold_ids == () and d.reason == "skip-kv-headroom"
    assert len(trimmer().select(snap(running, queued_tokens=1025, kv_free=0.10)).hold_ids) == 2
    assert len(trimmer().select(snap(running, queued_tokens=1024, kv_free=0.5)).hold_ids) == 2


def test_output_is_in_arrival_order_across_running_and_held() -> None:
    running = [req(i) for i in range(0, 130, 2)] + [req(i) for i in range(131, 200)]
    held = [req(i, held_streak=1) for i in range(1, 130, 2)]
    s = snap(running, held, slot_sizes=(len(running) + len(held),) * 2)
    d = trimmer(k=2).select(s)
    _check_partition(d, s)
    assert list(d.run_ids) == sorted(d.run_ids)
    assert list(d.hold_ids) == sorted(d.hold_ids)


def test_same_snapshot_same_answer() -> None:
    s = snap([req(i) for i in range(150)], [req(150 + i, held_streak=1) for i in range(30)],
             slot_sizes=(180, 120, 90, 140), recent_tpot_ms=(120.0, 190.0, 185.0))
    first = trimmer().select(s)
    assert trimmer().select(s) == first
    t = trimmer()
    assert [t.select(s) for _ in range(3)] == [first] * 3


def test_inputs_record_what_drove_the_decision() -> None:
    d = trimmer().select(snap([req(i) for i in range(130)], slot_sizes=(130, 126)))
    inputs = dict(d.inputs)
    assert inputs["slot_reqs"] == 130 and inputs["target"] == 128
    assert inputs["want_hold"] == 2 and inputs["held"] == 2


def test_small_slots_are_never_emptied() -> None:
    t = trimmer((1, 2, 3))
    s = snap([req(0), req(1)], slot_sizes=(2, 1, 1, 1))  # mean 1.25 -> efficient size 1
    d = t.select(s)
    assert len(d.run_ids) == 1 and len(d.hold_ids) == 1
    assert trimmer((1,)).select(snap([req(0)])).run_ids == (0,)
