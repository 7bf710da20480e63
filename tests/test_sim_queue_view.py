"""The queue's snapshot view, kept in step with the queue, equals a rebuild from the queue."""

from __future__ import annotations

import random
from itertools import islice

import pytest

from ppsched.core.requests import RequestSpec
from ppsched.sim.engine import sched_state
from ppsched.sim.engine.sched_state import EngineLimits, SchedState
from ppsched.sim.engine.state import Req

LIMITS = EngineLimits(slots=2, tp=False, max_running=64, per_slot_cap=32, mixed_chunk=True,
                      max_chunk_tokens=2048, max_context=32768, ds_max_consecutive=1)


@pytest.mark.pure
@pytest.mark.parametrize("seed", range(4))
def test_view_matches_a_rebuild_after_every_queue_operation(monkeypatch, seed):
    monkeypatch.setattr(sched_state, "QUEUE_VIEW", 8)  # a short window: entries slide often
    rng = random.Random(seed)
    st = SchedState(LIMITS, 1_000_000)
    next_id = 0
    seen_version = -1
    for _ in range(3000):
        op = rng.random()
        if op < 0.4 or not st.queue:
            req = Req(RequestSpec(next_id, float(next_id), rng.randrange(1, 500), 5))
            next_id += 1
            st.enqueue(req)
        elif op < 0.75:
            st.dequeue_head()
        elif op < 0.85:  # a retracted request returns to the head, its prefill grown
            req = Req(RequestSpec(next_id, float(next_id), rng.randrange(1, 500), 5))
            next_id += 1
            req.generated = rng.randrange(1, 4)
            req.remaining = req.prefill_len
            st.requeue_front(req)
        else:  # the head's prefix-cache match changes what it has left to prefill
            head = st.queue[0]
            st.set_remaining(head, rng.randrange(1, head.prefill_len + 1))
        # the count of views still to build follows every operation
        assert st.queue_view.unbuilt == sum(v is None for v in st.queue_view.views)
        if rng.random() < 0.5:  # snapshots are taken at some turns only
            got = st.queue_view.get(st)
            assert st.queue_view.unbuilt == 0
            if st.queue_version != seen_version:
                want = tuple(r.queued_view() for r in islice(st.queue, 8))
                assert got == want
                seen_version = st.queue_version
