"""Device-true stage timing through the run_batch hook, on a fake CUDA device (no SGLang, no GPU).

The fake forward takes wall time (a launch) while its fake GPU events report different device
times that only become readable after the fake GPU has passed them. ALP must receive exactly the
event times, only once ready, and never the launch-to-return time.
"""

from __future__ import annotations

import json
import time

import pytest

from ppsched.sglang_patch import hooks, stage_feed
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.device_timing import (
    CPU_THREAD,
    CPU_WALL,
    CUDA_EVENT,
    LAUNCH_WALL,
    EventTimer,
    WallTimer,
    device_type_of,
    forward_stream_of,
    learnable,
    timer_for,
)
from ppsched.sglang_patch.serving_stack import graphs_from_captured
from ppsched.sglang_patch.state import PluginState


class FakeGpu:
    """A stream whose clock advances only when the test says the GPU ran."""

    def __init__(self):
        self.clock_ms = 0.0  # device time the GPU has reached
        self.launched_ms = 0.0  # device time the queued work will reach
        self.events = []

    def run(self, ms: float) -> None:
        """The forward launched next takes ``ms`` of GPU time."""
        self.launched_ms += ms


class FakeEvent:
    def __init__(self, gpu: FakeGpu):
        self.gpu = gpu
        self.at = None

    def record(self, stream=None):
        self.at = self.gpu.launched_ms

    def query(self) -> bool:
        return self.at is not None and self.gpu.clock_ms >= self.at

    def elapsed_time(self, end) -> float:
        assert self.query() and end.query(), "elapsed_time read before the GPU got there"
        return end.at - self.at

    def synchronize(self):
        raise AssertionError("the scheduler must never wait for the GPU")


class FakeCudaModule:
    def __init__(self, gpu):
        self.gpu = gpu

    def Event(self, enable_timing=False):  # noqa: N802 - torch.cuda's name
        assert enable_timing
        return FakeEvent(self.gpu)

    def current_stream(self):
        return "forward-stream"


class Mode:
    def __init__(self, kind):
        self.kind = kind

    def is_decode(self):
        return self.kind == "decode"

    def is_mixed(self):
        return False

    def is_extend(self):
        return self.kind == "extend"


class Lens:
    def __init__(self, values):
        self.values = values

    def tolist(self):
        return list(self.values)


class FakeBatch:
    def __init__(self, kind, n=3):
        self.forward_mode = Mode(kind)
        self.decoding_reqs = None
        self.seq_lens_cpu = Lens([40] * n) if kind == "decode" else None
        self.prefix_lens = [0] if kind == "extend" else None
        self.extend_lens = [64] if kind == "extend" else None


class Result:
    def __init__(self, graph=False):
        self.can_run_cuda_graph = graph


class Recorder:
    name = "recorder"

    def __init__(self):
        self.seen = []

    def observe(self, m):
        self.seen.append(m.measured_ms)


@pytest.fixture
def make_state(tmp_path, monkeypatch):
    def make(device_type, timer, graphs=()):
        st = PluginState(cfg=PluginConfig(chunk="static:16"), rank=0, pp_size=2, launch_chunk=128,
                         controller=Recorder(), trimmer=None,
                         log=DecisionLog(str(tmp_path / "log.jsonl"), 0),
                         device_type=device_type, timer=timer,
                         graphs=graphs_from_captured(graphs))
        stage_feed.attach_learner(st, background=False)  # rank 0, as the plugin sets it up
        monkeypatch.setattr(hooks, "STATE", st)
        return st
    return make


def stage_records(tmp_path):
    if hooks.STATE is not None:
        hooks.STATE.log.flush()  # the writer thread flushes every 50 ms; read it now
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "stage"]


def launching_forward(gpu, gpu_ms, wall_s=0.003):
    def orig(sched, batch):
        gpu.run(gpu_ms)
        time.sleep(wall_s)  # launch-to-return: never what ALP may see
        return Result()
    return orig


def test_alp_receives_only_event_times_once_ready(make_state, tmp_path):
    gpu = FakeGpu()
    st = make_state("cuda", EventTimer(FakeCudaModule(gpu)))
    gpu_times = [41.0, 57.5, 12.25]
    for ms in gpu_times:
        hooks._around_run_batch(launching_forward(gpu, ms), object(), FakeBatch("extend"))
    assert st.controller.seen == []  # launched, the GPU has not run them: nothing is known
    assert st.timer.pending == 3
    gpu.clock_ms = 41.0 + 57.5  # the GPU finished the first two
    hooks._around_ingest(lambda sched: [], object())  # next turn polls, never waits
    assert st.controller.seen == [41.0, 57.5]
    gpu.clock_ms = gpu.launched_ms
    stage_feed.drain(st)
    assert st.controller.seen == gpu_times
    recs = stage_records(tmp_path)
    assert [r["timing"] for r in recs] == [CUDA_EVENT] * 3
    assert [r["measured_ms"] for r in recs] == gpu_times
    assert all(r["learned"] for r in recs)
    assert [r["iteration"] for r in recs] == [-1, -1, -1]  # the launch turn, not the read turn


