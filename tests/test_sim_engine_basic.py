"""Engine semantics on a fake cost model: timing, chunking, slots, KV, retraction, policies."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_sim_engine_fakes import FakeCost, specs

from ppsched.core.policy import ChunkDecision, TrimDecision
from ppsched.experiments.run_config import RunConfig
from ppsched.sim import simulate


def run(rows, *, cost=None, **cfg):
    cfg.setdefault("chunk", "static:512")
    return simulate(RunConfig(**cfg), specs(rows), cost_model=cost or FakeCost())


def test_single_request_timing_is_stages_links_and_return():
    cost = FakeCost()
    res = run([(1.0, 100, 3)], cost=cost)
    rec = res.records[0]
    stage = cost.stage_ms(0, _shape(prefill=100)) / 1000
    expected = 1.0 + 0.0002 + 4 * stage + 3 * 0.0005 + 0.0005
    assert rec.first_token_s == pytest.approx(expected)
    assert rec.finish_s > rec.first_token_s
    it = res.iterations
    assert len(it) == 4 * 3  # one prefill + two decode microbatches, four stages each
    assert list(it["kind"].iloc[::4]) == ["prefill", "decode", "decode"]
    # decodes live in the slot where the prefill ran
    assert it["slot"].nunique() == 1 and rec.slot == it["slot"].iloc[0]


def _shape(prefill=0, decodes=0, ctx=0):
    from ppsched.core.batch import BatchShape
    return BatchShape(prefill=((0, prefill),) if prefill else (), decode_count=decodes,
                      decode_ctx_sum=ctx)


def test_chunked_prompt_goes_to_consecutive_slots_and_decodes_in_the_last():
    res = run([(0.0, 1300, 4)], chunk="static:512")
    pre = res.iterations[(res.iterations["stage"] == 0) & (res.iterations["kind"] == "prefill")]
    assert list(pre["prefill_tokens"]) == [512, 512, 276]
    assert list(pre["prefix_tokens"]) == [0, 512, 1024]
    assert list(pre["slot"]) == [0, 1, 2]
    # chunks pipeline: chunk 2 is launched before chunk 1 has left the last stage
    last = res.iterations[res.iterations["stage"] == 3]
    assert pre["start_s"].iloc[1] < last["end_s"].iloc[0]
    dec = res.iterations[(res.iterations["stage"] == 0) & (res.iterations["kind"] == "decode")]
    assert set(dec["slot"]) == {2} and res.records[0].slot == 2
    assert len(dec) == 3  # 4 output tokens: first from the prefill, 3 decode steps


def test_short_microbatch_in_a_round_of_long_ones_leaves_a_bubble_on_every_stage():
    # slots get 2048, 128, 2048, 2048; slot 0's next batch waits for its result, so each stage
    # idles for about T(2048) - T(128) before it: the bubble emerges from the slot dependency.
    cost = FakeCost()
    rows = [(0.0, 2048, 1), (1e-4, 128, 1)] + [(3e-4 + 1e-5 * i, 2048, 1) for i in range(4)]
    res = run(rows, cost=cost, chunk="static:2048")
    it = res.iterations.set_index(["mb", "stage"])
    assert list(it.xs(0, level="stage")["prefill_tokens"])[:5] == [2048, 128, 2048, 2048, 2048]
    idle = [float(it.loc[(4, s), "idle_before_s"]) for s in range(4)]
    gap = (cost.stage_ms(0, _shape(prefill=2048)) - cost.stage_ms(0, _shape(prefill=128))) / 1e3
    print("idle before slot 0's 2nd microbatch per stage (ms):", [round(1e3 * x, 2) for x in idle],
          "T(2048)-T(128) =", round(1e3 * gap, 2))
    for value in idle:
        assert gap * 0.9 < value < gap * 1.1
    assert res.summary["bubble_fraction"] > 0


def test_prompt_that_can_never_fit_is_rejected_with_reason():
    res = run([(0.0, 5000, 10), (0.1, 100, 2)], cost=FakeCost(capacity=4000))
    assert res.records[0].rejected and "KV capacity" in res.records[0].reject_reason
    assert not res.records[1].rejected and math.isfinite(res.records[1].finish_s)
    assert res.summary["rejected"] == 1 and res.summary["completed"] == 1


def test_kv_pressure_retracts_and_everything_still_completes():
    rows = [(0.001 * i, 300, 400) for i in range(24)]
    res = run(rows, cost=FakeCost(capacity=4000), chunk="static:1024")
    print("retractions:", res.summary["retractions"], "KV peak:", res.summary["kv_peak_tokens"])
    assert res.summary["retractions"] > 0
    assert res.summary["completed"] == 24
    assert res.summary["kv_peak_tokens"] <= 4000
    assert sum(r.retractions for r in res.records) == res.summary["retractions"]


def test_max_running_and_per_slot_cap_limit_admission():
    rows = [(0.0, 10, 50) for _ in range(40)]
    res = run(rows, max_running_requests=16, pp_max_micro_batch_size=3)
    dec = res.iterations[(res.iterations["stage"] == 0)]
    assert dec["decode_reqs"].max() <= 3
    assert res.summary["completed"] == 40


def test_deterministic_for_a_seed():
    rows = [(0.01 * i, 50 + 37 * i % 900, 1 + 13 * i % 60) for i in range(60)]
    a, b = run(rows), run(rows)
    assert a.iterations.equals(b.iterations)
    assert [r.finish_s for r in a.records] == [r.finish_s for r in b.records]


def test_mixed_chunk_puts_decodes_into_prefill_batches_within_budget():
    rows = [(0.0, 64, 40)] + [(0.02 * i, 700, 2) for i in range(1, 8)]
    res = run(rows, mixed_chunk=True, chunk="static:256")
    mixed = res.iterations[(res.iterations["kind"] == "mixed") & (res.iterations["stage"] == 0)]
    assert len(mixed) > 0
    assert ((mixed["prefill_tokens"] + mixed["decode_reqs"]) <= mixed["chunk"]).all()
    off = run(rows, mixed_chunk=False, chunk="static:256")
    assert (off.iterations["kind"] != "mixed").all()


def test_tp_runs_one_batch_at_a_time_alternating_prefill_and_decode():
    rows = [(0.0, 100, 5), (0.0, 3000, 2)]
    res = run(rows, parallel="tp4", chunk="static:1024")
    it = res.iterations
    assert set(it["stage"]) == {0} and set(it["slot"]) == {0}
    assert (it["start_s"].to_numpy()[1:] >= it["end_s"].to_numpy()[:-1]).all()
    # while the long prompt is chunked, prefill batches run and the decode waits (no mixing)
    assert list(it["kind"][:3]) == ["prefill", "prefill", "prefill"]


class Recorder:
    """Static chunk that records what it saw (for causality and snapshot checks)."""

    name = "recorder"

    def __init__(self, chunk=256):
        self.chunk = chunk
        self.decides: list = []
        self.observed: list = []

    def decide(self, snap):
        self.decides.append(snap)
        return ChunkDecision(self.chunk, "rec", (("q", float(snap.queued_requests)),),
                             predicted_stage_ms=7.5)

    def observe(self, m):
        self.observed.append((len(self.decides), m))


@pytest.mark.pure
def test_controller_gets_every_past_measurement_and_no_future_one(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr("ppsched.sim.engine.simulate.build_chunk_controller",
                        lambda spec, ctx, **kw: rec)
    rows = [(0.005 * i, 300 + 10 * i, 8) for i in range(30)]
    res = run(rows)
    assert rec.decides and rec.observed
    it = res.iterations
    stage0_end = np.sort(it.loc[it["stage"] == 0, "end_s"].to_numpy())
    for i, snap in enumerate(rec.decides):
        seen = [m for n, m in rec.observed if n <= i]  # delivered before decision i
        assert all(m.now_s <= snap.now_s for m in seen)  # nothing from the future
        assert len(seen) == int(np.searchsorted(stage0_end, snap.now_s, side="right"))
        assert snap.recent_stage_ms == tuple(m.measured_ms for m in seen)[-len(
            snap.recent_stage_ms):] if snap.recent_stage_ms else not seen
    for snap in rec.decides:
        assert snap.queued_prompt_tokens == sum(q.remaining_prompt_tokens for q in snap.queue) + (
            snap.chunked.remaining_prompt_tokens if snap.chunked else 0)
    assert len(rec.observed) == res.summary["microbatches"]
    assert all(m.stage == 0 for _, m in rec.observed)
    pre = res.iterations[res.iterations["kind"] == "prefill"]
    assert (pre["predicted_ms"] == 7.5).all()
    assert res.iterations[res.iterations["kind"] == "decode"]["predicted_ms"].isna().all()


class HoldNewest:
    """Holds the newest request of any slot with more than 2 decodes, never twice in a row."""

    name = "hold-newest"

    def select(self, snap):
        members = list(snap.running) + list(snap.held)
        ids = [r.req_id for r in members]
        if len(ids) <= 2:
            return TrimDecision(tuple(ids))
        victim = max((r for r in snap.running), key=lambda r: r.arrival_s, default=None)
        if victim is None:
            return TrimDecision(tuple(ids))
        return TrimDecision(tuple(i for i in ids if i != victim.req_id), (victim.req_id,),
                            "test")


@pytest.mark.pure
def test_trimmer_holds_keep_kv_resume_and_are_logged(monkeypatch):
    monkeypatch.setattr("ppsched.sim.engine.simulate.build_decode_trimmer",
                        lambda mode, ctx, k, config: HoldNewest())
    rows = [(0.0, 20, 30) for _ in range(12)]
    res = run(rows, ds="off")
    trims = [d for d in res.decisions if d["type"] == "trim"]
    assert trims and res.summary["ds_holds"] == sum(len(d["held_ids"]) for d in trims)
    assert res.summary["ds_max_consecutive_holds"] == 1
    assert res.summary["completed"] == 12
    for d in trims:
        rows_mb = res.iterations[(res.iterations["mb"] == d["mb"]) & (res.iterations["stage"] == 0)]
        assert int(rows_mb["decode_reqs"].iloc[0]) == d["run"]


def test_real_delay_scheduling_trimmer_holds_within_its_bound():
    rows = [(0.005 * i, 10 + 37 * i % 190, 50 + 53 * i % 350) for i in range(600)]
    res = run(rows, ds="on", ds_max_consecutive=2, cost=FakeCost(capacity=200_000))
    s = res.summary
    print("DS holds:", s["ds_holds"], "max consecutive:", s["ds_max_consecutive_holds"])
    assert s["completed"] == 600
    assert s["ds_holds"] > 0 and 1 <= s["ds_max_consecutive_holds"] <= 2


class LaunchRecorder(Recorder):
    """Also records every launch it is told of, with how many decisions preceded it."""

    def __init__(self, chunk=256):
        super().__init__(chunk)
        self.launches: list = []

    def observe_launch(self, launch):
        self.launches.append((len(self.decides), launch))


@pytest.mark.pure
def test_controller_is_told_every_launch_as_it_starts(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr("ppsched.sim.engine.simulate.build_chunk_controller",
                        lambda spec, ctx, **kw: rec)
    rows = [(0.005 * i, 300 + 10 * i, 8) for i in range(30)]
    res = run(rows)
    it = res.iterations
    stage0 = it[it["stage"] == 0].sort_values("mb")
    assert len(rec.launches) == res.summary["microbatches"] == len(stage0)
    told = [launch for _, launch in rec.launches]
    assert [x.slot for x in told] == stage0["slot"].tolist()
    assert [x.prefill_tokens for x in told] == stage0["prefill_tokens"].tolist()
    assert [x.decode_reqs for x in told] == stage0["decode_reqs"].tolist()
    # told at the launch, which stage 0 starts at or after (it may still be busy)
    assert all(x.now_s <= s + 1e-12 for x, s in zip(told, stage0["start_s"], strict=True))
    # and never ahead of the decisions that follow it
    for n, launch in rec.launches:
        assert all(snap.now_s >= launch.now_s for snap in rec.decides[n:])
