"""The GPU check kit on this CPU machine: its no-CUDA exit, and its judging logic on fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppsched.cli.main import main
from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.core.models import load_model_config
from ppsched.gpucheck import run as kit
from ppsched.gpucheck.alp_replay import alp_mape, learned_rows, timing_summary
from ppsched.gpucheck.probe import GpuInfo, probe_cuda
from ppsched.gpucheck.report import CheckResult, Report
from ppsched.gpucheck.serve import ServeOptions, server_setup, short_workload, verdict
from ppsched.gpucheck.stage_forward import event_vs_sync, within_tolerance
from ppsched.predictor.profile import default_profile


def test_without_cuda_one_line_and_nonzero(capsys, monkeypatch):
    monkeypatch.setattr("ppsched.gpucheck.probe.probe_cuda",
                        lambda torch=None: (None, "torch 9.9+cpu sees no CUDA device"))
    assert main(["gpu-check", "--out", "unused"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "no CUDA device" in err


def test_gpu_check_help_documents_every_check(capsys):
    with pytest.raises(SystemExit) as done:
        main(["gpu-check", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for step in ("model", "profile", "event-vs-sync", "serve", "5% apart", "--pp-size"):
        assert step in text


class FakeTorch:
    __version__ = "9.9"

    class cuda:  # noqa: N801 - torch's name
        @staticmethod
        def is_available():
            return False


def test_probe_says_why_not():
    info, why = probe_cuda(FakeTorch())
    assert info is None and "sees no CUDA" in why


class Clock:
    def __init__(self):
        self.now = 0.0


class FakeEvent:
    def __init__(self, dev):
        self.dev, self.at = dev, None

    def record(self, stream=None):
        self.at = self.dev.queued_ms

    def query(self):
        return self.dev.done_ms >= self.at

    def elapsed_time(self, end):
        assert self.query() and end.query()
        return end.at - self.at


class FakeDevice:
    """GPU work of ``gpu_ms`` per forward; launch costs ``launch_ms`` of host time; synchronize
    waits for the queue (host clock jumps to the GPU's finish)."""

    def __init__(self, clock, gpu_ms, launch_ms, sync_overhead_ms=0.0):
        self.clock, self.gpu_ms, self.launch_ms = clock, gpu_ms, launch_ms
        self.sync_overhead_ms = sync_overhead_ms
        self.queued_ms = self.done_ms = 0.0
        self.gpu_free_at_s = 0.0

    def Event(self, enable_timing=False):  # noqa: N802
        return FakeEvent(self)

    def current_stream(self):
        return None

    def forward(self):
        start = max(self.clock.now, self.gpu_free_at_s)
        self.gpu_free_at_s = start + self.gpu_ms / 1000.0
        self.queued_ms += self.gpu_ms
        self.clock.now += self.launch_ms / 1000.0

    def synchronize(self):
        self.clock.now = max(self.clock.now, self.gpu_free_at_s) + self.sync_overhead_ms / 1000
        self.done_ms = self.queued_ms


def test_event_vs_sync_figures_and_tolerance():
    clock = Clock()
    dev = FakeDevice(clock, gpu_ms=40.0, launch_ms=2.0, sync_overhead_ms=0.5)
    fig = event_vs_sync(dev.forward, dev, repeats=5, warmup=1, clock=lambda: clock.now)
    assert fig["event_ms"] == pytest.approx(40.0)
    assert fig["sync_wall_ms"] == pytest.approx(40.5)
    assert fig["launch_ms"] == pytest.approx(2.0)
    assert fig["ready_at_launch"] == 0  # nothing readable before the GPU ran it
    assert within_tolerance(fig)
    slow_sync = FakeDevice(clock, gpu_ms=4.0, launch_ms=1.0, sync_overhead_ms=1.0)
    fig = event_vs_sync(slow_sync.forward, slow_sync, repeats=3, warmup=0,
                        clock=lambda: clock.now)
    assert fig["rel_diff"] == pytest.approx(1.0 / 5.0) and not within_tolerance(fig)


def stage(rank, timing, learned, prefill=(), decode=0, ctx=0, ms=10.0, graph=False):
    return {"kind": "stage", "rank": rank, "timing": timing, "learned": learned,
            "prefill": [list(p) for p in prefill], "decode_count": decode, "decode_ctx": ctx,
            "measured_ms": ms, "cuda_graph": graph}


def test_learned_rows_rebuild_shapes_and_skip_unlearned():
    records = [{"kind": "start", "rank": 0},
               stage(0, "cuda-event", True, prefill=((0, 256), (128, 64)), decode=3, ctx=900),
               stage(0, "cuda-event", False, decode=8, ctx=100, graph=True),
               stage(1, "cuda-event", True, decode=2, ctx=50)]
    rows = learned_rows(records)
    assert rows == [(BatchShape(prefill=((0, 256), (128, 64)), decode_count=3,
                                decode_ctx_sum=900), 10.0)]
    old = [{k: v for k, v in records[1].items() if k != "prefill"}]
    with pytest.raises(UserError, match="no batch shape"):
        learned_rows(old)


def test_alp_mape_scores_after_warmup():
    profile = default_profile(load_model_config("qwen2.5-14b"), pp_size=4)
    shape = BatchShape(prefill=((0, 512),))
    truth = profile.linear_ms(512)
    mape = alp_mape([(shape, truth)] * 30, profile, warmup=10)
    assert mape["n"] == 20 and mape["mape"] < 1.0
    with pytest.raises(UserError, match="more than the warm-up"):
        alp_mape([(shape, truth)] * 5, profile, warmup=10)


def start(rank, cap, boundaries, enabled=True):
    return {"kind": "start", "rank": rank, "device": "cuda", "timing": "cuda-event",
            "loop_slots": 2, "cuda_graphs": {"enabled": enabled, "cap": cap},
            "ds_boundaries": boundaries}


def test_verdict_needs_event_timing_graph_cap_and_completion():
    good = [start(0, 32, [32, 128]), start(1, 32, [32, 128]),
            stage(0, "cuda-event", True), stage(1, "cuda-event", False)]
    ok, problems = verdict(timing_summary(good), 10, 10, ds_on=True)
    assert ok and problems == []
    launch = good + [stage(0, "launch-wall", False)]
    ok, problems = verdict(timing_summary(launch), 10, 10, ds_on=True)
    assert not ok and "launch-wall" in problems[0]
    no_cap = [start(0, 32, [128]), stage(0, "cuda-event", True)]
    ok, problems = verdict(timing_summary(no_cap), 9, 10, ds_on=True)
    assert not ok and len(problems) == 2
    assert verdict(timing_summary(no_cap), 10, 10, ds_on=False)[0]  # PP 1: DS off
    nothing_learned = [start(0, 0, None, enabled=False), stage(0, "cuda-event", False)]
    assert not verdict(timing_summary(nothing_learned), 1, 1, ds_on=False)[0]


def test_server_setup_pp_and_ds_follow_the_gpu_count(tmp_path):
    args, env = server_setup(ServeOptions(Path("py"), 1), tmp_path, tmp_path / "l", 31007)
    assert args[args.index("--pp-size") + 1] == "1" and env["PPSCHED_DS"] == "off"
    assert args[args.index("--chunked-prefill-size") + 1] == "2048"
    assert "PPSCHED_PROFILE" not in env
    args, env = server_setup(ServeOptions(Path("py"), 4, profile=tmp_path / "p.json"),
                             tmp_path, tmp_path / "l", 31007)
    assert args[args.index("--pp-size") + 1] == "4" and env["PPSCHED_DS"] == "on"
    assert env["PPSCHED_PROFILE"] == str(tmp_path / "p.json")
    specs = short_workload(12)
    assert len(specs) == 12 and max(s.prompt_tokens for s in specs) < 1500


def test_report_pass_fail_and_files(tmp_path):
    machine = GpuInfo(2, "Fake H200", 143000, "2.9", "12.8").describe()
    results = (CheckResult("profile", "pass", "ok", {"boundaries": [128], "mape": float("nan")}),
               CheckResult("serve", "skip", "--no-serve"))
    report = Report(machine, "ppsched gpu-check --out x", results)
    assert report.passed
    js, md = report.write(tmp_path / "r")
    data = json.loads(js.read_text())
    assert data["passed"] is True and data["results"][0]["figures"]["mape"] is None
    assert "Fake H200" in md.read_text() and "**Overall: PASS**" in md.read_text()
    failed = Report(machine, "c", (*results, CheckResult("event-vs-sync", "fail", "12% apart")))
    assert not failed.passed and not Report(machine, "c", results[1:]).passed
    with pytest.raises(ValueError):
        CheckResult("x", "maybe", "")


def test_a_raising_step_is_a_failed_check_not_a_crash():
    def boom():
        raise RuntimeError("CUDA error: out of memory")

    result = kit.timed("serve", boom)
    assert result.status == "fail" and "out of memory" in result.summary


def test_run_kit_orders_steps_and_skips_what_lost_its_input(tmp_path, monkeypatch):
    def no_model(python, out):
        raise FileNotFoundError("transformers missing")

    monkeypatch.setattr(kit, "make_model", no_model)
    monkeypatch.setattr(kit, "check_event_vs_sync",
                        lambda torch, opts: CheckResult("event-vs-sync", "pass", "0.4%"))
    info = GpuInfo(1, "Fake", 80000, "2.9", "12.8")
    report = kit.run_kit(None, info, kit.KitOptions(out=tmp_path, python=Path("py")), "c")
    assert [(r.name, r.status) for r in report.results] == [
        ("model", "fail"), ("profile", "skip"), ("event-vs-sync", "pass"), ("serve", "skip")]
    assert not report.passed


def test_stage_forward_runs_on_cpu_torch():
    torch = pytest.importorskip("torch")
    from ppsched.core.models import ModelConfig
    from ppsched.gpucheck.stage_forward import build_stage_forward

    tiny = ModelConfig("tiny", hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2,
                       head_dim=16, vocab=100)
    out = build_stage_forward(torch, tiny, layers=2, tokens=8, device="cpu")()
    assert tuple(out.shape) == (8, 64) and bool(torch.isfinite(out).all())
