"""bench/bench_dcp_shifting.py: the --period option and the phase:A/B reference."""

import argparse
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

PATH = Path(__file__).resolve().parents[1] / "bench" / "bench_dcp_shifting.py"
spec = importlib.util.spec_from_file_location("bench_dcp_shifting", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_phase_reference_follows_chat_batchs_clock():
    ref = bench.PhaseReference("phase:128/384", 600.0)
    sizes = [ref.decide(SimpleNamespace(now_s=t)).chunk_tokens for t in (0.0, 599.0, 601.0, 1300.0)]
    assert sizes == [128, 128, 384, 128]


def test_period_sets_the_phases_and_a_window_of_one_of_each():
    args = argparse.Namespace(workload="chat-batch", period=600.0, only=None)
    wl, window = bench.workload_and_window(args, 1.0, 0)
    assert window.measure_s == 1200.0
    batch = [r for r in wl.requests if 600.0 <= r.arrival_s < 1200.0]
    chat = [r for r in wl.requests if r.arrival_s < 600.0]
    assert batch and all(r.output_tokens == 1 for r in batch)
    assert sum(r.output_tokens > 1 for r in chat) > 0.5 * len(chat)


@pytest.mark.parametrize("argv", [
    ["--workload", "alternating", "--period", "600"],
    ["--workload", "chat-batch", "--period", "-5"],
    ["--workload", "alternating", "--chunks", "phase:128/384"],
])
def test_bad_period_or_reference_stops_with_a_usage_error(argv, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["bench_dcp_shifting.py", *argv])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    assert "expected" in capsys.readouterr().err
