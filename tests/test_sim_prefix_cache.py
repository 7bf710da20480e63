"""The simulated radix prefix cache and long-context handling."""

from __future__ import annotations

from test_sim_engine_fakes import FakeCost, FakeWorkload

from ppsched.core.requests import RequestSpec
from ppsched.experiments.run_config import RunConfig
from ppsched.sim import simulate
from ppsched.sim.engine.prefix_cache import PrefixCache


def _run(reqs, *, cost=None, **cfg):
    cfg.setdefault("chunk", "static:2048")
    return simulate(RunConfig(**cfg), FakeWorkload(reqs), cost_model=cost or FakeCost())


def _prefill_tokens_by_request(res, n):
    """Prefill tokens each request was charged (stage-0 rows; one request per batch here)."""
    rows = res.iterations[(res.iterations["stage"] == 0) & (res.iterations["prefill_tokens"] > 0)]
    return rows["prefill_tokens"].tolist(), rows["prefix_tokens"].tolist()


def test_repeated_prefix_is_charged_only_for_its_uncached_part():
    shared = (11, 12, 13)  # 3 blocks = 1536 tokens
    reqs = [RequestSpec(0, 0.0, 1600, 2, shared + (20,)),
            RequestSpec(1, 5.0, 1700, 2, shared + (30,))]
    res = _run(reqs)
    tokens, prefixes = _prefill_tokens_by_request(res, 2)
    assert tokens == [1600, 1700 - 1536]  # the second pays only past the shared blocks
    assert prefixes == [0, 1536]  # ...and its attention reads the cached prefix
    cache = res.summary["prefix_cache"]
    assert cache["enabled"] and cache["hit_tokens"] == 1536
    assert cache["hit_rate"] == 1536 / 3300


def test_full_match_still_computes_one_token_and_off_switch_charges_everything():
    ids = (1, 2)
    reqs = [RequestSpec(0, 0.0, 1024, 2, ids), RequestSpec(1, 5.0, 1024, 2, ids)]
    tokens, _ = _prefill_tokens_by_request(_run(reqs), 2)
    assert tokens == [1024, 1]  # SGLang recomputes the last token for its logits
    off = _run(reqs, prefix_cache=False)
    assert _prefill_tokens_by_request(off, 2)[0] == [1024, 1024]
    assert off.summary["prefix_cache"] == {"enabled": False}


def test_no_prefix_ids_means_no_cache():
    res = _run([RequestSpec(0, 0.0, 600, 2), RequestSpec(1, 1.0, 600, 2)])
    assert res.summary["prefix_cache"] == {"enabled": False}


def test_eviction_keeps_kv_within_capacity_and_frees_lru_first():
    # 12 distinct 2-block prompts through a 5000-token KV: the tree must evict to admit them
    reqs = [RequestSpec(i, 2.0 * i, 1024, 4, (100 + 2 * i, 101 + 2 * i)) for i in range(12)]
    res = _run(reqs, cost=FakeCost(capacity=5000))
    assert all(not r.rejected and r.finish_s > 0 for r in res.records)
    assert res.summary["kv_peak_tokens"] <= 5000
    cache = res.summary["prefix_cache"]
    assert cache["evicted_tokens"] > 0 and cache["tree_tokens_at_end"] <= 5000


def test_lru_eviction_order_and_locked_nodes_stay():
    cache = PrefixCache()
    old, _ = cache.match((1,), 512)
    a, _ = cache.insert((1,), 512, old, now=1.0)
    b, _ = cache.insert((2,), 512, [], now=2.0)
    c, _ = cache.insert((3,), 512, [], now=3.0)
    cache.unlock(a, 1.0)
    cache.unlock(b, 2.0)  # c stays locked (a running request)
    assert cache.evictable == 1024
    assert cache.evict(100) == 512  # the least recently used leaf: block 1
    assert cache.match((1,), 600)[1] == 0 and cache.match((2,), 600)[1] == 512
    assert cache.evict(10_000) == 512  # only block 2 is unlocked
    assert cache.match((3,), 600)[1] == 512 and cache.tokens == 512
    del c


