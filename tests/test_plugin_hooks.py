"""The plugin's apply hooks on fake scheduler objects (no SGLang): holds, merge-back, chunk
override, fault isolation. The live tests check the same against the real scheduler."""

from __future__ import annotations

import pytest

from ppsched.sglang_patch import hooks
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.state import PluginState, PpschedDecision


class Req:
    def __init__(self, rid, done=False):
        self.rid = rid
        self.origin_input_ids = [1] * 8
        self.output_ids = [1, 2]
        self.to_finish = None
        self._done = done

    def finished(self):
        return self._done


class Batch:
    def __init__(self, reqs):
        self.reqs = list(reqs)
        self.batch_is_full = True
        self.multimodal_inputs = None

    def is_empty(self):
        return not self.reqs

    def filter_batch(self, keep_indices):
        self.reqs = [self.reqs[i] for i in keep_indices]

    def merge_batch(self, other):
        self.reqs = self.reqs + other.reqs


class Plan:
    def __init__(self, batch):
        self.batch_to_run = batch


class Sched:
    def __init__(self):
        self.chunked_prefill_size = 128
        self.chunked_req = None
        self.seen_chunk = None

    def _reqs_finishing_inflight(self, batch):
        return []

    def _build_hisparse_decode_batch(self, reqs):
        return Batch(reqs)


@pytest.fixture
def state(tmp_path, monkeypatch):
    st = PluginState(cfg=PluginConfig(chunk="static:16"), rank=1, pp_size=2, launch_chunk=128,
                     controller=None, trimmer=None,
                     log=DecisionLog(str(tmp_path / "log.jsonl"), 1))
    monkeypatch.setattr(hooks, "STATE", st)
    return st


def decode_orig(sched, batch):
    return ("decoded", [r.rid for r in batch.reqs])


def test_hold_splits_and_merges_back(state):
    sched = Sched()
    batch = Batch([Req("a"), Req("b"), Req("c")])
    state.slot = 1
    state.pending = PpschedDecision(0, 1, hold_rids=("b", "zz"))
    assert hooks._around_decode(decode_orig, sched, batch) == ("decoded", ["a", "c"])
    assert [r.rid for r in state.held[1].reqs] == ["b"]
    assert hooks._after_drained(True, sched) is False  # held requests keep the loop busy
    inflight = hooks._after_inflight([batch], sched)
    assert state.held[1] in inflight
    # The slot's next turn: the held request is back before anything else runs.
    state.pending = None

    def next_orig(sched, running_batch, last_batch):
        return [r.rid for r in running_batch.reqs]

    assert hooks._around_next_batch(next_orig, sched, running_batch=batch,
                                    last_batch=None) == ["a", "c", "b"]
    assert not state.held and hooks._after_drained(True, sched) is None


def test_held_batch_keeps_per_request_lists_for_merge(state):
    sched = Sched()
    batch = Batch([Req("a"), Req("b"), Req("c")])
    batch.multimodal_inputs = ["ma", "mb", "mc"]
    state.pending = PpschedDecision(0, 0, hold_rids=("b",))
    hooks._around_decode(decode_orig, sched, batch)
    assert state.held[0].multimodal_inputs == ["mb"]
    running = Batch([Req("d")])
    running.multimodal_inputs = ["md"]
    held = Batch([Req("e")])
    hooks._align_for_merge(running, held)
    assert held.multimodal_inputs == [None]


def test_held_batch_replaces_an_empty_running_batch(state):
    held = Batch([Req("x")])
    state.held[0] = held
    state.slot = 0
    got = hooks._around_next_batch(lambda s, running_batch, last_batch: running_batch,
                                   Sched(), running_batch=Batch([]), last_batch=None)
    assert got is held


def test_never_hold_all_nor_aborting_nor_finished(state):
    sched = Sched()
    state.slot = 0
    state.pending = PpschedDecision(0, 0, hold_rids=("a", "b"))
    assert hooks._around_decode(decode_orig, sched, Batch([Req("a"), Req("b")])) == \
        ("decoded", ["a", "b"])
    assert not state.held
    aborting, done = Req("a"), Req("b", done=True)
    aborting.to_finish = "abort"
    batch = Batch([aborting, done, Req("c")])
    hooks._around_decode(decode_orig, sched, batch)
    assert not state.held


def test_chunk_override_is_restored(state):
    sched = Sched()
    state.pending = PpschedDecision(0, 0, chunk=32)

    def prefill(s, running_batch):
        s.seen_chunk = s.chunked_prefill_size
        b = Batch([Req("p")])
        b.extend_num_tokens = 32
        return Plan(b)

    hooks._around_prefill(prefill, sched, Batch([]))
    assert sched.seen_chunk == 32 and sched.chunked_prefill_size == 128
    state.active = False  # after a fallback the launch chunk is used
    hooks._around_prefill(prefill, sched, Batch([]))
    assert sched.seen_chunk == 128
    assert state.log.counts["chunk_applied"] == 1


def test_apply_error_falls_back_once(state):
    class Broken(Sched):
        def _build_hisparse_decode_batch(self, reqs):
            raise RuntimeError("boom")

    state.pending = PpschedDecision(0, 0, hold_rids=("a",))
    out = hooks._around_decode(decode_orig, Broken(), Batch([Req("a"), Req("b")]))
    assert out == ("decoded", ["a", "b"])  # served anyway, nothing held
    assert not state.active and state.log.counts["fallbacks"] == 1
    hooks._around_decode(decode_orig, Broken(), Batch([Req("a"), Req("b")]))
    assert state.log.counts["fallbacks"] == 1


def test_relayed_fallback_deactivates(state):
    state.iteration = 4
    hooks._on_decision(PpschedDecision(4, 0, fallback=True, reason="ValueError()"))
    assert not state.active and state.pending.fallback
