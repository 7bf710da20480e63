"""Tail latency vs PP_static per workload, and the synthetic prefill-/decode-heavy comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.experiments.fixed_rate import PolicyRun
from ppsched.experiments.paper_refs import DECODE_HEAVY_PP_OVER_TP, TAIL_REDUCTION
from ppsched.experiments.plotting import color, label, new_figure, save
from ppsched.experiments.tidy import stat

TAIL_METRICS = (("tpot_ms", "p90"), ("tpot_ms", "p99"), ("e2e_ms", "p90"), ("e2e_ms", "p99"))
MEAN_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


def policy_rows(workload: str, rate: float, runs: dict[str, PolicyRun]) -> list[dict]:
    rows = []
    for key, run in runs.items():
        s = run.outcome.summary
        row = {"workload": workload, "rate_rps": rate, "policy": key, "chosen": run.chosen,
               "slo_attainment": float(s.get("slo_attainment", np.nan)),
               "ds_holds": float(s.get("ds_holds", np.nan)),
               "bubble_fraction": float(s.get("bubble_fraction", np.nan))}
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            for which in ("mean", "p90", "p99"):
                row[f"{metric.split('_')[0]}_{which}_ms"] = stat(s, metric, which)
        rows.append(row)
    return rows


def tail_frame(rows: list[dict]) -> pd.DataFrame:
    """Adds ``rel_<metric>`` = value / PP_static's value − 1 (negative = reduction)."""
    frame = pd.DataFrame(rows)
    for metric, which in TAIL_METRICS:
        col = f"{metric.split('_')[0]}_{which}_ms"
        base = frame[frame.policy == "oracle-static"].set_index("workload")[col]
        frame[f"rel_{col}"] = frame[col] / frame["workload"].map(base) - 1.0
    return frame


def plot_tail(frame: pd.DataFrame, out_dir: str | Path, stem: str = "tail_latency_vs_static"
              ) -> tuple[Path, Path]:
    workloads = list(dict.fromkeys(frame["workload"]))
    fig, axes = new_figure(len(workloads), width=5.2, height=4.4)
    cols = [f"{m.split('_')[0]}_{w}_ms" for m, w in TAIL_METRICS]
    names = [f"{w.upper()} {m.split('_')[0].upper()}" for m, w in TAIL_METRICS]
    for ax, workload in zip(axes, workloads, strict=True):
        sub = frame[(frame.workload == workload) & (frame.policy != "oracle-static")]
        width = 0.8 / max(1, len(sub))
        x = np.arange(len(cols))
        for i, row in enumerate(sub.itertuples()):
            values = [1.0 + getattr(row, f"rel_{c}") for c in cols]
            ax.bar(x + (i - (len(sub) - 1) / 2) * width, values, width,
                   color=color(row.policy), label=label(row.policy))
        ref = TAIL_REDUCTION.get(workload)
        if ref:
            ax.scatter([0, 2], [1 + ref["tpot"], 1 + ref["e2e"]], marker="*", s=160,
                       color="black", zorder=5, label="paper: predictive")
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        ax.set_xticks(x, names, fontsize=8)
        rate = float(sub["rate_rps"].iloc[0]) if len(sub) else float("nan")
        chosen = frame[(frame.workload == workload) & (frame.policy == "oracle-static")]["chosen"]
        ax.set_title(f"{workload} @ {rate:.2f} req/s\n(1 = PP_static "
                     f"{chosen.iloc[0] if len(chosen) else '?'})", fontsize=9)
        ax.set_ylabel("latency / PP_static latency")
        ax.grid(axis="y", alpha=0.3)
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, frame, out_dir, stem)


def plot_synthetic(frame: pd.DataFrame, out_dir: str | Path, stem: str = "synthetic"
                   ) -> tuple[Path, Path]:
    workloads = list(dict.fromkeys(frame["workload"]))
    fig, axes = new_figure(len(workloads), width=6.0)
    cols = [f"{m.split('_')[0]}_mean_ms" for m in MEAN_METRICS]
    for ax, workload in zip(axes, workloads, strict=True):
        sub = frame[frame.workload == workload]
        width = 0.8 / max(1, len(sub))
        x = np.arange(len(cols))
        for i, row in enumerate(sub.itertuples()):
            ax.bar(x + (i - (len(sub) - 1) / 2) * width, [getattr(row, c) for c in cols], width,
                   color=color(row.policy), label=f"{label(row.policy)} {row.chosen}"
                   if row.policy == "oracle-static" else label(row.policy))
        ax.set_yscale("log")
        ax.set_xticks(x, ["mean TTFT", "mean TPOT", "mean E2E"])
        ax.set_ylabel("latency (ms, log scale)")
        ax.set_title(f"{workload} @ {float(sub['rate_rps'].iloc[0]):g} req/s")
        ax.grid(axis="y", alpha=0.3)
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, frame, out_dir, stem)


def pp_over_tp(frame: pd.DataFrame, pp_policy: str = "predictive") -> dict[str, float]:
    """Decode-heavy: TP4 mean latency / PP mean latency (paper: 2.82 / 1.30 / 1.38)."""
    sub = frame[frame.workload == "synthetic-decode"].set_index("policy")
    if "tp4" not in sub.index or pp_policy not in sub.index:
        return {}
    return {m: float(sub.loc["tp4", f"{m}_mean_ms"] / sub.loc[pp_policy, f"{m}_mean_ms"])
            for m in DECODE_HEAVY_PP_OVER_TP}
