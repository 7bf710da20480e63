"""What the plugin reads from the serving stack: decode CUDA graphs (→ DS boundaries), the PP loop's
slots (--pp-async-batch-depth), and the accounting of decided holds that did not apply."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.errors import UserError
from ppsched.core.models import load_model_config
from ppsched.delay_sched.sources import resolve_boundaries
from ppsched.predictor.boundaries import graph_aware_boundaries
from ppsched.predictor.profile import default_profile
from ppsched.sglang_patch import holds, hooks
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.policies import build_policies, policy_context
from ppsched.sglang_patch.serving_stack import (
    graphs_from_captured,
    graphs_from_phase,
    loop_slots,
    read_decode_graphs,
)
from ppsched.sglang_patch.state import PluginState, PpschedDecision

# Recorded from SGLang 0.5.23's own objects (sglang venv): CudaGraphConfig(decode=PhaseConfig(
# backend="full", max_bs=cap, bs=generate_decode_cuda_graph_batch_sizes(args, cap))) with
# padding on and no speculative decoding, dataclasses.asdict(cfg.decode) keys backend/max_bs/bs;
# "disabled" is PhaseConfig()'s default. Cap 32 is SGLang's default on A100-40GB at TP 1.
RECORDED_DECODE_PHASE = {
    "32": {"backend": "full", "max_bs": 32, "bs": [1, 2, 4, 8, 12, 16, 24, 32]},
    "256": {"backend": "full", "max_bs": 256,
            "bs": [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120,
                   128, 136, 144, 152, 160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240,
                   248, 256]},
    "disabled": {"backend": "disabled", "max_bs": None, "bs": None},
}
QWEN = load_model_config("qwen2.5-32b")


def test_recorded_sglang_configs_read_as_graphs():
    g32 = graphs_from_phase(RECORDED_DECODE_PHASE["32"])
    assert g32.cap == 32 and g32.padded(13) == 16 and not g32.is_graph(33)
    assert graphs_from_phase(RECORDED_DECODE_PHASE["256"]).batch_sizes == \
        tuple(RECORDED_DECODE_PHASE["256"]["bs"])
    assert not graphs_from_phase(RECORDED_DECODE_PHASE["disabled"]).enabled
    # Only max_bs resolved: SGLang's default ladder to it (the same sizes it records).
    assert graphs_from_phase({"backend": "full", "max_bs": 32}) == g32
    with pytest.raises(UserError, match="neither bs nor max_bs"):
        graphs_from_phase({"backend": "full"})

    @dataclass
    class PhaseConfig:  # the fields of SGLang's cuda_graph_config.PhaseConfig that matter here
        backend: str = "disabled"
        max_bs: int | None = None
        bs: list[int] | None = None

    assert graphs_from_phase(PhaseConfig(**RECORDED_DECODE_PHASE["32"])) == g32
    assert graphs_from_phase(PhaseConfig("full", 16, [1, 2, 4, 8, 12, 16, 24, 32])).cap == 16


def test_captured_sizes_are_read_from_the_running_worker_not_guessed():
    class Worker:
        def get_decode_cuda_graph_bs(self):
            return [32, 1, 2, 4, 8, 12, 16, 24]

    class Sched:
        tp_worker = Worker()

    graphs, where = read_decode_graphs(Sched(), "cuda")
    assert graphs.cap == 32 and "get_decode_cuda_graph_bs" in where
    assert read_decode_graphs(Sched(), "cpu")[0] == DecodeGraphs.disabled()

    class Runner:
        decode_cuda_graph_capture_bs = [1, 2, 4]

    class OldSched:
        tp_worker = type("W", (), {"model_runner": Runner()})()

    assert read_decode_graphs(OldSched(), "cuda")[0].cap == 4


def test_ds_boundaries_include_the_graph_cap():
    profiled = (128, 256, 384)
    g32 = graphs_from_phase(RECORDED_DECODE_PHASE["32"])
    assert graph_aware_boundaries(profiled, g32) == (32, 128, 256, 384)
    g256 = graphs_from_phase(RECORDED_DECODE_PHASE["256"])
    assert graph_aware_boundaries(profiled, g256) == (256, 384)  # no eager steps below the cap
    assert graph_aware_boundaries(profiled, DecodeGraphs.disabled()) == profiled
    assert graph_aware_boundaries((), g32) == (32,)


def test_plugin_context_gives_ds_the_graph_cap_unless_the_user_chose():
    cfg = PluginConfig(ds="on")
    g32 = graphs_from_captured(RECORDED_DECODE_PHASE["32"]["bs"])
    ctx = policy_context(cfg, QWEN, 4, 1, 2048, g32)
    profiled = default_profile(QWEN, pp_size=4).boundaries
    assert ctx.boundaries == graph_aware_boundaries(profiled, g32)
    assert 32 in resolve_boundaries(ctx) and 32 not in profiled
    assert policy_context(cfg, QWEN, 4, 1, 2048, DecodeGraphs.disabled()).boundaries is None
    user = PluginConfig(ds="on", boundaries=(64, 128))
    assert policy_context(user, QWEN, 4, 1, 2048, g32).boundaries == (64, 128)


def test_async_batch_depth_makes_the_controller_period_the_loop_slots():
    cfg = PluginConfig(chunk="predictive", ds="on")
    ctx = policy_context(cfg, QWEN, 2, 1, 2048)
    slots = loop_slots(2, 1)
    assert slots == 3
    chunk, trimmer = build_policies(cfg, ctx, slots)
    assert chunk.pp_size == 3  # a request decodes once per loop of 3 microbatch turns
    # ALP keeps the true per-stage profile (half the layers per stage at PP 2, not a third).
    assert chunk.predictor.profile == default_profile(QWEN, pp_size=2)
    same, _ = build_policies(cfg, ctx, 2)
    assert same.pp_size == 2
    with pytest.raises(UserError):
        loop_slots(2, -1)


def test_snapshots_carry_the_loop_slots():
    st = PluginState(cfg=PluginConfig(ds="on"), rank=0, pp_size=2, launch_chunk=128,
                     controller=None, trimmer=None, log=DecisionLog(None, 0), loop_slots=3)
    assert st.slots == 3
    st.loop_slots = 0
    assert st.slots == 2


# ---- holds that cannot apply --------------------------------------------------------------

class Mode:
    def __init__(self, extend, mixed=False):
        self.extend, self.mixed = extend, mixed

    def is_extend(self):
        return self.extend

    def is_mixed(self):
        return self.mixed


class Plan:
    def __init__(self, batch):
        self.batch_to_run = batch


class Batch:
    def __init__(self, mode, decoding_reqs=None):
        self.forward_mode = mode
        self.decoding_reqs = decoding_reqs


@pytest.fixture
def st(tmp_path, monkeypatch):
    state = PluginState(cfg=PluginConfig(ds="on"), rank=1, pp_size=2, launch_chunk=128,
                        controller=None, trimmer=None,
                        log=DecisionLog(str(tmp_path / "log.jsonl"), 1))
    monkeypatch.setattr(hooks, "STATE", state)
    state.path = tmp_path / "log.jsonl"
    return state


def dropped(state):
    state.log.flush()  # the writer thread flushes every 50 ms; read it now
    if not state.path.exists():
        return []
    recs = map(json.loads, state.path.read_text().splitlines())
    return [r for r in recs if r["kind"] == "hold_dropped"]


@pytest.mark.parametrize("batch, reason", [
    (Batch(Mode(extend=True)), "prefill-turn"),
    (Batch(Mode(extend=True, mixed=True)), "mixed-prefill"),
    (Batch(Mode(extend=True), decoding_reqs=["r"]), "mixed-prefill"),
    (None, "no-batch"),
])
def test_a_hold_on_a_turn_without_decode_is_logged_with_why(st, batch, reason):
    st.pending = PpschedDecision(4, 1, hold_rids=("b", "a"))
    st.iteration, st.slot = 4, 1
    holds.settle(st, Plan(batch))
    (rec,) = dropped(st)
    assert rec["reason"] == reason and rec["rids"] == ["a", "b"] and rec["iteration"] == 4
    assert st.log.counts["holds_dropped"] == 1


def test_applied_or_absent_holds_log_nothing(st):
    st.pending = PpschedDecision(0, 0, hold_rids=("a",))
    holds.note(st, holds.APPLIED)
    holds.settle(st, Plan(Batch(Mode(extend=False))))
    st.pending = PpschedDecision(1, 1, chunk=64)
    holds.settle(st, Plan(Batch(Mode(extend=True))))
    assert dropped(st) == [] and st.log.counts["holds_dropped"] == 0


class Req:
    def __init__(self, rid):
        self.rid, self.to_finish = rid, None
        self.origin_input_ids, self.output_ids = [1] * 4, [1]

    def finished(self):
        return False


class DecodeBatch:
    def __init__(self, reqs):
        self.reqs = reqs
        self.forward_mode = Mode(extend=False)
        self.decoding_reqs = None


class Sched:
    def _reqs_finishing_inflight(self, batch):
        return []


def test_the_decode_hook_reports_why_it_did_not_hold(st):
    """Through the real hooks: get_next_batch_to_run → update_running_batch → settle."""
    def next_batch(sched, running_batch, last_batch):
        hooks._around_decode(lambda s, b: b, sched, running_batch)
        return Plan(running_batch)

    st.pending = PpschedDecision(0, 0, hold_rids=("a", "b"))
    hooks._around_next_batch(next_batch, Sched(), running_batch=DecodeBatch([Req("a"), Req("b")]),
                             last_batch=None)
    st.pending = PpschedDecision(1, 0, hold_rids=("zz",))
    hooks._around_next_batch(next_batch, Sched(), running_batch=DecodeBatch([Req("a")]),
                             last_batch=None)
    assert [r["reason"] for r in dropped(st)] == ["would-hold-all", "none-live"]
    assert st.log.counts["holds_dropped"] == 2 and not st.held
