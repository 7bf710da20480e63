"""The P90 prompt's floor under the SLO rule's TPOT price (ppsched.dcp.prompt_floor)."""

from __future__ import annotations

import math
import random

from test_dcp_rule_slo import ELSEWHERE, mixed_ctl
from test_dcp_support import make_snap, waiting

from ppsched.core.slo import Slo
from ppsched.core.snapshots import QueuedRequest
from ppsched.dcp.candidate_costs import CandidateCosts
from ppsched.dcp.prompt_floor import MIN_PROMPTS, RecentPrompts, prompt_floor
from ppsched.dcp.signals import percentile

# LinearFake (test_dcp_support): stage = 10 + 0.02 c in a mixed loop, pp = 4. A 60 ms TPOT SLO
# allows stages up to 15 ms: 128 (12.56 ms) is the price's choice, 256 (15.12 ms) is over it.
SLO = Slo(400.0, 60.0)
TTFTS = (100.0,) * 64  # the snapshot's recent TTFT samples: the prompts' window is as long


def stage(c: int) -> float:
    return 10 + 0.02 * c


def in_time(c: int, prompt: int, ttft_ms: float = SLO.ttft_ms, pp: int = 4) -> bool:
    return math.ceil(prompt / c) * stage(c) + (pp - 1) * stage(c) <= ttft_ms


def test_recent_prompts_takes_uncached_tokens_at_first_sight():
    prompts = RecentPrompts(window=64)
    cached = QueuedRequest(0, 1.0, 1000, 400, cached_prompt_tokens=600)
    prompts.see(make_snap(queue=[cached] + [waiting(i, 1.0, 100 * i) for i in range(1, 9)]))
    assert prompts.percentile(90.0) is None  # nine seen: no P90 yet
    # request 1 again, half prefilled: not a new prompt, and not shrunk
    prompts.see(make_snap(queue=[waiting(1, 1.0, 100, 50), waiting(9, 1.0, 900)]))
    assert prompts.percentile(50.0) == 450.0  # 400 (uncached), 100..900
    assert sorted(prompts._tokens.values()) == [100, 200, 300, 400, 400, 500, 600, 700, 800, 900]


def test_recent_prompts_keeps_the_last_window():
    prompts = RecentPrompts(window=MIN_PROMPTS)
    prompts.see(make_snap(queue=[waiting(i, 1.0, 10_000) for i in range(MIN_PROMPTS)]))
    prompts.see(make_snap(queue=[waiting(100 + i, 1.0, 10) for i in range(MIN_PROMPTS)]))
    assert prompts.percentile(90.0) == 10.0  # the long ones left the window


def test_recent_prompts_window_is_the_snapshots_ttft_samples():
    prompts = RecentPrompts()
    prompts.see(make_snap(queue=[waiting(i, 1.0, 100) for i in range(20)], ttft=(1.0,) * 12))
    assert prompts.window == 12 and len(prompts._tokens) == 12  # the last 12 seen
    prompts.see(make_snap(queue=[waiting(100 + i, 1.0, 100) for i in range(20)], ttft=(1.0,) * 5))
    assert prompts.window == 12  # the most a snapshot has carried: it never shrinks
    assert sorted(prompts._tokens) == list(range(108, 120))


