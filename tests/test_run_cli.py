"""`ppsched run --engine sim`: outputs on disk, summary keys, and every bad flag exits 2."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ppsched.cli.main import main

BASE = ["run", "--engine", "sim", "--model", "qwen2.5-14b", "--workload", "azure-conv",
        "--rate", "2", "--num-requests", "25", "--seed", "3"]


@pytest.fixture(scope="module")
def pp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "pp4"
    code = main(BASE + ["--parallel", "pp4", "--chunk", "static:512", "--out", str(out)])
    assert code == 0
    return out


def test_writes_the_four_outputs_with_the_promised_columns(pp_run, capsys):
    for name in ("summary.json", "requests.csv", "iterations.csv", "decisions.jsonl"):
        assert (pp_run / name).is_file(), name
    summary = json.loads((pp_run / "summary.json").read_text())
    for key in ("requests", "completed", "rejected", "ttft_ms", "tpot_ms", "e2e_ms",
                "iteration_ms", "slo_attainment", "goodput_ok", "throughput_rps",
                "output_tokens_per_s", "bubble_fraction", "sim_wall_s", "sim_speed", "sim_cpu_s",
                "config", "retractions", "ds_holds", "ds_max_consecutive_holds", "workload"):
        assert key in summary, key
    for key in ("mean", "p50", "p90", "p99", "p999"):
        assert key in summary["iteration_ms"]
    assert summary["requests"] == 25 and summary["completed"] + summary["rejected"] == 25
    assert summary["config"]["parallel"] == "pp4" and summary["config"]["chunk"] == "static:512"
    it = pd.read_csv(pp_run / "iterations.csv")
    assert {"slot", "stage", "start_s", "end_s", "prefill_tokens", "prefix_tokens", "decode_reqs",
            "decode_ctx_sum", "chunk", "idle_before_s", "predicted_ms", "measured_ms",
            "kind"} <= set(it.columns)
    assert set(it["stage"]) == {0, 1, 2, 3}
    req = pd.read_csv(pp_run / "requests.csv")
    assert len(req) == 25 and {"ttft_ms", "tpot_ms", "slot", "retractions"} <= set(req.columns)
    lines = (pp_run / "decisions.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["type"] in ("chunk", "trim") for line in lines)


def test_prints_a_short_summary(tmp_path, capsys):
    code = main(BASE + ["--parallel", "tp4", "--chunk", "static:2048", "--out", str(tmp_path)])
    assert code == 0
    text = capsys.readouterr().out
    assert "TTFT" in text and "TPOT" in text and "tp4" in text and str(tmp_path) in text


def test_same_seed_same_outputs(pp_run, tmp_path):
    main(BASE + ["--parallel", "pp4", "--chunk", "static:512", "--out", str(tmp_path)])
    a = pd.read_csv(pp_run / "requests.csv")
    b = pd.read_csv(tmp_path / "requests.csv")
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("flags, needle", [
    (["--parallel", "xp4"], "--parallel"),
    (["--parallel", "pp0"], "--parallel"),
    (["--hardware", "h100"], "--hardware"),
    (["--chunk", "bogus"], "bogus"),
    (["--chunk", "static:0"], "static"),
    (["--ds", "maybe"], "--ds"),
    (["--ds-max-consecutive", "-1"], "--ds-max-consecutive"),
    (["--slo-ttft-ms", "0"], "ttft_ms"),
    (["--slo-tpot-ms", "-5"], "tpot_ms"),
    (["--mem-fraction-static", "1.5"], "--mem-fraction-static"),
    (["--max-chunk-tokens", "0"], "--max-chunk-tokens"),
    (["--max-running-requests", "0"], "--max-running-requests"),
    (["--model", "no-such-model"], "no-such-model"),
    (["--engine", "gpu"], "--engine"),
    (["--rate", "-1"], "rate"),
    (["--admission", "sometimes"], "--admission"),
])
def test_bad_flags_exit_2_with_one_clear_line(tmp_path, capsys, flags, needle):
    code = main(BASE + flags + ["--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert not (tmp_path / "x" / "summary.json").exists()


def test_live_engine_dispatches_or_says_it_is_missing(tmp_path, capsys, monkeypatch):
    import importlib

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "ppsched.experiments.live_replay":
            raise ModuleNotFoundError(name=name)
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake)
    code = main(BASE + ["--engine", "http://127.0.0.1:1", "--out", str(tmp_path)])
    assert code == 2 and "live replay" in capsys.readouterr().err
