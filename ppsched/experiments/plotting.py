"""Shared matplotlib setup: headless backend, one style, save PNG + matching CSV together."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: figures are files, never windows
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ppsched.experiments.policies import POLICIES  # noqa: E402

# One colour per policy everywhere, so figures read together.
POLICY_COLORS = {
    "tp4": "#7f7f7f", "static-2048": "#d62728", "oracle-static": "#ff7f0e",
    "sglang-dynamic": "#9467bd", "greedy": "#2ca02c", "predictive": "#1f77b4",
    "predictive-ds": "#17becf", "predictive-paper": "#8c564b", "greedy-paper": "#bcbd22",
}


# Distinct markers and dashes so that policies with equal results stay visible.
POLICY_STYLES = {"oracle-static": ("s", "--"), "static-2048": ("o", "-"), "tp4": ("v", "-"),
                 "sglang-dynamic": ("D", "-"), "greedy": ("^", "-"), "predictive": ("o", "-"),
                 "predictive-ds": ("P", ":"), "predictive-paper": ("X", "-."),
                 "greedy-paper": ("^", "-.")}


def line_style(policy_key: str) -> dict:
    marker, dash = POLICY_STYLES.get(policy_key, ("o", "-"))
    return {"color": color(policy_key), "marker": marker, "linestyle": dash,
            "label": label(policy_key)}


def label(policy_key: str) -> str:
    policy = POLICIES.get(policy_key)
    return policy.label if policy else policy_key


def color(policy_key: str) -> str | None:
    return POLICY_COLORS.get(policy_key)


def new_figure(ncols: int = 1, width: float = 6.4, height: float = 4.4):
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def save(fig, frame: pd.DataFrame, out_dir: str | Path, stem: str) -> tuple[Path, Path]:
    """Write ``stem.png`` and ``stem.csv`` (the numbers behind the figure)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png, csv = out / f"{stem}.png", out / f"{stem}.csv"
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    frame.to_csv(csv, index=False, float_format="%.6g")
    return png, csv
