"""Iteration-latency CDF (Azure: PP_static, greedy, predictive) and ALP predicted vs measured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.experiments.paper_refs import ITER_P90_MS
from ppsched.experiments.plotting import color, label, new_figure, save

CDF_POINTS = 400  # the CSV keeps this many quantiles per policy, not every iteration


def iteration_ms(iterations: pd.DataFrame) -> np.ndarray:
    """Stage-0 time per microbatch iteration (what the engine reports to policies), in ms."""
    frame = iterations[iterations["stage"] == 0] if "stage" in iterations else iterations
    if "measured_ms" in frame and frame["measured_ms"].notna().any():
        values = frame["measured_ms"].to_numpy(dtype=float)
    else:
        values = 1000.0 * (frame["end_s"] - frame["start_s"]).to_numpy(dtype=float)
    return values[np.isfinite(values)]


def cdf_frame(latencies: dict[str, np.ndarray]) -> pd.DataFrame:
    """policy, quantile, latency_ms: CDF_POINTS quantiles per policy (plus p90/p99 rows)."""
    rows = []
    qs = np.linspace(0.0, 1.0, CDF_POINTS)
    for key, values in latencies.items():
        if values.size == 0:
            continue
        for q, v in zip(qs, np.quantile(values, qs), strict=True):
            rows.append({"policy": key, "quantile": float(q), "latency_ms": float(v)})
    return pd.DataFrame(rows, columns=["policy", "quantile", "latency_ms"])


def percentile_table(latencies: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    return {k: {"p50": float(np.percentile(v, 50)), "p90": float(np.percentile(v, 90)),
                "p99": float(np.percentile(v, 99)), "iterations": int(v.size)}
            for k, v in latencies.items() if v.size}


def plot_cdf(latencies: dict[str, np.ndarray], out_dir: str | Path, title: str,
             stem: str = "iteration_latency_cdf") -> tuple[Path, Path]:
    fig, (ax,) = new_figure(1, width=7.0)
    stats = percentile_table(latencies)
    refs = {"oracle-static": "static", "greedy": "greedy", "predictive": "predictive"}
    for key, values in latencies.items():
        if not values.size:
            continue
        xs = np.sort(values)
        ys = np.arange(1, xs.size + 1) / xs.size
        ax.plot(xs, ys, color=color(key),
                label=f"{label(key)} (P90 {stats[key]['p90']:.1f} ms)")
        paper = ITER_P90_MS.get(refs.get(key, ""))
        if paper is not None:
            ax.scatter([paper], [0.9], marker="*", s=160, color=color(key), edgecolor="black",
                       zorder=5, label=f"paper P90 {label(key)}: {paper} ms")
    ax.axhline(0.9, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("stage-0 iteration latency (ms)")
    ax.set_ylabel("fraction of iterations (CDF)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return save(fig, cdf_frame(latencies), out_dir, stem)


ALP_WARMUP = 50  # iterations ALP learns from before its errors count


def alp_frame(iterations: pd.DataFrame, config=None) -> pd.DataFrame:
    """Predicted vs measured stage-0 time (ms), ``source`` saying which prediction:

    - ``online replay``: a fresh ALP (the run's own default profile) replayed over the run's
      stage-0 iterations in time order — predict each batch, then learn its measured time —
      scored after ALP_WARMUP iterations. Needs ``config`` (the RunConfig).
    - ``controller``: the predictive controller's own ``predicted_stage_ms`` at decision time;
      it is a prediction for the batch it planned, which may differ from the one that ran.
    """
    cols = ["source", "predicted_ms", "measured_ms", "kind", "prefill_tokens", "decode_reqs"]
    if "measured_ms" not in iterations:
        return pd.DataFrame(columns=cols)
    frame = iterations[iterations["stage"] == 0] if "stage" in iterations else iterations
    frame = frame[frame["measured_ms"].notna() & (frame["measured_ms"] > 0)]
    frame = frame.sort_values("start_s", kind="stable")
    parts = []
    if config is not None:
        parts.append(_replay(frame, config))
    if "predicted_ms" in frame:
        told = frame[frame["predicted_ms"].notna()].assign(source="controller")
        parts.append(told)
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    return out[[c for c in cols if c in out]]


def _replay(frame: pd.DataFrame, config) -> pd.DataFrame:
    from ppsched.core.batch import BatchShape
    from ppsched.dcp.registry import default_predictor

    predictor = default_predictor(config.policy_context())
    rows = frame[["prefill_tokens", "prefix_tokens", "decode_reqs", "decode_ctx_sum",
                  "measured_ms", "kind"]].to_numpy(dtype=object)
    predicted = np.full(len(rows), np.nan)
    for i, (extend, prefix, reqs, ctx, measured, _kind) in enumerate(rows):
        # One prefill piece per batch: iterations.csv keeps the batch's totals only.
        piece = ((int(prefix), int(extend)),) if int(extend) > 0 else ()
        shape = BatchShape(piece, int(reqs), int(ctx))
        if shape.kind == "empty":
            continue
        predicted[i] = predictor.predict(shape)
        predictor.update(shape, float(measured))
    out = frame.assign(predicted_ms=predicted, source="online replay").iloc[ALP_WARMUP:]
    return out[out["predicted_ms"].notna()]


def mape(frame: pd.DataFrame, source: str | None = "online replay") -> float:
    if source is not None and "source" in frame:
        frame = frame[frame["source"] == source]
    if frame.empty:
        return float("nan")
    p = frame["predicted_ms"].to_numpy(dtype=float)
    m = frame["measured_ms"].to_numpy(dtype=float)
    return float(np.mean(np.abs(p - m) / m))


def plot_alp(frame: pd.DataFrame, out_dir: str | Path, title: str,
             stem: str = "alp_predicted_vs_measured") -> tuple[Path, Path]:
    fig, (ax,) = new_figure(1, width=6.0, height=5.6)
    colors = {"online replay": color("predictive"), "controller": "#ff7f0e"}
    for source, group in frame.groupby("source", sort=False):
        ax.scatter(group["measured_ms"], group["predicted_ms"], s=4, alpha=0.3,
                   color=colors.get(str(source)),
                   label=f"{source}: MAPE {100 * mape(frame, str(source)):.1f}% "
                         f"(n={len(group)})")
    if not frame.empty:
        top = float(max(frame["measured_ms"].max(), frame["predicted_ms"].max())) * 1.05
        ax.plot([0, top], [0, top], color="black", lw=0.8, ls="--", label="predicted = measured")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
    ax.set_xlabel("measured stage-0 latency (ms)")
    ax.set_ylabel("ALP predicted latency (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return save(fig, frame, out_dir, stem)
