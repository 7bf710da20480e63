"""Deferred decode steps (``RequestClock.observe_unfinished`` with a group) leave every request's
times exactly as observing request by request does.

Two clocks follow the same random slots -- decode steps, requests joining, leaving and moving
between groups, first tokens, turns with no progress, finished requests observed, forgotten ones
-- one observing each request with ``observe`` (the reference), the other whole groups with
deferred writes. Whatever the fast clock hands back and every tracked request's times (read
through ``get``, which settles) must equal the reference's after every turn.
"""

import random

from ppsched.sglang_patch import translate
from ppsched.sglang_patch.translate import RequestClock


class Req:
    def __init__(self, rid, out):
        self.rid = rid
        self.origin_input_ids = [0] * 10
        self.output_ids = [0] * out
        self.done = False

    def finished(self):
        return self.done


def _times(clock, rid):
    t = clock.get(rid)
    return None if t is None else (t.req_id, t.arrival_s, t.n_out, t.first_token_s,
                                   t.last_token_s, t.held_streak)


def _same(a, b):  # NaN-aware equality of the time tuples
    return a == b or (a is not None and b is not None and all(
        x == y or (x != x and y != y) for x, y in zip(a, b, strict=True)))


def test_deferred_steps_equal_per_request_observation(monkeypatch):
    monkeypatch.setattr(translate, "MAX_TRACKED", 60)  # forgetting happens too
    rng = random.Random(5)
    fast, ref = RequestClock(), RequestClock()
    groups = {g: [Req(f"{g}-{i}", rng.choice([0, 1, 5])) for i in range(rng.randrange(2, 12))]
              for g in range(4)}
    serial, deferred_turns = 0, 0
    for turn in range(3000):
        now = turn * 0.01
        g = turn % 4
        reqs = groups[g]
        steady = rng.random() < 0.8  # most turns: the slot decoded one token each
        for r in reqs:
            if steady or rng.random() < 0.5:
                r.output_ids.append(0)
        if not steady:
            if reqs and rng.random() < 0.3:  # a request moves to another group
                groups[rng.randrange(4)].append(reqs.pop(rng.randrange(len(reqs))))
            if rng.random() < 0.3:
                serial += 1
                reqs.append(Req(f"n{serial}", rng.choice([0, 1])))
            if reqs and rng.random() < 0.2:  # one finishes: observed as such, then leaves
                done = reqs.pop(rng.randrange(len(reqs)))
                done.done = True
                done.output_ids.append(0)
                assert _same(_times(fast, done.rid), _times(ref, done.rid))
                fast.observe(done, now)
                ref.observe(done, now)
        before = fast._steps.get(g)
        got = fast.observe_unfinished(reqs, now, group=g)
        after = fast._steps.get(g)  # the same deferred step carried on: no per-request work
        deferred_turns += before is not None and after is not None and after[0] is before[0]
        want = [ref.observe(r, now) for r in reqs]
        assert [(t.req_id, t.arrival_s) for t in got] == [(t.req_id, t.arrival_s) for t in want]
        if rng.random() < 0.1 or turn % 97 == 0:  # read everything (settles)
            for r in [r for rs in groups.values() for r in rs]:
                assert _same(_times(fast, r.rid), _times(ref, r.rid)), (turn, r.rid)
            assert list(fast.recent_ttft_ms) == list(ref.recent_ttft_ms)
            assert list(fast.recent_tpot_ms) == list(ref.recent_tpot_ms)
    assert deferred_turns > 300  # the deferred path was taken on many turns
