"""Decision cost of the chunk controllers on this tree beside another tree's, interleaved.

Usage: .venv/bin/python bench/decision_cost.py --other TREE [--runs 21] [--pin CSV]
       .venv/bin/python bench/decision_cost.py --table CSV
TREE: a checkout of the commit to compare with, its native modules built there (``make
native``). Each run is one ``bench/bench_dcp.py --calls 5000`` per tree, the two in turn, so
the shared host's load falls on both alike. ``--pin`` writes every run's figures (CSV);
``--table`` prints bench/dcp.md's table from them: medians over the runs, and the quartiles of
the full decisions (the host is noisy; a single run says little).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIELDS = ("tree", "run", "controller", "us_per_call", "us_per_decision")
LABELS = {
    "predictive": "`predictive` (plain loop, SteadyRule)",
    "predictive@mixed": "`predictive@mixed` (SloRule)",
    "predictive@mixed+roomy-kv": "`predictive@mixed+roomy-kv` (every size within the KV "
                                 "ceiling)",
}


def bench(tree: Path, calls: int) -> list[tuple[str, float, float]]:
    out = subprocess.run([sys.executable, "bench/bench_dcp.py", "--calls", str(calls)],
                         cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines()[2:]:
        name, per_call, per_decision = line.split()
        rows.append((name, float(per_call), float(per_decision)))
    return rows


def measure(other: Path, runs: int, calls: int, pin: Path | None) -> int:
    rows = []
    for run in range(runs):
        for tag, tree in (("this", HERE), ("other", other)):
            rows += [(tag, run, *r) for r in bench(tree, calls)]
        print(f"run {run + 1}/{runs}", file=sys.stderr, flush=True)
    if pin is not None:
        with pin.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            w.writerows(rows)
    table(rows)
    return 0


def table(rows: list[tuple]) -> None:
    by: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for tag, _, name, per_call, per_decision in rows:
        by.setdefault((tag, name), []).append((float(per_call), float(per_decision)))
    print("| controller | per call | per full decision (quartiles) | the other tree: per full "
          "decision (quartiles) |")
    print("|---|---|---|---|")
    for name in dict.fromkeys(n for t, n in by if t == "this"):
        cells = []
        for tag in ("this", "other"):
            runs = by.get((tag, name), [])
            full = [d for _, d in runs]
            q1, _, q3 = statistics.quantiles(full, n=4) if len(full) > 1 else (full * 3)[:3]
            cells.append(f"{statistics.median(full):.2f} ({q1:.1f}–{q3:.1f})")
            if tag == "this":
                cells.insert(0, f"{statistics.median(c for c, _ in runs):.2f}")
        print(f"| {LABELS.get(name, f'`{name}`')} | {' | '.join(cells)} |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--other", type=Path, help="the checkout to compare with (native built)")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--pin", type=Path, help="write every run's figures here (CSV)")
    ap.add_argument("--table", type=Path, help="print the table from a pinned CSV")
    args = ap.parse_args()
    if args.table is not None:
        with args.table.open() as f:
            table([tuple(r[k] for k in FIELDS) for r in csv.DictReader(f)])
        return 0
    if args.other is None or not (args.other / "bench" / "bench_dcp.py").is_file():
        ap.error(f"--other {args.other}: expected a checkout with bench/bench_dcp.py")
    if args.runs < 1:
        ap.error(f"--runs {args.runs}: expected >= 1")
    return measure(args.other.resolve(), args.runs, args.calls, args.pin)


if __name__ == "__main__":
    raise SystemExit(main())
