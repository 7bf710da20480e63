"""Offline profile: fit on the vendored CSVs and on an unseen GPU's CSV, bad CSVs, JSON."""

from __future__ import annotations

import csv
import json
import math
import pickle

import pandas as pd
import pytest

from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS, ModelConfig
from ppsched.core.paths import data_dir
from ppsched.predictor.collect import ALL_OPS, SHAPE_HEADER, STATS, vidur_token_grid
from ppsched.predictor.profile import LinearProfile, default_profile, fit_profile

A100 = data_dir() / "profiles" / "a100"
QWEN32 = BUILTIN_MODELS["qwen2.5-32b"]


def test_fit_on_real_csv_one_stage():
    prof = fit_profile(A100 / "Qwen-72B" / "mlp.csv", QWEN32, layers=16)
    assert prof.layers == 16 and prof.model == "qwen2.5-32b" and prof.tp == 1
    assert prof.boundaries[:4] == (128, 256, 384, 512)
    assert 0.03 < prof.alpha0 < 0.15  # ms/token for 16 layers of a 32B model on an A100
    assert prof.fit_mape < 10 and prof.staircase_mape < 10
    assert prof.variant == min(("linear", "staircase"),
                               key=lambda v: prof.fit_mape if v == "linear" else
                               prof.staircase_mape)
    # one stage of 16 layers costs half of 32 layers: per-layer times add up
    double = fit_profile(A100 / "Qwen-72B" / "mlp.csv", QWEN32, layers=32)
    assert double.alpha0 == pytest.approx(2 * prof.alpha0, rel=1e-9)
    # staircase: 129 tokens cost like 256, more than 128
    assert prof.linear_ms(129, "staircase") == prof.linear_ms(256, "staircase")
    assert prof.linear_ms(129, "staircase") > 1.3 * prof.linear_ms(128, "staircase")
    assert prof.linear_ms(0) == 0.0


def test_tp_shrinks_the_per_gpu_cost():
    tp1 = fit_profile(A100 / "Qwen-72B" / "mlp.csv", QWEN32, layers=16)
    tp4 = fit_profile(A100 / "Qwen-72B" / "mlp.csv", QWEN32, tp=4, layers=16)
    assert tp4.alpha0 < 0.5 * tp1.alpha0


def test_default_profile_picks_the_nearest_shape_and_caches():
    p32 = default_profile(QWEN32, pp_size=4)
    assert "Qwen-72B" in p32.source and p32.layers == 16
    p14 = default_profile(BUILTIN_MODELS["qwen2.5-14b"], pp_size=4)
    assert "internlm-20b" in p14.source and p14.layers == 12
    assert default_profile(QWEN32, pp_size=4) is p32


def write_csv(path, rows, drop=()):
    header = [f"time_stats.{op}.{s}" for op in ALL_OPS for s in STATS] + list(SHAPE_HEADER)
    header = [h for h in header if h not in drop]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def synthetic_rows(period=64, tokens=None, per_token_ms=2e-4, n_embd=2048, n_inter=5632):
    """An unseen GPU/model: a 64-token staircase (not A100's 128)."""
    rows = []
    for n in tokens or vidur_token_grid(2048):
        level = 0.01 + per_token_ms * period * math.ceil(n / period)
        row = {"n_head": 16, "n_kv_head": 4, "n_embd": n_embd, "n_expanded_embd": n_inter,
               "vocab_size": 32000, "use_gated_mlp": True, "num_tokens": n,
               "num_tensor_parallel_workers": 1}
        for op in ALL_OPS:
            for s in STATS:
                row[f"time_stats.{op}.{s}"] = level
        rows.append(row)
    return rows


def test_fit_on_an_unseen_gpu_and_model(tmp_path):
    path = tmp_path / "mlp.csv"
    write_csv(path, synthetic_rows())
    model = ModelConfig("unseen", hidden=2048, intermediate=5632, layers=24, heads=16,
                        kv_heads=4, head_dim=128, vocab=32000)
    prof = fit_profile(path, model, layers=6)
    assert prof.boundaries[:4] == (64, 128, 192, 256)
    assert prof.variant == "staircase" and prof.staircase_mape < prof.fit_mape