def test_recent_prompts_percentile_is_the_windows_percentile():
    """The window is kept in order as it slides; its percentile is ``signals.percentile`` of
    the prompts it holds, exactly, at every step."""
    rng = random.Random(7)
    prompts = RecentPrompts()
    next_id = 0
    for step in range(300):
        queue = [waiting(next_id + i, 1.0, rng.choice([1, 50, 50, 700, rng.randrange(1, 9000)]))
                 for i in range(rng.randrange(0, 6))]
        next_id += len(queue)
        prompts.see(make_snap(queue=queue, ttft=(1.0,) * min(64, 10 + step // 4)))
        held = tuple(prompts._tokens.values())
        for q in (50.0, 90.0, 99.0):
            expected = percentile(held, q) if len(held) >= MIN_PROMPTS else None
            assert prompts.percentile(q) == expected


def costs_for(candidates: tuple[int, ...]) -> CandidateCosts:
    return CandidateCosts(candidates, candidates, tuple(stage(c) for c in candidates), 0.0)


def test_prompt_floor_is_the_least_size_that_drains_the_prompt_in_time():
    costs = costs_for((128, 256, 384, 512))
    assert not in_time(128, 4000) and in_time(256, 4000)  # 402 + 38 ms vs 242 + 45 ms
    assert prompt_floor(costs, 4000, 4, 0.0, SLO.ttft_ms, math.inf) == 1
    assert prompt_floor(costs, 100, 4, 0.0, SLO.ttft_ms, math.inf) == 0
    # rank 0's gap per microbatch: 16 pieces of 256 at 15.12 + 8 ms and 3 stages to cross miss
    # 400 ms (415 ms), 11 of 384 do not (335 ms)
    assert prompt_floor(costs, 4000, 4, 8.0, SLO.ttft_ms, math.inf) == 2
    # none within the KV budget (4 stages of 256 = 60.5 ms > 55): none
    assert prompt_floor(costs, 4000, 4, 0.0, SLO.ttft_ms, 55.0) is None
    # too long for any size: none
    assert prompt_floor(costs, 40_000, 4, 0.0, SLO.ttft_ms, math.inf) is None


def long_prompts_seen(ctl, count: int) -> None:
    for k in range(count):
        ctl.decide(make_snap(iteration=8 * k, queue=[waiting(1000 + k, 100.0, 4000)],
                             decodes=ELSEWHERE, ttft=TTFTS))


def test_the_rule_raises_the_price_to_the_p90_prompts_floor():
    # The queue of the moment is one short prompt (128 brings it in time: no escalation), but
    # the recent prompts are 4000 tokens, which 128 cannot prefill within 400 ms
    short = make_snap(iteration=800, queue=[waiting(1, 100.0, 100)], decodes=ELSEWHERE,
                      ttft=TTFTS)
    ctl = mixed_ctl(SLO)
    long_prompts_seen(ctl, MIN_PROMPTS - 2)  # with the short one: one short of the minimum
    d = ctl.decide(short)
    assert (d.chunk_tokens, d.reason) == (128, "slo:max-supply")
    ctl = mixed_ctl(SLO)
    long_prompts_seen(ctl, MIN_PROMPTS)
    d = ctl.decide(short)
    assert (d.chunk_tokens, d.reason) == (256, "slo:p90-prompt")
    inputs = dict(d.inputs)
    assert inputs["price_choice"] == 128.0
    assert inputs["p90_prompt_tokens"] == 4000.0


def test_no_floor_while_nothing_decodes():
    # no TPOT to price: the nothing-decodes plan sizes for the queue itself
    ctl = mixed_ctl(SLO)
    long_prompts_seen(ctl, MIN_PROMPTS)
    d = ctl.decide(make_snap(iteration=800, queue=[waiting(1, 100.0, 100)], ttft=TTFTS))
    assert d.reason.startswith("no-decodes")


def test_the_tpot_ease_does_not_go_below_the_floor():
    # P90 TPOT the closer to its SLO (59 of 60 ms, TTFT 100 of 400): the ease would take 128
    # (it keeps up and brings the short prompt in time), which the P90 prompt cannot use
    ctl = mixed_ctl(SLO)
    long_prompts_seen(ctl, MIN_PROMPTS)
    d = ctl.decide(make_snap(iteration=800, queue=[waiting(1, 100.0, 100)], decodes=ELSEWHERE,
                             ttft=TTFTS, tpot=(59.0,) * 64))
    assert (d.chunk_tokens, d.reason) == (256, "slo:p90-prompt")
