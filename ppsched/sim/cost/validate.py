"""MAPE of the cost model against the measured medians it is built from.

(a) self: every profiled row (repeats kept) predicted with its own profile in the pool: what
    the lookup tables lose (averaging repeated rows, the regular grids), plus attention and CPU;
(a') interpolation hold-out: every other profiled token count removed, predicted from the rest;
(b) leave-one-model-out: each profiled model's ops predicted from the *other* models' profiles
    (nearest shape + FLOP ratio), at every TP degree and token count it was profiled at.
All on the profiles' own GPU (a100-80g), so no hardware correction enters.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.sim.cost.attention import (
    PROFILE_HEAD_DIM,
    PROFILE_KV_HEADS,
    PROFILE_Q_HEADS,
    AttentionModel,
)
from ppsched.sim.cost.linear import scale_op, token_curve
from ppsched.sim.cost.overhead import CPU_PARTS, OverheadModel
from ppsched.sim.cost.profiles import (
    ALL_OPS,
    GEMM_OPS,
    OpProfile,
    load_attention_profile,
    load_cpu_profile,
    load_op_profiles,
    profile_dir,
    read_attention_rows,
)
from ppsched.sim.cost.validate_lomo import lomo_detail
from ppsched.sim.hardware import PROFILE_HARDWARE, get_hardware

MLP_OPS = ("mlp_up_proj", "mlp_down_proj")


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - meas) / meas) * 100.0)


def _predict(target: OpProfile, pool: tuple[OpProfile, ...], exclude: str | None) -> np.ndarray:
    hw = get_hardware(PROFILE_HARDWARE)
    scaled = scale_op(target.op, target.dims, pool, exclude, tp=target.tp,
                      gated=target.gated, kernel=target.kernel, lanes=target.lanes)
    ms, _ = token_curve(scaled, hw, hw)
    return ms[target.tokens]


def shared_hidden_models(pool: tuple[OpProfile, ...]) -> tuple[str, ...]:
    """Profiled models whose hidden size another profiled model also has."""
    hidden = {p.model: p.dims[0] for p in pool if p.op == "input_layernorm"}
    return tuple(sorted(m for m, h in hidden.items()
                        if sum(1 for other in hidden.values() if other == h) > 1))


def _raw_rows(data_dir: Path) -> dict[tuple[str, int, str], tuple[np.ndarray, np.ndarray]]:
    """Every profiled row as measured (repeats kept): (model, tp, op) -> (tokens, median ms)."""
    out: dict[tuple[str, int, str], tuple[np.ndarray, np.ndarray]] = {}
    for path in sorted(profile_dir(data_dir).glob("*/mlp.csv")):
        frame = pd.read_csv(path)
        for tp, part in frame.groupby("num_tensor_parallel_workers"):
            for op in ALL_OPS:
                col = f"time_stats.{op}.median"
                if col in part.columns:
                    ok = part[col].to_numpy() > 0
                    out[(path.parent.name, int(tp), op)] = (
                        part["num_tokens"].to_numpy()[ok], part[col].to_numpy()[ok])
    return out


def _self_and_holdout(pool: tuple[OpProfile, ...], data_dir: Path) -> tuple[dict, dict]:
    hw = get_hardware(PROFILE_HARDWARE)
    raw = _raw_rows(data_dir)
    self_err: dict[str, list[float]] = defaultdict(list)
    hold_err: dict[str, list[float]] = defaultdict(list)
    for prof in pool:
        ms, _ = token_curve(scale_op(prof.op, prof.dims, (prof,), gated=prof.gated,
                                     kernel=prof.kernel, lanes=prof.lanes), hw, hw)
        tokens, measured = raw[(prof.model, prof.tp, prof.op)]
        self_err[prof.op].append(_mape(ms[tokens], measured))
        keep = np.ones(len(prof.tokens), dtype=bool)
        keep[1:-1:2] = False  # drop every other inner token count
        thinned = dataclasses.replace(prof, tokens=prof.tokens[keep],
                                      median_ms=prof.median_ms[keep], cv=prof.cv[keep])
        dropped = dataclasses.replace(prof, tokens=prof.tokens[~keep],
                                      median_ms=prof.median_ms[~keep], cv=prof.cv[~keep])
        hold_err[prof.op].append(_mape(_predict(dropped, (thinned,), None), dropped.median_ms))
    return ({op: float(np.mean(v)) for op, v in self_err.items()},
            {op: float(np.mean(v)) for op, v in hold_err.items()})


def _leave_one_model_out(pool: tuple[OpProfile, ...]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for prof in pool:
        pred = _predict(prof, pool, exclude=prof.model)
        out[prof.model][prof.op].append(_mape(pred, prof.median_ms))
    return {m: {op: float(np.mean(v)) for op, v in ops.items()} for m, ops in out.items()}


def _attention_self(data_dir: Path) -> dict[str, float]:
    """Against every raw row of the profile (repeats kept, reshape times included)."""
    model = AttentionModel(load_attention_profile(data_dir), PROFILE_Q_HEADS, PROFILE_KV_HEADS,
                           PROFILE_HEAD_DIM)
    return _attention_errors(model, read_attention_rows(data_dir))


def _attention_errors(model: AttentionModel, rows: pd.DataFrame) -> dict[str, float]:
    """MAPE of the attention model against the rows' measured ``total`` (decode and prefill)."""
    dec = rows[~rows["is_prefill"]]
    pre = rows[rows["is_prefill"]]
    dec_pred = np.array([model.decode_ms(int(b), int(b) * int(kv))
                         for b, kv in zip(dec["batch_size"], dec["kv_cache_size"], strict=True)])
    pre_pred = np.array([model.prefill_ms(((int(kv), int(c)),))
                         for c, kv in zip(pre["prefill_chunk_size"], pre["kv_cache_size"],
                                          strict=True)])
    return {"attn_decode": _mape(dec_pred, dec["total"].to_numpy()),
            "attn_prefill": _mape(pre_pred, pre["total"].to_numpy())}