def test_launch_time_on_cuda_is_logged_never_learned(make_state, tmp_path):
    st = make_state("cuda", timer_for("cuda", device_module=None))  # no events: launch wall
    assert st.timer.source == LAUNCH_WALL
    gpu = FakeGpu()
    hooks._around_run_batch(launching_forward(gpu, 50.0), object(), FakeBatch("extend"))
    assert st.controller.seen == [] and not st.recent_stage_ms
    (rec,) = stage_records(tmp_path)
    assert rec["timing"] == LAUNCH_WALL and rec["learned"] is False
    assert "not compute time on cuda" in rec["not_learned"]
    assert st.log.counts["stage_refused"] == 1


def test_cpu_wall_time_on_cpu_is_learned(make_state, tmp_path):
    st = make_state("cpu", timer_for("cpu"))
    hooks._around_run_batch(launching_forward(FakeGpu(), 0.0, wall_s=0.02), object(),
                            FakeBatch("decode"))
    (rec,) = stage_records(tmp_path)
    assert rec["timing"] == CPU_WALL and rec["learned"] is True
    assert len(st.controller.seen) == 1 and st.controller.seen[0] == pytest.approx(
        rec["measured_ms"], abs=1e-3) and rec["measured_ms"] >= 20.0


def test_cpu_wall_timer_on_a_cuda_device_is_refused(make_state, tmp_path):
    # A wall timer mislabelled cpu-wall on a CUDA device is still refused: the source is judged
    # against the device, not trusted.
    st = make_state("cuda", WallTimer(CPU_WALL))
    hooks._around_run_batch(launching_forward(FakeGpu(), 9.0), object(), FakeBatch("extend"))
    assert st.controller.seen == []
    assert stage_records(tmp_path)[0]["learned"] is False


def test_graph_replay_is_logged_with_padding_not_taught_to_alp(make_state, tmp_path):
    gpu = FakeGpu()
    st = make_state("cuda", EventTimer(FakeCudaModule(gpu)), graphs=(1, 2, 4, 8, 12, 16))

    def graph_forward(sched, batch):
        gpu.run(3.0)
        return Result(graph=True)

    hooks._around_run_batch(graph_forward, object(), FakeBatch("decode", n=10))
    gpu.clock_ms = gpu.launched_ms
    stage_feed.drain(st)
    (rec,) = stage_records(tmp_path)
    assert rec["cuda_graph"] is True and rec["padded_decode"] == 12 and rec["decode_count"] == 10
    assert rec["learned"] is False and "cuda-graph" in rec["not_learned"]
    assert st.controller.seen == [] and list(st.recent_stage_ms) == [3.0]


def test_a_failing_timer_stops_measuring_not_serving(make_state, tmp_path):
    class Broken(WallTimer):
        def end(self, token, payload):
            raise RuntimeError("boom")

    st = make_state("cpu", Broken())
    out = hooks._around_run_batch(lambda s, b: "result", object(), FakeBatch("extend"))
    assert out == "result" and st.timer is None and st.log.counts["errors"] == 1
    assert hooks._around_run_batch(lambda s, b: "again", object(), FakeBatch("extend")) == "again"


def test_sources_and_device_detection():
    assert learnable(CPU_WALL, "cpu") and learnable(CUDA_EVENT, "cuda")
    assert not learnable(CPU_WALL, "cuda") and not learnable(LAUNCH_WALL, "cuda")
    assert not learnable(CUDA_EVENT, "cpu") and not learnable("anything", "cpu")
    assert timer_for("cpu").source == CPU_WALL
    assert timer_for("cpu", intra_op_threads=4).source == CPU_WALL  # work on unseen threads
    assert timer_for("cpu", intra_op_threads=1).source == CPU_THREAD
    assert learnable(CPU_THREAD, "cpu") and not learnable(CPU_THREAD, "cuda")
    assert timer_for("cuda", FakeCudaModule(FakeGpu())).source == CUDA_EVENT
    assert timer_for("npu", FakeCudaModule(FakeGpu())).source == LAUNCH_WALL

    class Sched:
        device = "cuda:3"
        enable_overlap = False
        forward_stream = "fwd"

    assert device_type_of(Sched()) == "cuda"
    assert forward_stream_of(Sched()) is None  # PP / no overlap: the current stream
    Sched.enable_overlap = True
    assert forward_stream_of(Sched()) == "fwd"