def test_bad_csvs_are_user_errors(tmp_path):
    model = QWEN32
    missing = tmp_path / "missing.csv"
    write_csv(missing, synthetic_rows(), drop=("time_stats.mlp_up_proj.median",))
    with pytest.raises(UserError, match=r"lacks columns \['time_stats.mlp_up_proj.median'\]"):
        fit_profile(missing, model)
    shuffled = tmp_path / "shuffled.csv"
    write_csv(shuffled, synthetic_rows(tokens=[8, 16, 4, 32, 64, 128]))
    with pytest.raises(UserError, match="not monotone"):
        fit_profile(shuffled, model)
    nan = tmp_path / "nan.csv"
    rows = synthetic_rows()
    rows[5]["time_stats.attn_pre_proj.median"] = "nan"
    write_csv(nan, rows)
    with pytest.raises(UserError, match=r"attn_pre_proj.median.*row 7"):
        fit_profile(nan, model)
    with pytest.raises(UserError, match="does not exist"):
        fit_profile(tmp_path / "nope.csv", model)
    few = tmp_path / "few.csv"
    write_csv(few, synthetic_rows(tokens=[1, 2, 4]))
    with pytest.raises(UserError, match="expected >= 4"):
        fit_profile(few, model)


def test_vidur_descending_grid_with_repeats_is_accepted():
    df = pd.read_csv(A100 / "internlm-20b" / "mlp.csv", nrows=3)
    assert list(df.num_tokens) == [4096, 4096, 4064]  # what the reader must accept
    fit_profile(A100 / "internlm-20b" / "mlp.csv", BUILTIN_MODELS["qwen2.5-14b"], layers=12)


def test_json_round_trip_and_malformed(tmp_path):
    prof = default_profile(QWEN32, pp_size=4)
    path = tmp_path / "p.json"
    path.write_text(prof.to_json())
    assert LinearProfile.from_json(path) == prof
    assert LinearProfile.from_json(prof.to_json()) == prof
    assert prof.with_variant("linear").variant == "linear"
    bad = tmp_path / "bad.json"
    bad.write_text("{\"alpha0\": 1")
    with pytest.raises(UserError, match="bad.json.*not valid JSON"):
        LinearProfile.from_json(bad)
    data = json.loads(prof.to_json())
    del data["boundaries"]
    bad.write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"bad.json.*lacks keys \['boundaries'\]"):
        LinearProfile.from_json(bad)
    data = json.loads(prof.to_json())
    data["variant"] = "cubic"
    with pytest.raises(UserError, match="variant"):
        LinearProfile.from_json(json.dumps(data))
    with pytest.raises(UserError, match="could not be read"):
        LinearProfile.from_json(tmp_path / "absent.json")


def test_profile_without_steps_is_linear(tmp_path):
    rows = synthetic_rows(period=1)  # ceil(n/1) = n: a straight line, no staircase
    path = tmp_path / "line.csv"
    write_csv(path, rows)
    prof = fit_profile(path, QWEN32, layers=16)
    assert prof.boundaries == () and prof.staircase == ()
    assert prof.variant == "linear" and prof.fit_mape < 1.0


def test_scaled_profile_multiplies_every_time():
    base = default_profile(BUILTIN_MODELS["qwen2.5-32b"], pp_size=4)
    tenfold = base.scaled(10)
    for tokens in (1, 100, 128, 300, 2048):
        assert tenfold.linear_ms(tokens) == pytest.approx(10 * base.linear_ms(tokens))
    assert tenfold.boundaries == base.boundaries and tenfold.variant == base.variant
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(UserError, match="scale factor"):
            base.scaled(bad)


@pytest.mark.parametrize("variant", ["staircase", "linear"])
def test_the_linear_term_is_the_bands_then_the_line(variant):
    """ALP prices batches with ``linear_term().ms``, the profile's ``linear_ms``: a token count
    rounded up to its staircase band (staircase variant), the line beyond the last band or
    without bands, 0 ms for no tokens -- at every band edge, inside the bands and past them."""
    profile = default_profile(BUILTIN_MODELS["qwen2.5-14b"], pp_size=4).with_variant(variant)
    term = profile.linear_term()

    def reference(tokens):
        if tokens <= 0:
            return 0.0
        for upper, ms in profile.staircase if variant == "staircase" else ():
            if tokens <= upper:
                return ms
        return profile.alpha0 * tokens + profile.alpha1

    edges = [u + d for u, _ in profile.staircase for d in (-1, 0, 1)]
    for tokens in [-5, 0, 1, 2, 127, *edges, 5000, 20000, *range(0, 9000, 37)]:
        assert term.ms(tokens) == reference(tokens) == profile.linear_ms(tokens), tokens
    with pytest.raises(UserError, match="variant 'cubic'"):
        profile.linear_ms(100, "cubic")
    # a profile crosses processes by pickle, its compiled terms with it
    back = pickle.loads(pickle.dumps(profile))
    assert back == profile and all(back.linear_term().ms(t) == term.ms(t)
                                   for t in range(0, 9000, 37))
    assert profile.staircase and (variant == "staircase") == any(
        term.ms(u) != profile.alpha0 * u + profile.alpha1 for u, _ in profile.staircase)
