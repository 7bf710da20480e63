"""What ``ppsched plan`` writes: plan.csv (one row per configuration x router), plan_points.png
(SLO attainment vs boxes) with plan_points.csv (every fleet run), and the printed table."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from ppsched.experiments.plotting import new_figure, save
from ppsched.experiments.policies import get_policy
from ppsched.fleet.capacity import Plan, PlanAnswer

ROUTER_STYLES = {"random": ("#7f7f7f", "v", ":"), "round_robin": ("#1f77b4", "o", "-"),
                 "cache_aware": ("#2ca02c", "s", "--"), "power_of_two": ("#d62728", "^", "-.")}
PLAN_COLUMNS = (
    "model", "workload", "config", "config_label", "router", "rate_rps", "slo_scale", "boxes",
    "gpus_per_box", "gpus", "gpu_hours_per_million", "box_goodput_rps", "lower_bound_boxes",
    "boxes_minus_bound", "per_box_rate_vs_one_box", "attainment", "p90_ttft_ms", "p90_tpot_ms",
    "busiest_box_share", "busiest_box_share_per_poll", "prefix_hit_rate", "boxes_by_rate",
    "tried", "window_s", "seed")


def plan_table(plan: Plan, *, model: str, workload: str, seed: int, slo_scale: float,
               gpus_per_box: dict[str, int]) -> pd.DataFrame:
    peak = plan.profile.peak
    by_key = {(p.config, p.router, p.rate, p.boxes): p for p in plan.points}
    rows = []
    for ans in plan.answers:
        boxes_at = {rate: s.boxes for rate, s in ans.searches}
        search = dict(ans.searches)[peak]
        gpus = gpus_per_box[ans.config]
        found = all(b > 0 for b in boxes_at.values())
        point = by_key.get((ans.config, ans.router, peak, search.boxes))
        rows.append({
            "model": model, "workload": workload, "config": ans.config,
            "config_label": get_policy(ans.config).label, "router": ans.router,
            "rate_rps": plan.profile.describe(), "slo_scale": slo_scale,
            "boxes": search.boxes if found else math.nan, "gpus_per_box": gpus,
            "gpus": search.boxes * gpus if found else math.nan,
            "gpu_hours_per_million": _gpu_hours_per_million(plan, boxes_at, gpus) if found
            else math.nan,
            "box_goodput_rps": ans.box_goodput, "lower_bound_boxes": search.lower_bound,
            "boxes_minus_bound": search.boxes - search.lower_bound if found else math.nan,
            "per_box_rate_vs_one_box": (peak / search.boxes / ans.box_goodput
                                        if found and ans.box_goodput > 0 else math.nan),
            "attainment": point.attainment if point else math.nan,
            "p90_ttft_ms": point.p90_ttft_ms if point else math.nan,
            "p90_tpot_ms": point.p90_tpot_ms if point else math.nan,
            "busiest_box_share": point.busiest_share if point else math.nan,
            "busiest_box_share_per_poll": point.busiest_share_per_poll if point else math.nan,
            "prefix_hit_rate": point.prefix_hit_rate if point else math.nan,
            "boxes_by_rate": ";".join(f"{r:g}:{b}" for r, b in boxes_at.items()),
            "tried": _tried(ans), "window_s": f"{plan.window.warmup_s:g}+"
            f"{plan.window.measure_s:g}+{plan.window.cooldown_s:g}", "seed": seed})
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def _gpu_hours_per_million(plan: Plan, boxes_at: dict[float, int], gpus: int) -> float:
    gpu_hours = sum(boxes_at[s.rate] * gpus * s.hours for s in plan.profile.segments)
    return gpu_hours / plan.profile.requests_per_day() * 1e6


def _tried(ans: PlanAnswer) -> str:
    return " | ".join(f"{rate:g}: " + ";".join(f"{n}:{int(ok)}" for n, ok in s.tried)
                      for rate, s in ans.searches)


def points_table(plan: Plan) -> pd.DataFrame:
    frame = pd.DataFrame([asdict(p) for p in plan.points])
    return frame.sort_values(["config", "router", "rate", "boxes"]) if len(frame) else frame


def plot_attainment(plan: Plan, out_dir: Path, title: str) -> Path:
    """One panel per configuration: measured SLO attainment vs boxes at the peak rate, one line
    per router; filled markers passed the sustained criterion; the dotted line is N0."""
    configs = list(dict.fromkeys(a.config for a in plan.answers))
    fig, axes = new_figure(len(configs))
    peak = plan.profile.peak
    for ax, config in zip(axes, configs, strict=True):
        for ans in (a for a in plan.answers if a.config == config):
            pts = sorted((p for p in plan.points if p.config == config
                          and p.router == ans.router and p.rate == peak), key=lambda p: p.boxes)
            if not pts:
                continue
            color, marker, dash = ROUTER_STYLES.get(ans.router, ("black", "o", "-"))
            ax.plot([p.boxes for p in pts], [p.attainment for p in pts], color=color,
                    linestyle=dash, label=ans.router)
            for p in pts:
                ax.plot(p.boxes, p.attainment, marker=marker, color=color, markersize=8,
                        markerfacecolor=color if p.passed else "white")
        bound = next((dict(a.searches)[peak].lower_bound for a in plan.answers
                      if a.config == config), 0)
        if bound:
            ax.axvline(bound, color="black", linestyle=":", linewidth=1,
                       label=f"N0 = ceil(rate / one box) = {bound}")
        ax.axhline(0.9, color="grey", linewidth=0.8)
        ax.set_title(get_policy(config).label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("boxes")
        ax.set_ylabel("SLO attainment, measured window")
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{title} (filled: sustained criterion passed)")
    png, _ = save(fig, points_table(plan), out_dir, "plan_points")
    return png


def format_plan(table: pd.DataFrame) -> str:
    cols = ["config", "router", "boxes", "gpus", "gpu_hours_per_million", "box_goodput_rps",
            "lower_bound_boxes", "attainment", "busiest_box_share_per_poll"]
    shown = table[cols].copy()
    for col in ("gpu_hours_per_million", "box_goodput_rps", "attainment",
                "busiest_box_share_per_poll"):
        shown[col] = shown[col].map(lambda v: f"{v:.3g}" if pd.notna(v) else "-")
    return shown.to_string(index=False)