def _attention_holdout(data_dir: Path) -> dict[str, float]:
    """Every other profiled context/prefix value removed, predicted from the rest."""
    frame = load_attention_profile(data_dir)
    kv_values = np.sort(frame["kv_cache_size"].unique())
    dropped_kv = set(kv_values[1:-1:2].tolist())
    held = frame["kv_cache_size"].isin(dropped_kv)
    model = AttentionModel(frame[~held], PROFILE_Q_HEADS, PROFILE_KV_HEADS, PROFILE_HEAD_DIM)
    test = frame[held]
    return _attention_errors(model, test)


def _cpu_self(data_dir: Path) -> dict[str, float]:
    frame = load_cpu_profile(data_dir)
    model = OverheadModel(frame)
    pred = np.array([model.cpu_ms(int(b)) for b in frame["batch_size"]])
    return {"cpu_overhead": _mape(pred, frame[list(CPU_PARTS)].sum(axis=1).to_numpy())}


def validate(data_dir: Path) -> dict[str, object]:
    pool = load_op_profiles(data_dir)
    self_mape, holdout = _self_and_holdout(pool, data_dir)
    lomo = _leave_one_model_out(pool)
    shared = shared_hidden_models(pool)
    group: dict[str, float] = {}
    for op in ALL_OPS:
        vals = [lomo[m][op] for m in shared if op in lomo[m]]
        if vals:
            group[op] = float(np.mean(vals))
    mlp_shared = float(np.mean([lomo[m][op] for m in shared for op in MLP_OPS]))
    gemm_shared = float(np.mean([lomo[m][op] for m in shared for op in GEMM_OPS]))
    return {
        "profile_hardware": PROFILE_HARDWARE,
        "self": {**self_mape, **_attention_self(data_dir), **_cpu_self(data_dir)},
        "interpolation_holdout": {**holdout, **_attention_holdout(data_dir)},
        "leave_one_model_out": lomo,
        "shared_hidden_models": list(shared),
        "leave_one_model_out_shared_hidden": group,
        "leave_one_model_out_detail": lomo_detail(pool),
        "summary": {"lomo_mlp_mape_shared_hidden": mlp_shared,
                    "lomo_gemm_mape_shared_hidden": gemm_shared,
                    "target_mlp_mape": 5.0, "meets_target": mlp_shared <= 5.0},
    }


