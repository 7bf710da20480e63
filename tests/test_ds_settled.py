"""``DelayTrimmer.settled_reason`` (counts only) agrees with ``select`` on random snapshots.

Whenever it names a reason, ``select`` holds nobody with that very reason; when it returns None,
``select`` reaches the victim rule (a hold or ``:bound-blocked``). It reads the slot sizes only
past the headroom rule and asks about the queue at most once, for DS's own threshold.
"""

import random

from test_ds_support import req, snap

from ppsched.delay_sched.ladder import BoundaryLadder
from ppsched.delay_sched.trimmer import DelayTrimmer, DsConfig


def test_settled_reason_matches_select_on_random_snapshots():
    rng = random.Random(11)
    seen = {"settled": 0, "select": 0}
    for _ in range(3000):
        boundaries = tuple(sorted(rng.sample(range(2, 80), rng.randrange(1, 6))))
        trim = DelayTrimmer(BoundaryLadder(boundaries),
                            200.0, rng.randrange(0, 3),
                            DsConfig(skip_queued_tokens=rng.choice([0, 1024, 5000])))
        n = rng.randrange(0, 90)
        members = [req(i, held_streak=rng.randrange(0, 3), tpot_ms=rng.uniform(10, 300))
                   for i in range(n)]
        held = [m for m in members if rng.random() < 0.1]
        running = [m for m in members if m not in held]
        sizes = tuple(rng.randrange(0, 90) for _ in range(rng.randrange(1, 5))) + (n,)
        s = snap(running, held, slot_sizes=sizes, kv_free=rng.choice([0.02, 0.1, 0.5]),
                 queued_tokens=rng.choice([0, 1024, 1025, 40_000]), recent_tpot_ms=())
        asked, sized = [], []

        def exceed(limit, s=s, asked=asked):
            asked.append(limit)
            return s.queued_prompt_tokens > limit

        def slot_sizes(s=s, sized=sized):
            sized.append(True)
            return s.slot_sizes

        reason = trim.settled_reason(n, slot_sizes, s.kv_free_fraction, exceed)
        decision = trim.select(s)
        assert len(asked) <= 1 and all(limit == trim.config.skip_queued_tokens for limit in asked)
        if reason == "skip-kv-headroom":
            assert not sized
        if reason is not None:
            assert decision.reason == reason and decision.hold_ids == ()
            seen["settled"] += 1
        else:
            assert decision.reason.endswith((":hold-newest", ":hold-oldest", ":bound-blocked"))
            seen["select"] += 1
    assert min(seen.values()) > 300
