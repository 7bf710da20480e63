"""Issue 14's table from ``ppsched goodput`` outputs: predictive vs oracle-static, greedy and
predictive-paper per (model, workload, SLO scale), with the seeds' spread.

Usage: .venv/bin/python bench/dcp_table.py OUT_DIR [OUT_DIR ...]   (each holds a goodput.csv)
A cell: goodput_rps (the lowest over seeds) and, with several seeds, [min..max of per_seed];
predictive's ratio to oracle-static; "ok" when predictive >= 0.97x oracle-static, >= greedy and
>= predictive-paper (the issue's target), "-" when every policy is 0.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

POLICIES = ("oracle-static", "predictive", "greedy", "predictive-paper")


def cell(row: dict | None) -> str:
    if row is None:
        return "n/a"
    seeds = [float(x) for x in str(row.get("per_seed", "")).split(";") if x.strip()]
    spread = f" [{min(seeds):g}..{max(seeds):g}]" if len(seeds) > 1 else ""
    chosen = f" ({row['chosen']})" if row.get("chosen") else ""
    return f"{float(row['goodput_rps']):g}{spread}{chosen}"


def main(dirs: list[str]) -> int:
    rows: dict[tuple[str, str, float], dict[str, dict]] = {}
    for d in dirs:
        with open(Path(d) / "goodput.csv") as f:
            for r in csv.DictReader(f):
                key = (r["model"], r["workload"], float(r["slo_scale"]))
                rows.setdefault(key, {})[r["policy"]] = r
    print("| model | workload | SLO | " + " | ".join(POLICIES) + " | predictive / oracle | "
          "target |")
    print("|---|---|---|" + "---|" * (len(POLICIES) + 2))
    for (model, workload, scale), by in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                            -kv[0][2])):
        g = {p: float(by[p]["goodput_rps"]) if p in by else None for p in POLICIES}
        oracle, pred = g["oracle-static"], g["predictive"]
        ratio = f"{pred / oracle:.2f}x" if oracle and pred is not None else "n/a"
        known = [v for v in g.values() if v is not None]
        if not known or max(known) == 0:
            target = "-"
        elif pred is None or oracle is None:
            target = "n/a"
        else:
            ok = pred >= 0.97 * oracle and all(pred >= (g[p] or 0.0)
                                               for p in ("greedy", "predictive-paper"))
            target = "ok" if ok else "**short**"
        print(f"| {model} | {workload} | {scale:g} | "
              + " | ".join(cell(by.get(p)) for p in POLICIES) + f" | {ratio} | {target} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
