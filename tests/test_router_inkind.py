"""The simulated router on the live router test's pinned request sequence: what held in every
live run holds in the simulation (round_robin alternates; cache_aware never splits a group;
follow-on requests hit their group's prefix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppsched.core.errors import UserError
from ppsched.experiments.run_config import RunConfig
from ppsched.fleet.inkind import (
    LIVE_TOKENS_PER_BLOCK,
    SHARED_PREFIX_TOKENS,
    SIM_PER_LIVE_TOKEN,
    bench_serving_arrivals,
    expected_hits,
    groups_on,
    live_groups_by_replica,
    prefix_ready,
    read_live_sequence,
    replay,
    to_specs,
)

ROOT = Path(__file__).resolve().parents[1]
SEQ = read_live_sequence(ROOT / "results" / "pinned" / "live_router_sequence.csv")
BOX = RunConfig(model=str(ROOT / "bench" / "models" / "phi-2"), parallel="pp2",
                chunk="predictive", ds="on", context_length=16384)


@pytest.fixture(scope="module")
def replays():
    return {p: replay(SEQ, BOX, p) for p in ("round_robin", "cache_aware")}


def test_the_shared_prefix_is_the_groups_first_blocks_and_the_rest_is_each_requests_own():
    specs = to_specs(SEQ, bench_serving_arrivals(len(SEQ)))
    shared = SHARED_PREFIX_TOKENS // LIVE_TOKENS_PER_BLOCK
    for row, spec in zip(SEQ, specs, strict=True):
        assert spec.prompt_tokens == row.prompt_tokens * SIM_PER_LIVE_TOKEN
        assert len(spec.prefix_block_ids) == -(-row.prompt_tokens // LIVE_TOKENS_PER_BLOCK)
    firsts = {row.group: spec.prefix_block_ids[:shared]
              for row, spec in zip(SEQ, specs, strict=True)}
    assert len(set(firsts.values())) == len(firsts)  # groups differ
    for row, spec in zip(SEQ, specs, strict=True):
        assert spec.prefix_block_ids[:shared] == firsts[row.group]
    own = [b for spec in specs for b in spec.prefix_block_ids[shared:]]
    assert len(own) == len(set(own))  # no question block is shared


def test_round_robin_alternates_exactly(replays):
    assert replays["round_robin"].routed == tuple(i % 2 for i in range(len(SEQ)))


def test_cache_aware_keeps_every_group_on_one_box(replays):
    placed = groups_on(SEQ, replays["cache_aware"].routed)
    assert len(placed) == 5 and all(len(boxes) == 1 for boxes in placed.values())


@pytest.mark.parametrize("policy", ["round_robin", "cache_aware"])
def test_follow_on_requests_hit_their_groups_prefix(replays, policy):
    """Each box's hits are the shared prefix of every follow-on request whose group's prefix
    was already prefilled there at its arrival, and nothing beyond its follow-on requests."""
    result = replays[policy]
    ready = prefix_ready(SEQ, result)
    expected = expected_hits(SEQ, result.routed)
    for box in (0, 1):
        mine = [i for i, b in enumerate(result.routed) if b == box]
        n_ready = sum(ready[i] is True for i in mine)
        follow_ons = sum(expected[i] > 0 for i in mine)
        assert n_ready > 0
        assert (SHARED_PREFIX_TOKENS * n_ready <= result.cached_tokens[box]
                <= SHARED_PREFIX_TOKENS * follow_ons)


def test_cache_aware_hits_more_than_round_robin(replays):
    assert sum(replays["cache_aware"].cached_tokens) > sum(replays["round_robin"].cached_tokens)


def test_the_live_placement_of_groups_is_recovered_from_prompt_totals():
    assert live_groups_by_replica(SEQ, [574, 2256]) == ((4,), (0, 1, 2, 3))
    with pytest.raises(UserError, match="0 placements"):
        live_groups_by_replica(SEQ, [575, 2255])


def test_a_sequence_without_the_cached_columns_is_refused(tmp_path):
    path = tmp_path / "seq.csv"
    path.write_text("position,request,group,prompt_tokens,output_tokens\n0,0,0,140,8\n")
    with pytest.raises(UserError, match="cached_round_robin"):
        read_live_sequence(path)