def test_events_record_on_the_given_stream():
    gpu = FakeGpu()
    seen = []

    class Event(FakeEvent):
        def record(self, stream=None):
            seen.append(stream)
            super().record(stream)

    module = FakeCudaModule(gpu)
    module.Event = lambda enable_timing=False: Event(gpu)
    timer = timer_for("cuda", module, stream="fwd")
    timer.end(timer.begin(), None)
    assert seen == ["fwd", "fwd"]
    timer = timer_for("cuda", module)
    timer.end(timer.begin(), None)
    assert seen[2:] == ["forward-stream", "forward-stream"]


def test_events_that_never_complete_are_dropped_and_counted(make_state, monkeypatch):
    monkeypatch.setattr("ppsched.sglang_patch.device_timing.MAX_PENDING", 2)
    gpu = FakeGpu()
    st = make_state("cuda", EventTimer(FakeCudaModule(gpu)))
    for _ in range(3):  # the GPU never gets anywhere
        hooks._around_run_batch(launching_forward(gpu, 5.0, wall_s=0), object(),
                                FakeBatch("extend"))
    assert st.timer.pending == 2 and st.log.counts["errors"] == 1
    assert st.controller.seen == []


def test_thread_timer_counts_the_threads_work_not_its_waiting():
    # What the OS gives to other processes (here: a sleep) is not the stage's compute; the
    # wall time beside it still sees it.
    timer = timer_for("cpu", intra_op_threads=1)
    token = timer.begin()
    time.sleep(0.05)
    timer.end(token, "slept")
    token = timer.begin()
    deadline = time.perf_counter() + 0.03
    while time.perf_counter() < deadline:
        pass
    timer.end(token, "busy")
    slept, busy = timer.poll()
    assert (slept.payload, busy.payload) == ("slept", "busy")
    assert slept.source == busy.source == CPU_THREAD
    assert slept.wall_ms >= 50.0 and slept.ms < 0.5 * slept.wall_ms
    assert busy.wall_ms >= 30.0 and busy.ms > 0.0
    assert timer.poll() == []


def test_cpu_thread_time_is_learned_with_the_wall_time_logged(make_state, tmp_path):
    st = make_state("cpu", timer_for("cpu", intra_op_threads=1))
    hooks._around_run_batch(launching_forward(FakeGpu(), 0.0, wall_s=0.02), object(),
                            FakeBatch("decode"))
    (rec,) = stage_records(tmp_path)
    assert rec["timing"] == CPU_THREAD and rec["learned"] is True
    assert rec["wall_ms"] >= 20.0 > rec["measured_ms"]  # the sleep is wall, not compute
    assert st.controller.seen == [pytest.approx(rec["measured_ms"], abs=1e-3)]


class LaunchRecorder(Recorder):
    def __init__(self):
        super().__init__()
        self.launches = []

    def observe_launch(self, launch):
        self.launches.append(launch)


def test_every_forward_is_told_to_the_controller_as_a_launch(make_state):
    gpu = FakeGpu()
    st = make_state("cuda", EventTimer(FakeCudaModule(gpu)), graphs=(1, 2, 4, 8, 12, 16))
    st.controller = LaunchRecorder()

    def graph_forward(sched, batch):
        gpu.run(3.0)
        return Result(graph=True)

    st.slot = 1
    hooks._around_run_batch(launching_forward(gpu, 5.0, wall_s=0), object(),
                            FakeBatch("extend"))
    st.slot = 0
    hooks._around_run_batch(graph_forward, object(), FakeBatch("decode", n=10))
    first, second = st.controller.launches
    # a CUDA-graph decode is never taught to ALP, but its launch still closes a round
    assert (first.slot, first.prefill_tokens, first.decode_reqs) == (1, 64, 0)
    assert (second.slot, second.prefill_tokens, second.decode_reqs) == (0, 0, 10)
    assert 0.0 <= first.now_s <= second.now_s


def test_launches_reach_only_rank_0_and_only_while_the_plugin_is_on(make_state):
    st = make_state("cpu", WallTimer())
    st.controller = LaunchRecorder()
    st.active = False  # fallen back: stock SGLang, nothing to feed
    hooks._around_run_batch(lambda s, b: Result(), object(), FakeBatch("extend"))
    st.active, st.rank = True, 1
    hooks._around_run_batch(lambda s, b: Result(), object(), FakeBatch("extend"))
    assert st.controller.launches == []


def test_a_failing_launch_observer_falls_back_and_serving_goes_on(make_state):
    class Broken(LaunchRecorder):
        def observe_launch(self, launch):
            raise RuntimeError("boom")

    st = make_state("cpu", WallTimer())
    st.controller = Broken()
    out = hooks._around_run_batch(lambda s, b: "result", object(), FakeBatch("extend"))
    assert out == "result" and st.active is False and st.log.counts["fallbacks"] == 1
    assert hooks._around_run_batch(lambda s, b: "again", object(), FakeBatch("extend")) == "again"