def format_report(result: dict[str, object]) -> str:
    """Plain-text tables: one row per op, MAPE in percent."""
    lomo: dict[str, dict[str, float]] = result["leave_one_model_out"]  # type: ignore[assignment]
    models = sorted(lomo)
    short = [m[:12] for m in models]
    lines = [f"MAPE % vs measured medians on {result['profile_hardware']}",
             "", f"{'op':26s} {'self':>7s} {'holdout':>8s}   leave-one-model-out: "
             + " ".join(f"{s:>12s}" for s in short) + f" {'shared-hid':>11s}"]
    self_m: dict[str, float] = result["self"]  # type: ignore[assignment]
    hold: dict[str, float] = result["interpolation_holdout"]  # type: ignore[assignment]
    group: dict[str, float] = result["leave_one_model_out_shared_hidden"]  # type: ignore
    for op in ALL_OPS:
        cells = " ".join(f"{lomo[m][op]:12.2f}" if op in lomo[m] else f"{'-':>12s}"
                         for m in models)
        lines.append(f"{op:26s} {self_m.get(op, float('nan')):7.2f} "
                     f"{hold.get(op, float('nan')):8.2f}   {'':21s}{cells} "
                     f"{group.get(op, float('nan')):11.2f}")
    for op in ("attn_decode", "attn_prefill", "cpu_overhead"):
        held = f"{hold[op]:8.2f}" if op in hold else ""
        lines.append(f"{op:26s} {self_m[op]:7.2f} {held}")
    summary: dict[str, object] = result["summary"]  # type: ignore[assignment]
    lines += ["", f"models sharing a hidden size with another profiled model: "
                  f"{', '.join(result['shared_hidden_models'])}",  # type: ignore[arg-type]
              f"leave-one-model-out MLP (up+down) MAPE on them: "
              f"{summary['lomo_mlp_mape_shared_hidden']:.2f}% (target <= 5%: "
              f"{'met' if summary['meets_target'] else 'NOT met'}); all four GEMMs: "
              f"{summary['lomo_gemm_mape_shared_hidden']:.2f}%"]
    return "\n".join(lines + _detail_lines(result["leave_one_model_out_detail"]))  # type: ignore


def _detail_lines(detail: dict) -> list[str]:
    def cells(values: dict[str, float]) -> str:
        return "  ".join(f"{k} {v:.2f}" for k, v in values.items())

    step = detail["step_placement"]
    layer = detail["per_layer_time_weighted"]
    return ["", "leave-one-model-out, every profiled row of every op (MAPE %):",
            f"  overall {detail['overall_mape']:.2f} (target <= 4); worst model "
            f"{detail['worst_model']} {detail['worst_model_mape']:.2f} (target <= 6)",
            f"  by model: {cells(detail['by_model'])}",
            f"  by TP:    {cells(detail['by_tp'])}",
            f"  by tokens: {cells(detail['by_tokens'])}",
            f"  beyond (pool cut at {detail['beyond_cut']['cut_tokens']}, rows above predicted "
            f"by the long-token rule): {detail['beyond_cut']['mape']:.2f}",
            f"  per-layer time-weighted (sum of a layer's ops): {layer['mape']:.2f}",
            f"  step placement: {step['placed']}/{step['measured_steps']} measured steps "
            f"({step['fraction']:.1%})"]
