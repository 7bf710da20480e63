"""The learner thread (sglang_patch/learner.py): stages are learned in order, each logged with
ALP's prediction from before it was learned, decisions never run during an update, and a failing
update stops learning, not serving."""

from __future__ import annotations

import json
import threading
import time

from ppsched.core.batch import BatchShape
from ppsched.sglang_patch import stage_feed
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.device_timing import CPU_WALL, FinishedStage
from ppsched.sglang_patch.learner import StageLearner
from ppsched.sglang_patch.stage_feed import LaunchedStage
from ppsched.sglang_patch.state import PluginState


class Predictor:
    """Predicts the mean of what it learned so far (1.0 before anything)."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def predict(self, shape: BatchShape) -> float:
        return sum(self.seen) / len(self.seen) if self.seen else 1.0


class Controller:
    name = "fake"

    def __init__(self, lock_to_check: list | None = None) -> None:
        self.predictor = Predictor()
        self.lock_to_check = lock_to_check

    def observe(self, m) -> None:
        if self.lock_to_check:
            assert self.lock_to_check[0].locked()  # learning only under the lock
        time.sleep(0.001)  # an update that takes a while
        self.predictor.seen.append(m.measured_ms)


def state(tmp_path, controller) -> PluginState:
    return PluginState(cfg=PluginConfig(chunk="static:16"), rank=0, pp_size=2, launch_chunk=64,
                       controller=controller, trimmer=None,
                       log=DecisionLog(str(tmp_path / "log.jsonl"), 0))


def finished(ms: float, i: int) -> FinishedStage:
    shape = BatchShape(((0, 16),), 2, 80)
    return FinishedStage(LaunchedStage(i, i % 2, shape, None, False, 2), ms, CPU_WALL)


def stage_records(st, tmp_path) -> list[dict]:
    st.log.flush()
    rows = map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines())
    return [r for r in rows if r["kind"] == "stage"]


def test_stages_are_learned_in_order_each_logged_with_the_prediction_before_it(tmp_path):
    st = state(tmp_path, Controller())
    stage_feed.attach_learner(st)
    assert st.learner.background
    times = [10.0, 20.0, 30.0, 40.0]
    for i, ms in enumerate(times):
        stage_feed.record(st, finished(ms, i))
    st.learner.drain()
    assert st.controller.predictor.seen == times
    recs = stage_records(st, tmp_path)
    assert [r["measured_ms"] for r in recs] == times
    # before each stage: the mean of the earlier ones (1.0 before the first)
    assert [r["alp_ms"] for r in recs] == [1.0, 10.0, 15.0, 20.0]
    assert all(r["learned"] for r in recs)
    assert list(st.recent_stage_ms) == times  # on the turn, not deferred


def test_the_background_thread_learns_without_being_asked(tmp_path):
    st = state(tmp_path, Controller())
    stage_feed.attach_learner(st)
    stage_feed.record(st, finished(5.0, 0))
    deadline = time.monotonic() + 5.0
    while not st.controller.predictor.seen and time.monotonic() < deadline:
        time.sleep(0.005)
    assert st.controller.predictor.seen == [5.0]
    assert st.learner.busy_s > 0


def test_decisions_and_updates_exclude_each_other(tmp_path):
    lock: list = []
    learner = StageLearner(Controller(lock), lambda *a: None, lambda exc: None,
                           background=False)
    lock.append(learner.lock)
    shape = BatchShape(((0, 16),), 2, 80)
    from ppsched.core.snapshots import StageMeasurement

    holder = threading.Thread(target=lambda: learner.submit(
        shape, StageMeasurement(0.0, 0, 0, shape, 3.0), ()))
    with learner.lock:  # a decision in progress: the update waits for it
        holder.start()
        time.sleep(0.05)
        assert learner.controller.predictor.seen == []
    holder.join(5.0)
    assert learner.controller.predictor.seen == [3.0]


def test_a_failing_update_stops_learning_not_logging(tmp_path):
    class Broken(Controller):
        def observe(self, m) -> None:
            raise RuntimeError("boom")

    st = state(tmp_path, Broken())
    stage_feed.attach_learner(st, background=False)
    stage_feed.record(st, finished(7.0, 0))
    stage_feed.record(st, finished(8.0, 1))
    assert st.learner.broken and st.log.counts["errors"] == 1
    recs = stage_records(st, tmp_path)
    assert [r["measured_ms"] for r in recs] == [7.0, 8.0]
    assert recs[1]["alp_ms"] is None  # learning stopped: no prediction claimed either


def test_only_the_deciding_rank_gets_a_learner(tmp_path):
    st = state(tmp_path, Controller())
    st.rank = 1
    stage_feed.attach_learner(st)
    assert st.learner is None
    st.rank, st.controller = 0, None
    stage_feed.attach_learner(st)
    assert st.learner is None
