"""Router policy semantics: round robin order, cache_aware's match threshold and imbalance
switch, power_of_two's comparison of polled (stale) token loads."""

from __future__ import annotations

import pytest

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.fleet.prefix_tree import PrefixTree
from ppsched.fleet.routers import (
    BLOCK_TOKENS,
    RouterSettings,
    build_router,
    parse_router_policies,
)


def spec(rid: int, blocks: tuple[int, ...] = (), prompt: int | None = None) -> RequestSpec:
    tokens = prompt if prompt is not None else max(1, len(blocks)) * BLOCK_TOKENS
    return RequestSpec(rid, 0.0, tokens, 8, blocks)


def router(policy: str, workers: int, seed: int = 0, **kw):
    return build_router(workers, RouterSettings(policy, **kw), seed)


def test_round_robin_cycles_through_every_worker_in_order_whatever_the_load():
    rr = router("round_robin", 3)
    loads = [100, 0, 0]
    assert [rr.choose(spec(i), loads, loads) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_random_router_is_seeded_and_uses_every_worker():
    picks = [router("random", 4, seed=7).choose(spec(0), [0] * 4, [0] * 4) for _ in range(3)]
    assert len(set(picks)) == 1  # same seed, same first draw
    rnd = router("random", 4, seed=7)
    assert {rnd.choose(spec(i), [0] * 4, [0] * 4) for i in range(200)} == {0, 1, 2, 3}


def test_prefix_tree_reports_the_deepest_match_and_its_holders():
    tree = PrefixTree()
    tree.insert((1, 2, 3), 0)
    tree.insert((1, 2), 1)
    assert tree.match((1, 2, 3, 4)) == (3, frozenset({0}))
    assert tree.match((1, 2, 9)) == (2, frozenset({0, 1}))
    assert tree.match((5,)) == (0, frozenset())


def test_cache_aware_goes_to_the_deepest_match_above_the_threshold():
    ca = router("cache_aware", 3)
    loads = [0, 5, 0]
    ca.tree.insert((1, 2, 3, 4), 1)
    # 3 of 4 blocks match on worker 1 (75% > 30%): worker 1 despite its higher load
    assert ca.choose(spec(0, (1, 2, 3, 9)), loads, loads) == 1
    assert ca.reasons["prefix"] == 1


def test_cache_aware_below_the_threshold_picks_the_least_loaded():
    ca = router("cache_aware", 3)
    ca.tree.insert((1,), 1)
    loads = [4, 2, 1]
    # 1 of 4 blocks (25% <= 30%): the match is ignored, worker 2 has the fewest in flight
    assert ca.choose(spec(0, (1, 7, 8, 9)), loads, loads) == 2
    assert ca.reasons["least_loaded"] == 1
    # and the request's prefix is now recorded on the chosen worker
    assert ca.tree.match((1, 7, 8, 9)) == (4, frozenset({2}))


def test_cache_aware_match_rate_is_measured_on_the_prompt_tokens():
    ca = router("cache_aware", 2)
    ca.tree.insert((1,), 1)
    # one block of 512 matched of a 1200-token prompt: 43% > 30%
    assert ca.choose(spec(0, (1, 2, 3), prompt=1200), [0, 3], [0, 0]) == 1
    # of a 2000-token prompt: 26%
    assert ca.choose(spec(1, (1, 5, 6, 7), prompt=2000), [0, 3], [0, 0]) == 0


def test_cache_aware_imbalance_switch_needs_both_thresholds():
    def choice(loads: list[int]) -> tuple[int, str]:
        ca = router("cache_aware", 2)
        ca.tree.insert((1, 2), 1)  # worker 1 holds the whole prompt
        return ca.choose(spec(0, (1, 2)), loads, [0, 0]), next(iter(ca.reasons))

    # max - min = 70 > 64 and 100 > 1.5 x 30: imbalanced, the least-loaded wins over the match
    assert choice([30, 100]) == (0, "imbalance")
    # max - min = 70 > 64 but 220 < 1.5 x 150: balanced, the full match wins (more loaded)
    assert choice([150, 220]) == (1, "prefix")
    # 100 > 1.5 x 50 but max - min = 50 <= 64: balanced
    assert choice([50, 100]) == (1, "prefix")


def test_cache_aware_without_prefix_ids_is_least_loaded():
    ca = router("cache_aware", 3)
    assert ca.choose(spec(0), [3, 1, 2], [0, 0, 0]) == 1
    assert ca.choose(spec(1), [0, 1, 2], [0, 0, 0]) == 0


def test_power_of_two_compares_the_polled_loads_not_the_current_ones():
    p2 = router("power_of_two", 2, seed=3)
    in_flight = [0, 50]  # what is true now
    polled = [900, 10]  # what the last poll said
    assert all(p2.choose(spec(i), in_flight, polled) == 1 for i in range(20))
    p2 = router("power_of_two", 2, seed=3)
    assert all(p2.choose(spec(i), in_flight, [10, 900]) == 0 for i in range(20))


def test_power_of_two_picks_the_lighter_of_two_sampled_workers():
    p2 = router("power_of_two", 3, seed=1)
    polled = [5, 1, 9]
    picks = [p2.choose(spec(i), [0] * 3, polled) for i in range(300)]
    assert 2 not in picks  # worker 2 is never lighter than the other sampled one
    assert picks.count(1) > picks.count(0)  # worker 1 wins 2 of the 3 pairs


@pytest.mark.parametrize("bad", [dict(policy="least_load"), dict(cache_threshold=1.5),
                                 dict(balance_abs_threshold=-1),
                                 dict(balance_rel_threshold=0.5), dict(load_poll_s=0.0)])
def test_bad_router_settings_name_the_value(bad):
    with pytest.raises(UserError, match=repr(next(iter(bad.values())))):
        RouterSettings(**bad)


def test_router_policy_lists_are_validated():
    assert parse_router_policies("round_robin, cache_aware") == ("round_robin", "cache_aware")
    assert len(parse_router_policies("all")) == 4
    with pytest.raises(UserError, match="'manual'"):
        parse_router_policies("manual")
    with pytest.raises(UserError, match="fleet of 0"):
        router("random", 0)
