"""`ppsched profile fit|collect`: output, exit codes, and collect on CPU with a tiny config."""

from __future__ import annotations

import json

import pytest

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig
from ppsched.core.paths import data_dir
from ppsched.predictor import collect as collect_mod
from ppsched.predictor.profile import LinearProfile, fit_profile

QWEN72_CSV = str(data_dir() / "profiles" / "a100" / "Qwen-72B" / "mlp.csv")
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "_name_or_path": "tiny"}


def test_fit_json_and_out(tmp_path, capsys):
    out = tmp_path / "p.json"
    rc = main(["profile", "fit", "--mlp-csv", QWEN72_CSV, "--model", "qwen2.5-32b",
               "--pp-size", "4", "--out", str(out), "--json"])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"alpha0", "alpha1", "boundaries", "fit_mape"} <= printed.keys()
    assert printed["boundaries"][:3] == [128, 256, 384] and printed["layers"] == 16
    assert LinearProfile.from_json(out).alpha0 == printed["alpha0"]


def test_fit_bad_inputs_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("num_tokens,foo\n1,2\n")
    assert main(["profile", "fit", "--mlp-csv", str(bad), "--model", "qwen2.5-32b"]) == 2
    assert "lacks columns" in capsys.readouterr().err
    assert main(["profile", "fit", "--mlp-csv", QWEN72_CSV, "--model", "qwen2.5-32b",
                 "--pp-size", "0"]) == 2
    assert "--pp-size 0" in capsys.readouterr().err


def test_vidur_grid():
    grid = collect_mod.vidur_token_grid()
    assert grid[:6] == (1, 2, 4, 8, 16, 24) and grid[-1] == 4096
    assert 1040 in grid and 1032 not in grid and 2080 in grid and 2064 not in grid
    assert collect_mod.parse_tokens("1,8,16") == (1, 8, 16)
    with pytest.raises(UserError, match="ascending"):
        collect_mod.parse_tokens("8,1")


def test_cuda_selection_without_a_gpu_and_cuda_timer_protocol():
    class FakeCuda:
        calls: list[str] = []

        def __init__(self, available):
            self.available = available

        def is_available(self):
            return self.available

        def synchronize(self):
            FakeCuda.calls.append("sync")

        class Event:
            def __init__(self, enable_timing):
                assert enable_timing

            def record(self):
                FakeCuda.calls.append("record")

            def elapsed_time(self, other):
                return 1.5

    class FakeTorch:
        bfloat16 = "bf16"
        float32 = "f32"

        def __init__(self, available):
            self.cuda = FakeCuda(available)

        def device(self, name):
            return name

    with pytest.raises(UserError, match="no CUDA device"):
        collect_mod.select_device(FakeTorch(False), "cuda")
    dev, timer, dtype = collect_mod.select_device(FakeTorch(True), "cuda")
    assert (dev, dtype, timer.name) == ("cuda", "bf16", "cuda-events")
    assert timer.time_ms(lambda: FakeCuda.calls.append("op")) == 1.5
    assert FakeCuda.calls == ["sync", "record", "op", "record", "sync"]
    with pytest.raises(UserError, match="expected cuda or cpu"):
        collect_mod.select_device(FakeTorch(True), "tpu")


def test_missing_torch_is_a_user_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(UserError, match="needs torch"):
        collect_mod.import_torch()


def test_collect_on_cpu_tiny_config_then_fit(tmp_path, capsys):
    pytest.importorskip("torch")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY))
    out = tmp_path / "mlp.csv"
    rc = main(["profile", "collect", "--model", str(cfg), "--device", "cpu", "--out", str(out),
               "--tokens", "1,2,4,8,16,32,64", "--repeats", "2", "--warmup", "1"])
    assert rc == 0 and out.is_file()
    header = out.read_text().splitlines()[0].split(",")
    vidur = open(QWEN72_CSV).readline().strip().split(",")
    assert header == vidur  # same columns, same order as the vendored profiles
    model = ModelConfig("tiny", hidden=64, intermediate=128, layers=4, heads=4, kv_heads=2,
                        head_dim=16, vocab=256)
    prof = fit_profile(out, model, layers=4)
    assert prof.alpha0 > 0 and prof.layers == 4  # CPU time grows with tokens
    assert main(["profile", "collect", "--model", str(cfg), "--device", "cpu", "--out",
                 str(tmp_path / "none" / "x.csv"), "--tokens", "1"]) == 2


def test_stage0_rows_from_a_frame():
    import pandas as pd

    from ppsched.cli.cmd_profile import stage0_rows

    frame = pd.DataFrame({
        "stage": [0, 1, 0, 0], "start_s": [0.2, 0.1, 0.1, 0.3],
        "prefill_tokens": [512, 512, 0, 100], "prefix_tokens": [1024, 1024, 0, 0],
        "decode_reqs": [3, 3, 8, 0], "decode_ctx_sum": [300, 300, 8000, 0],
        "measured_ms": [40.0, 41.0, 15.0, 20.0]})
    rows = stage0_rows(frame)
    assert [ms for _, ms in rows] == [15.0, 40.0, 20.0]  # stage 0 only, in start order
    assert rows[0][0].kind == "decode" and rows[0][0].decode_ctx_sum == 8000
    assert rows[1][0].prefill == ((1024, 512),) and rows[1][0].kind == "mixed"


def test_eval_on_the_simulator_json(capsys):
    rc = main(["profile", "eval", "--workload", "azure-conv", "--rate", "2",
               "--num-requests", "40", "--warmup-iterations", "20", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert {"mape", "p90_ape", "by_type", "warmup_iterations", "linear_variant"} <= report.keys()
    assert report["warmup_iterations"] == 20 and report["n"] == report["iterations"] - 20
    assert set(report["variants"]) == {"linear", "linear+online-linear", "staircase",
                                       "staircase+online-linear"}
    assert report["mape"] == report["variants"][report["default_predictor"]]["mape"]
    assert 0 < report["mape"] < 50
    assert main(["profile", "eval", "--workload", "azure-conv", "--rate", "2",
                 "--num-requests", "5", "--warmup-iterations", "100000"]) == 2


@pytest.mark.parametrize("factor", ["0.1", "10"])
def test_scaled_profile_is_unlearned_in_eval(tmp_path, capsys, factor):
    """The wrong-profile acceptance, at its size: an offline profile 10x off is unlearned within the
    default warm-up (before the device scale: 6.0% / 85% MAPE)."""
    out = tmp_path / "p.json"
    assert main(["profile", "scale", "--factor", factor, "--out", str(out)]) == 0
    scaled = LinearProfile.from_json(out)
    assert scaled.source.endswith(f"x{factor}") and scaled.layers == 16
    capsys.readouterr()
    rc = main(["profile", "eval", "--workload", "azure-conv", "--rate", "3", "--num-requests",
               "600", "--profile", str(out), "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warmup_iterations"] == 100 and report["mape"] <= 5.0


def test_scale_bad_inputs_exit_2(tmp_path, capsys):
    out = str(tmp_path / "p.json")
    assert main(["profile", "scale", "--factor", "0", "--out", out]) == 2
    assert "factor 0.0" in capsys.readouterr().err
    assert main(["profile", "scale", "--factor", "2", "--out", out, "--pp-size", "0"]) == 2
    assert main(["profile", "scale", "--factor", "2", "--out", out,
                 "--profile", str(tmp_path / "missing.json")]) == 2
