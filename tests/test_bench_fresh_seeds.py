"""bench/bench_fresh_seeds.py: seeds no goodput search uses, bad input, and the pass counts."""

import importlib.util
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest

from ppsched.core.errors import UserError

PATH = Path(__file__).resolve().parents[1] / "bench" / "bench_fresh_seeds.py"
spec = importlib.util.spec_from_file_location("bench_fresh_seeds", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_seeds_as_a_range_or_a_list():
    assert bench.parse_seeds("3000-3003") == [3000, 3001, 3002, 3003]
    assert bench.parse_seeds("3000,4100") == [3000, 4100]


@pytest.mark.parametrize("text", ["0-5", "3000,1001", "2000", "x-y", "3005-3000"])
def test_seeds_the_goodput_method_uses_or_none_are_refused(text):
    with pytest.raises(UserError, match="--seeds"):
        bench.parse_seeds(text)


def test_search_seeds_only_when_asked():
    assert bench.parse_seeds("0-2", search_seeds=True) == [0, 1, 2]
    assert bench.parse_seeds("1000,3000", search_seeds=True) == [1000, 3000]
    with pytest.raises(UserError, match="at least one seed"):
        bench.parse_seeds("5-2", search_seeds=True)


@pytest.mark.parametrize("argv", [
    ["--workload", "sharegpt", "--slo-scale", "0", "--rates", "1", "--policies", "predictive"],
    ["--workload", "sharegpt", "--slo-scale", "0.4,0.6", "--rates", "1", "--policies",
     "predictive"],
    ["--workload", "sharegpt", "--slo-scale", "0.4", "--rates", "-1", "--policies", "predictive"],
    ["--workload", "sharegpt", "--slo-scale", "0.4", "--rates", "1", "--policies", "nope"],
    ["--workload", "sharegpt", "--slo-scale", "0.4", "--rates", "1", "--policies", "predictive",
     "--factor", "0.5"],
])
def test_bad_input_stops_with_one_error_and_exit_2(argv, capsys):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "expected" in err


class FakeRunner:
    """Runs nothing: each task's result carries its seed, so the fake verdict can pass it."""

    def __init__(self, cache, jobs):
        self.cache, self.jobs = cache, jobs

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def submit(self, task):
        future = Future()
        future.set_result(SimpleNamespace(records=(task.config.seed, task.config.chunk)))
        return future


def fake_verdict(records, window, slo):
    seed, chunk = records
    ok = chunk == "static:256" or seed % 2 == 0  # the static chunk holds every seed
    return SimpleNamespace(ok=ok, p90_ttft_ms=700.0 if ok else 900.0, p90_tpot_ms=70.0,
                           tail_p90_ttft_ms=800.0)


def test_each_policy_and_rate_counts_the_seeds_it_holds(monkeypatch, capsys):
    monkeypatch.setattr(bench, "Runner", FakeRunner)
    monkeypatch.setattr(bench, "verdict", fake_verdict)
    monkeypatch.setattr(bench, "measurement_window", lambda workload, slo: SimpleNamespace(
        longer=lambda f: SimpleNamespace(warmup_s=1.0, measure_s=4.0 * f, cooldown_s=1.0,
                                         arrivals_s=6.0 * f)))
    argv = ["--workload", "sharegpt", "--slo-scale", "0.4", "--rates", "0.5,0.7",
            "--policies", "predictive,static-256", "--seeds", "3000-3003"]
    assert bench.main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 0.")]
    assert len(rows) == 4
    assert rows[0].startswith("| 0.5 | predictive | 2/4 | 800 / 70.0 | 800 | 700 900✗ 700 900✗")
    assert rows[1].startswith("| 0.5 | static-256 | 4/4 | 700 / 70.0 |")
    assert rows[2].startswith("| 0.7 | predictive | 2/4 |")
