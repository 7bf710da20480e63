"""The live router test's pure parts, without SGLang: the shared-prefix sequence, sums over
Prometheus text, router arguments, and the failover figures from a scripted probe."""

from __future__ import annotations

import csv
import json

import pytest

from ppsched.sglang_patch.router_bench import (
    ProbeResult,
    SharedPrefixSpec,
    prom_sum,
    write_custom_dataset,
)
from ppsched.sglang_patch.router_report import failover_figures, write_live_router_csvs
from ppsched.sglang_patch.router_server import RouterSpec

DEAD, ALIVE = "http://127.0.0.1:2", "http://127.0.0.1:1"


def test_sequence_groups_share_a_prefix_and_every_prompt_has_its_own_length():
    spec = SharedPrefixSpec(groups=3, per_group=2, prefix_words=5, question_base=2)
    rows = spec.rows()
    assert [r.group for r in rows] == [0, 1, 2, 0, 1, 2]
    prefix = {g: [r.text.split()[:5] for r in rows if r.group == g] for g in range(3)}
    assert all(a == b for a, b in prefix.values())
    assert prefix[0][0] != prefix[1][0]
    lengths = [len(r.text.split()) for r in rows]
    assert lengths == [5 + 2 + i for i in range(6)]
    assert rows == spec.rows()  # seeded


def test_custom_dataset_is_bench_servings_conversation_format(tmp_path):
    rows = SharedPrefixSpec(groups=2, per_group=1).rows()
    lines = write_custom_dataset(rows, tmp_path / "d.jsonl").read_text().splitlines()
    assert [json.loads(x)["conversations"][0]["content"] for x in lines] == [r.text for r in rows]


@pytest.mark.parametrize("field, value", [("groups", 0), ("prefix_words", 0), ("vocab", 3)])
def test_bad_sequence_spec_names_the_value(field, value):
    with pytest.raises(ValueError, match=field):
        SharedPrefixSpec(**{field: value})


def test_prom_sum_matches_labels_and_sums_the_rest():
    text = "\n".join([
        '# HELP x y',
        'sglang:num_requests_total{is_streaming="false",model_name="m"} 1.0',
        'sglang:num_requests_total{is_streaming="true",model_name="m"} 4.0',
        'smg_worker_retries_total 7',
        'smg_worker_cb_state{worker="http://a:1"} NaN',
    ])
    assert prom_sum(text, "sglang:num_requests_total") == 5.0
    assert prom_sum(text, "sglang:num_requests_total", is_streaming="true") == 4.0
    assert prom_sum(text, "smg_worker_retries_total") == 7.0
    assert prom_sum(text, "smg_worker_cb_state", worker="http://a:1") == 0.0
    assert prom_sum(text, "absent") == 0.0


def test_router_spec_is_loopback_and_validated():
    spec = RouterSpec((ALIVE, DEAD), "cache_aware", 30000, 29000)
    args = spec.args()
    assert args[args.index("--host") + 1] == "127.0.0.1"
    assert args[args.index("--prometheus-host") + 1] == "127.0.0.1"
    with pytest.raises(ValueError, match="least_busy"):
        RouterSpec((ALIVE,), "least_busy", 30000, 29000)
    with pytest.raises(ValueError, match="worker_urls"):
        RouterSpec((), "round_robin", 30000, 29000)
    with pytest.raises(ValueError, match="prometheus_port"):
        RouterSpec((ALIVE,), "round_robin", 30000, 0)


def _page(dead_fail: int, dead_ok: int, alive_ok: int, breaker: int, retries: int) -> str:
    return "\n".join([
        f'smg_worker_cb_outcomes_total{{worker="{DEAD}",outcome="failure"}} {dead_fail}',
        f'smg_worker_cb_outcomes_total{{worker="{DEAD}",outcome="success"}} {dead_ok}',
        f'smg_worker_cb_outcomes_total{{worker="{ALIVE}",outcome="success"}} {alive_ok}',
        f'smg_worker_cb_state{{worker="{DEAD}"}} {breaker}',
        f'smg_worker_retries_total{{endpoint="generate"}} {retries}'])


def test_failover_figures_from_a_scripted_probe():
    kill = 100.0
    polls = [(99.0, _page(0, 3, 3, 0, 0)), (100.5, _page(4, 3, 6, 0, 4)),
             (101.0, _page(10, 3, 9, 1, 10)), (102.0, _page(10, 3, 12, 1, 10))]
    results = [ProbeResult(99.0, 99.1, 200, ""), ProbeResult(99.9, 100.2, 502, "cut"),
               ProbeResult(100.4, 101.0, 200, ""), ProbeResult(101.5, 101.6, 200, ""),
               ProbeResult(101.8, 101.9, 200, "")]
    f = failover_figures(results, polls, kill, DEAD, ALIVE)
    assert f["stopped_choosing_s"] == 1.0 and f["breaker_open_s"] == 1.0
    assert f["client_errors"] == 1 and f["in_flight_at_kill"] == 1
    assert f["client_error_statuses"] == "502"
    assert f["router_retries"] == 10 and f["dead_failures_seen_by_router"] == 10
    assert f["sent_after_stop"] == f["ok_after_stop"] == 2
    assert f["survivor_successes"] == 9
    assert f["max_latency_after_kill_s"] == 0.6


def test_csvs_name_each_request_by_its_prompt_length(tmp_path):
    rows = SharedPrefixSpec(groups=2, per_group=2, prefix_words=10, question_base=1).rows()
    order = [12, 11, 14, 13]  # bench_serving's send order, as prompt lengths
    served = {"sglang:num_requests_total": 2.0, "sglang:prompt_tokens_total": 24.0,
              "sglang:cached_tokens_total": 10.0}
    phase = {"result": {"input_lens": order, "cached_tokens": [0, 0, 10, 10]},
             "served": [served, served]}
    paths = write_live_router_csvs({"phases": {"cache_aware": phase}, "rows": rows,
                                    "failover": {"client_errors": 0}}, tmp_path)
    shares = list(csv.DictReader(paths[0].open()))
    assert [r["share"] for r in shares] == ["0.5", "0.5"]
    sequence = list(csv.DictReader(paths[1].open()))
    assert [int(r["request"]) for r in sequence] == [1, 0, 3, 2]
    assert [int(r["group"]) for r in sequence] == [1, 0, 1, 0]
    assert [int(r["cached_cache_aware"]) for r in sequence] == [0, 0, 10, 10]
