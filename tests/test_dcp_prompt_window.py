"""The recent prompts the SLO rule reads its P90 prompt from (ppsched.dcp.prompt_window)."""

from __future__ import annotations

import random

from test_dcp_support import make_snap, waiting

from ppsched.core.snapshots import QueuedRequest
from ppsched.dcp.prompt_window import MIN_PROMPTS, RecentPrompts
from ppsched.dcp.signals import percentile


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