def test_over_context_rejected_and_counted():
    reqs = [RequestSpec(0, 0.0, 3000, 10), RequestSpec(1, 0.0, 1000, 10),
            RequestSpec(2, 0.0, 2000, 49)]
    res = _run(reqs, context_length=2048)
    rejected = [r.req_id for r in res.records if r.rejected]
    assert rejected == [0, 2]
    assert res.summary["context_rejected"] == 2 and res.summary["context_length"] == 2048


def test_long_prompt_is_chunked_with_a_growing_prefix():
    res = _run([RequestSpec(0, 0.0, 10_000, 2)], chunk="static:2048")
    tokens, prefixes = _prefill_tokens_by_request(res, 1)
    assert tokens == [2048, 2048, 2048, 2048, 1808]
    assert prefixes == [0, 2048, 4096, 6144, 8192]


def test_with_ample_kv_the_hit_rate_is_the_traces_prefix_reuse():
    """Mooncake trace, first 300 requests, arrivals slowed 20x and a huge KV: every block a
    previous prompt cached must hit (an infinite-cache count over the block-id paths)."""
    import json
    from pathlib import Path

    from ppsched.core.paths import data_dir

    path = Path(data_dir(None)) / "traces" / "mooncake_synthetic_trace.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()[:300]]
    reqs = [RequestSpec(i, r["timestamp"] / 1000 * 20, r["input_length"], r["output_length"],
                        tuple(r["hash_ids"])) for i, r in enumerate(rows)]
    seen: set[tuple[int, ...]] = set()
    ideal = 0
    for r in reqs:
        ids, hit = r.prefix_block_ids, 0
        for i in range(len(ids)):
            if ids[:i + 1] not in seen:
                break
            hit += min(512, r.prompt_tokens - 512 * i)
        ideal += min(hit, r.prompt_tokens - 1)
        seen.update(ids[:i + 1] for i in range(len(ids)))
    res = _run(reqs, cost=FakeCost(capacity=10**9, per_token_ms=0.0005), context_length=10**6)
    cache = res.summary["prefix_cache"]
    assert ideal > 0 and cache["hit_tokens"] == ideal and cache["evicted_tokens"] == 0


def test_bad_context_length_is_a_user_error(capsys, tmp_path):
    import pytest

    from ppsched.cli.main import main
    from ppsched.core.errors import UserError

    with pytest.raises(UserError, match="context-length"):
        RunConfig(context_length=1)
    code = main(["run", "--engine", "sim", "--workload", "synthetic-decode", "--num-requests",
                 "2", "--context-length", "0", "--out", str(tmp_path / "out")])
    assert code == 2 and "--context-length 0" in capsys.readouterr().err


class _Recorder:
    """A static-2048 chunk controller that keeps every snapshot's queue."""

    name = "recorder"

    def __init__(self) -> None:
        self.queues: list = []

    def decide(self, snap):
        from ppsched.core.policy import ChunkDecision

        self.queues.append(snap.queue)
        return ChunkDecision(2048, "static")

    def observe(self, measurement) -> None:
        pass


def test_policies_see_the_uncached_remainder_in_snapshots():
    from ppsched.sim.engine.feed import PolicyFeed
    from ppsched.sim.engine.loop import Engine
    from ppsched.sim.engine.sched_state import EngineLimits

    limits = EngineLimits(slots=1, tp=True, max_running=8, per_slot_cap=8, mixed_chunk=False,
                          max_chunk_tokens=2048, max_context=32768, ds_max_consecutive=1,
                          prefix_cache=True)
    recorder = _Recorder()
    engine = Engine(FakeCost(), PolicyFeed(recorder, None, None), limits)
    # request 1 arrives after request 0's prompt is cached; both in the queue view at arrival
    engine.run((RequestSpec(0, 0.0, 1536, 50, (1, 2, 3)),
                RequestSpec(1, 1.0, 1600, 2, (1, 2, 3, 4))))
    seen = [q for queue in recorder.queues for q in queue if q.req_id == 1]
    assert seen and seen[0].prompt_tokens == 1600
    assert seen[0].cached_prompt_tokens == 1536 and seen[0].remaining_prompt_tokens == 64
