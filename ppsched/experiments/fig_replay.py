"""Azure 15-minute replay at 0.9x speed: SLO attainment per policy at TPOT SLO 200 and 150 ms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.experiments.paper_refs import REPLAY_ATTAINMENT
from ppsched.experiments.plotting import label, new_figure, save


def plot_replay(frame: pd.DataFrame, out_dir: str | Path, title: str,
                stem: str = "azure_replay_attainment") -> tuple[Path, Path]:
    """``frame``: policy, chosen, tpot_slo_ms, slo_attainment (one row per policy and SLO)."""
    fig, (ax,) = new_figure(1, width=10.0)
    policies = list(dict.fromkeys(frame["policy"]))
    slos = sorted(frame["tpot_slo_ms"].unique(), reverse=True)
    width = 0.8 / max(1, len(slos))
    x = np.arange(len(policies))
    shades = ["#1f77b4", "#aec7e8", "#9edae5"]
    for i, slo in enumerate(slos):
        sub = frame[frame.tpot_slo_ms == slo].set_index("policy").reindex(policies)
        ax.bar(x + (i - (len(slos) - 1) / 2) * width, 100 * sub["slo_attainment"], width,
               color=shades[i % len(shades)], label=f"TPOT SLO {slo:g} ms (TTFT 2000 ms)")
    paper = [(j, REPLAY_ATTAINMENT[p]) for j, p in enumerate(policies) if p in REPLAY_ATTAINMENT]
    if paper:
        js, vs = zip(*paper, strict=True)
        offset = (0 - (len(slos) - 1) / 2) * width
        ax.scatter(np.array(js) + offset, 100 * np.array(vs), marker="*", s=160, color="black",
                   zorder=5, label="paper (TPOT SLO 200 ms)")
    chosen = frame.drop_duplicates("policy").set_index("policy")["chosen"]
    names = [f"{label(p)}\n{chosen[p]}" if p == "oracle-static" else label(p) for p in policies]
    ax.set_xticks(x, names, fontsize=7, rotation=20)
    ax.set_ylabel("SLO attainment (% of requests)")
    ax.set_ylim(0, 105)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, frame, out_dir, stem)
