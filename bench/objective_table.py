"""A candidate predictive rule's controller table beside the pinned figures of the rule on main,
one row per cell, and the aggregates a rule is judged by (geometric mean of predictive /
oracle-static over the cells where oracle-static has a goodput, a lost cell counting as zero;
the lowest cell; the cells below 0.93x).

Usage: python bench/objective_table.py ROOT [--csv OUT] [--update-pinned]
ROOT holds ``ppsched goodput --policies predictive --seeds 3 --verify`` outputs of the candidate
laid out as the table's runs lay them out: ROOT/goodput/<model>-azure-conv (``make paper``'s
groups), ROOT/heldout/<group> and ROOT/heldout-models/<group> (``bench/run_heldout.sh``). The
pinned tables (results/pinned/goodput.csv, heldout.csv, heldout_models.csv) give oracle-static
and the rule on main, measured with the same seeds and method. ``--update-pinned``: the pinned
tables' predictive rows become the candidate's (when the candidate is adopted).
``bench/run_objective_table.sh`` writes ROOT, and also ROOT/recorded/<trace> (recorded
arrivals, one seed, as results/pinned/recorded_arrivals.csv was measured): printed beside the
pinned best fixed chunk and the rule on main.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

PINNED = Path(__file__).resolve().parents[1] / "results" / "pinned"
TABLES = {"paper": ("goodput", "goodput.csv"), "heldout": ("heldout", "heldout.csv"),
          "heldout-models": ("heldout-models", "heldout_models.csv")}


def model_name(model: str) -> str:
    """A config.json folder is named as the pinned table names it (bench/models/<name>)."""
    return f"bench/models/{Path(model).name}" if "/" in model else model


def new_rows(root: Path, folder: str) -> pd.DataFrame:
    files = sorted((root / folder).glob("*/goodput.csv"))
    if not files:
        raise SystemExit(f"{root / folder}: no */goodput.csv (expected the table's runs)")
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    frame = frame[frame["policy"] == "predictive"].copy()
    frame["model"] = frame["model"].map(model_name)
    return frame


def cells(root: Path) -> pd.DataFrame:
    out = []
    for group, (folder, pinned_name) in TABLES.items():
        pinned = pd.read_csv(PINNED / pinned_name)
        new = new_rows(root, folder)
        for _, row in new.iterrows():
            same = (pinned["model"] == row["model"]) & (pinned["workload"] == row["workload"]) \
                & (pinned["slo_scale"].astype(float).round(3) == round(float(row["slo_scale"]), 3))
            oracle = pinned[same & (pinned["policy"] == "oracle-static")]["goodput_rps"]
            before = pinned[same & (pinned["policy"] == "predictive")]["goodput_rps"]
            if oracle.empty or before.empty:
                raise SystemExit(f"{pinned_name}: no oracle-static or predictive row for "
                                 f"{row['model']} {row['workload']} {row['slo_scale']}")
            o, b, a = float(oracle.iloc[0]), float(before.iloc[0]), float(row["goodput_rps"])
            out.append({"table": group, "model": row["model"], "workload": row["workload"],
                        "slo_scale": float(row["slo_scale"]), "oracle_static_rps": o,
                        "before_rps": b, "after_rps": a, "after_per_seed": row["per_seed"],
                        "after_verify": row["verify"],
                        "before_vs_oracle": b / o if o > 0 else math.nan,
                        "after_vs_oracle": a / o if o > 0 else math.nan})
    return pd.DataFrame(out)


def geomean(values: pd.Series) -> float:
    """Over every cell given; a cell at zero makes it zero (a lost cell is not skipped)."""
    if not len(values):
        return math.nan
    if (values <= 0).any():
        return 0.0
    return float(math.exp(values.map(math.log).mean()))


def summary(table: pd.DataFrame) -> list[str]:
    scored = table[table["oracle_static_rps"] > 0]
    lines = []
    for name, part in [("all", scored), *scored.groupby("table")]:
        lines.append(f"{name}: {len(part)} cells; predictive / oracle-static geomean before "
                     f"{geomean(part['before_vs_oracle']):.3f}, after "
                     f"{geomean(part['after_vs_oracle']):.3f}; lowest before "
                     f"{part['before_vs_oracle'].min():.3f}, after "
                     f"{part['after_vs_oracle'].min():.3f}; cells below 0.93: before "
                     f"{int((part['before_vs_oracle'] < 0.93).sum())}, after "
                     f"{int((part['after_vs_oracle'] < 0.93).sum())}")
        held = part[(part["before_vs_oracle"] > 0) & (part["after_vs_oracle"] > 0)]
        lines.append(f"{name}: over the {len(held)} cells both hold, geomean before "
                     f"{geomean(held['before_vs_oracle']):.3f}, after "
                     f"{geomean(held['after_vs_oracle']):.3f}")
    return lines


def recorded(root: Path) -> list[str]:
    """Recorded arrivals: the candidate's goodput beside the pinned best fixed chunk's and the
    rule on main's, per trace (none when ROOT/recorded holds no run)."""
    pinned = pd.read_csv(PINNED / "recorded_arrivals.csv")
    lines = []
    for path in sorted((root / "recorded").glob("*/goodput.csv")):
        row = pd.read_csv(path)
        # the pinned table keeps 4 significant digits: compare at that precision
        new = float(f'{float(row[row["policy"] == "predictive"]["goodput_rps"].iloc[0]):.4g}')
        trace = pinned[pinned["workload"] == path.parent.name]
        fixed = trace[trace["policy"].str.startswith("static-")]
        best = fixed.loc[fixed["goodput_rps"].idxmax()]
        main_rule = float(trace[trace["policy"] == "predictive"]["goodput_rps"].iloc[0])
        lines.append(f"recorded {path.parent.name}: predictive {new:g} req/s; on main "
                     f"{main_rule:g}; best fixed {best['policy']} {float(best['goodput_rps']):g}"
                     f" ({'at or above' if new >= float(best['goodput_rps']) else 'below'})")
    return lines


def update_pinned(root: Path) -> None:
    for folder, pinned_name in TABLES.values():
        pinned = pd.read_csv(PINNED / pinned_name)
        new = new_rows(root, folder)[list(pinned.columns)]
        keep = pinned[pinned["policy"] != "predictive"]
        merged = pd.concat([keep, new], ignore_index=True)
        merged = merged.sort_values(["model", "workload", "policy", "slo_scale"],
                                    ascending=[True, True, True, False], kind="stable")
        merged.to_csv(PINNED / pinned_name, index=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--csv", type=Path, help="write the per-cell table here")
    ap.add_argument("--update-pinned", action="store_true")
    args = ap.parse_args()
    table = cells(args.root)
    lines = summary(table)
    if args.csv:
        table.to_csv(args.csv, index=False, float_format="%.4g")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n".join(lines + recorded(args.root)))
    if args.update_pinned:
        update_pinned(args.root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
