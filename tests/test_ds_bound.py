"""Property: over random snapshot sequences, with the engine's held_streak bookkeeping, DS never
holds a request more than K consecutive turns, never holds one over the TPOT SLO, partitions the
slot exactly, never empties it, and answers the same snapshot the same way."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.core.snapshots import DecodeSnapshot, DecodingRequest, new_decoding_request
from ppsched.delay_sched.ladder import BoundaryLadder
from ppsched.delay_sched.trimmer import DelayTrimmer


@dataclass
class _Req:
    """Engine-side state of one decoding request."""

    req_id: int
    arrival_s: float
    first_token_s: float
    last_token_s: float
    generated: int = 1
    held: bool = False
    held_streak: int = 0

    def view(self) -> DecodingRequest:
        return DecodingRequest(self.req_id, self.arrival_s, 100 + self.generated, self.generated,
                               self.first_token_s, self.last_token_s, self.held_streak)


ladders = st.lists(st.integers(1, 40), min_size=1, max_size=5).map(
    lambda steps: tuple(sum(steps[: i + 1]) for i in range(len(steps))))

turn = st.tuples(st.integers(0, 3),  # slot
                 st.floats(0.005, 0.4),  # seconds since the previous turn
                 st.integers(0, 6),  # new requests landing in this slot
                 st.integers(0, 4),  # requests finishing
                 st.lists(st.floats(1.0, 400.0), max_size=6),  # recent TPOT window
                 st.integers(0, 3000), st.floats(0.0, 1.0))  # queued tokens, KV free fraction


@settings(max_examples=150, deadline=None)
@given(ladder=ladders, k=st.integers(0, 3), slo=st.floats(20.0, 300.0),
       initial=st.lists(st.integers(0, 90), min_size=4, max_size=4),
       turns=st.lists(turn, min_size=1, max_size=40))
def test_bound_and_partition_hold_over_random_sequences(ladder, k, slo, initial, turns) -> None:
    trimmer = DelayTrimmer(BoundaryLadder(ladder), slo, k)
    now = 1.0
    next_id = 0
    slots: list[list[_Req]] = [[] for _ in range(4)]

    def admit(slot: int, count: int) -> None:
        nonlocal next_id
        for _ in range(count):
            slots[slot].append(_Req(next_id, now, now, now))
            next_id += 1

    for slot, count in enumerate(initial):
        admit(slot, count)
    max_streak = 0
    for slot, dt, arrivals, finishes, recent, queued, kv_free in turns:
        now += dt
        admit(slot, arrivals)
        members = slots[slot]
        del members[:finishes]  # the oldest finish first (deterministic, engine-agnostic)
        views = [r.view() for r in members]
        s = DecodeSnapshot(now_s=now, slot=slot, pp_size=4,
                           running=tuple(v for v, r in zip(views, members, strict=True)
                                         if not r.held),
                           held=tuple(v for v, r in zip(views, members, strict=True) if r.held),
                           slot_sizes=tuple(len(x) for x in slots),
                           kv_free_tokens=int(kv_free * 1000), kv_total_tokens=1000,
                           queued_requests=int(queued > 0), queued_prompt_tokens=queued,
                           recent_tpot_ms=tuple(recent))
        d = trimmer.select(s)
        assert trimmer.select(s) == d  # deterministic in the snapshot
        ids = [r.req_id for r in members]
        assert sorted(d.run_ids + d.hold_ids) == sorted(ids)
        assert len(set(d.run_ids + d.hold_ids)) == len(ids)
        assert d.run_ids or not ids
        hold = set(d.hold_ids)
        by_id = {v.req_id: v for v in views}
        for rid in hold:
            assert by_id[rid].tpot_so_far_ms() <= slo
        for r in members:  # engine bookkeeping: streak counts consecutive held turns
            if r.req_id in hold:
                r.held, r.held_streak = True, r.held_streak + 1
            else:
                r.held, r.held_streak = False, 0
                r.generated += 1
                r.last_token_s = now
            max_streak = max(max_streak, r.held_streak)
            assert r.held_streak <= k
    assert max_streak <= k


@given(st.tuples(st.integers(0, 10**6), st.floats(0, 1e4), st.integers(1, 10**5),
                 st.integers(0, 10**4), st.floats(0, 1e4), st.floats(0, 1e4), st.integers(0, 5)))
def test_the_engines_fast_constructor_builds_the_same_view(values):
    """Both engines build a decode snapshot's requests with ``new_decoding_request``: the same
    frozen value ``DecodingRequest(...)`` builds."""
    fast = new_decoding_request(*values)
    assert fast == DecodingRequest(*values) and type(fast) is DecodingRequest
    assert fast.tpot_so_far_ms() == DecodingRequest(*values).tpot_so_far_ms()
