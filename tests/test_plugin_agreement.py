"""Start-up agreement (every rank enabled alike, or off everywhere), the version guard, and the
metrics that exist from start-up at 0. No SGLang: a dict plays torch.distributed's store."""

from __future__ import annotations

import pytest

from ppsched.sglang_patch.agreement import VERDICT, Agreement, fingerprint
from ppsched.sglang_patch.version_guard import EXPECTED, SUPPORTED_SGLANG, forced, mismatches


class DictStore:
    def __init__(self):
        self.data: dict[str, bytes] = {}
        self.calls = 0

    def set(self, key, value):
        self.data[key] = value.encode()

    def get(self, key):
        return self.data[key]

    def check(self, keys):
        self.calls += 1
        return all(k in self.data for k in keys)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def ranks(n, store, clock, timeout=10.0):
    return [Agreement(store, r, n, r == 0, timeout_s=timeout, poll_every_s=0.5, clock=clock)
            for r in range(n)]


def test_all_ok_same_settings_turns_on_everywhere():
    store, clock = DictStore(), Clock()
    a = ranks(3, store, clock)
    for ag in a:
        ag.report(True, "abc")
    assert a[0].poll() is True and store.data[VERDICT] == b"on"
    clock.t += 1.0
    assert a[1].poll() is True and a[2].poll() is True


def test_decider_waits_for_silent_rank_then_turns_off_at_timeout():
    store, clock = DictStore(), Clock()
    a = ranks(2, store, clock, timeout=10.0)
    a[0].report(True, "abc")  # rank 1 has no plugin: it never reports
    assert a[0].poll() is None
    clock.t = 5.0
    assert a[0].poll() is None
    clock.t = 10.5
    assert a[0].poll() is False and "rank(s) 1 never reported" in a[0].reason
    assert store.data[VERDICT].startswith(b"off:")


def test_one_failed_rank_turns_every_rank_off_with_its_reason():
    store, clock = DictStore(), Clock()
    a = ranks(2, store, clock)
    a[0].report(True, "abc")
    a[1].report(False, "PP rank 1: no such profile")
    assert a[0].poll() is False and "no such profile" in a[0].reason
    clock.t += 1
    assert a[1].poll() is False and "no such profile" in a[1].reason


def test_different_settings_on_two_nodes_turn_off():
    store, clock = DictStore(), Clock()
    a = ranks(2, store, clock)
    a[0].report(True, fingerprint({"chunk": "greedy", "decision_log": "/a"}))
    a[1].report(True, fingerprint({"chunk": "predictive", "decision_log": "/a"}))
    assert a[0].poll() is False and "different plugin settings" in a[0].reason


def test_log_path_may_differ_per_node():
    assert fingerprint({"chunk": "greedy", "decision_log": "/node0.jsonl"}) == \
        fingerprint({"chunk": "greedy", "decision_log": "/node1.jsonl"})


def test_polls_are_rate_limited_and_free_once_decided():
    store, clock = DictStore(), Clock()
    a = ranks(2, store, clock)
    a[0].report(True, "abc")
    a[0].poll()
    calls = store.calls
    for _ in range(100):
        assert a[0].poll() is None  # same instant: no store round trip
    assert store.calls == calls
    a[1].report(True, "abc")
    clock.t = 0.6
    assert a[0].poll() is True
    calls = store.calls
    a[0].poll()
    assert store.calls == calls


def test_no_store_acts_only_alone():
    alone = Agreement(None, 0, 1, True)
    alone.report(True, "abc")
    assert alone.poll() is True
    many = Agreement(None, 0, 2, True)
    many.report(True, "abc")
    assert many.poll() is False and "no store" in many.reason


def test_version_guard_matches_the_expected_shapes():
    def resolve(target):
        params = EXPECTED[target]

        def fn(*a):
            return None
        import inspect
        fn.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
        return fn

    assert mismatches(SUPPORTED_SGLANG, resolve) == []
    found = mismatches("0.6.0", resolve)
    assert len(found) == 1 and "sglang 0.6.0" in found[0]


def test_version_guard_names_a_reshaped_and_a_missing_function():
    target = next(t for t in EXPECTED if t.endswith("update_running_batch"))
    gone = next(t for t in EXPECTED if t.endswith("_pull_raw_reqs"))

    def resolve(t):
        if t == gone:
            raise AttributeError(t)

        def reshaped(self, batch, extra):
            return None

        def same(*a):
            return None
        if t == target:
            return reshaped
        import inspect
        same.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in EXPECTED[t]])
        return same

    found = mismatches(SUPPORTED_SGLANG, resolve)
    assert len(found) == 2
    assert any("update_running_batch(self, batch, extra) expected (self, batch)" in f
               for f in found)
    assert any("_pull_raw_reqs" in f and "missing" in f for f in found)


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("", False),
                                             ("0", False)])
def test_force_env(value, expected):
    assert forced({"PPSCHED_FORCE": value}) is expected


def test_counters_and_gauge_exist_from_start_at_zero():
    pytest.importorskip("prometheus_client")
    from prometheus_client import REGISTRY, generate_latest

    from ppsched.sglang_patch.decision_log import DecisionLog
    from ppsched.sglang_patch.metrics import COUNTERS

    log = DecisionLog(None, 7)
    text = generate_latest(REGISTRY).decode()
    for name in COUNTERS:
        assert f'ppsched_{name}_total{{pp_rank="7"}} 0.0' in text, name
    assert 'ppsched_enabled{pp_rank="7"} 0.0' in text
    log.count("fallbacks")
    log.metrics.set_enabled(True)
    text = generate_latest(REGISTRY).decode()  # counts reach Prometheus at the next flush
    assert 'ppsched_fallbacks_total{pp_rank="7"} 0.0' in text
    log.flush()  # the writer thread's job, every 50 ms and at exit
    log.count("fallbacks", 2)
    log.flush()
    text = generate_latest(REGISTRY).decode()
    assert 'ppsched_fallbacks_total{pp_rank="7"} 3.0' in text
    assert 'ppsched_enabled{pp_rank="7"} 1.0' in text
    assert log.counts["fallbacks"] == 3
