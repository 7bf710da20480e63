"""Decision cost of the chunk controllers on this tree beside another tree's, interleaved.

Usage: .venv/bin/python bench/decision_cost.py --other TREE [--runs 21] [--pin CSV]
       .venv/bin/python bench/decision_cost.py --table CSV
       .venv/bin/python bench/decision_cost.py --other TREE --instructions
TREE: a checkout of the commit to compare with, its native modules built there (``make
native``). Each run is one ``bench/bench_dcp.py --calls 5000`` per tree, the two in turn, so
the shared host's load falls on both alike. ``--pin`` writes the medians over the runs, the
quartiles of the full decisions and the median of the run-by-run ratio of the two (CSV; the
host is noisy, a single run says little); ``--table`` prints bench/dcp.md's table from it.
``--instructions``: the SLO rule's instructions per re-plan on both trees, which no load on the
host moves: the same snapshots, run under valgrind's cachegrind with 200 and 4,200 decisions,
the difference over 4,000 (PYTHONHASHSEED fixed; a process's start varies by about 10 million
instructions, under 1% of the figure; about 10 min).
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIELDS = ("controller", "us_per_call", "us_per_decision", "us_per_decision_q1",
          "us_per_decision_q3", "other_us_per_decision", "other_us_per_decision_q1",
          "other_us_per_decision_q3", "ratio_to_other", "runs")
DECISIONS = (200, 4200)  # the two runs under cachegrind: their difference is the decisions'
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
    raw: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for run in range(runs):
        for tag, tree in (("this", HERE), ("other", other)):
            for name, per_call, per_decision in bench(tree, calls):
                raw.setdefault((tag, name), []).append((per_call, per_decision))
        print(f"run {run + 1}/{runs}", file=sys.stderr, flush=True)
    rows = [summary(name, raw[("this", name)], raw.get(("other", name), []))
            for tag, name in raw if tag == "this"]
    if pin is not None:
        with pin.open("w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(rows)
    table(rows)
    return 0


def summary(name: str, this: list[tuple[float, float]], other: list[tuple[float, float]]
            ) -> dict:
    """Medians over the runs, and the quartiles of the full decisions."""
    row: dict = {"controller": name, "runs": len(this),
                 "us_per_call": round(statistics.median(c for c, _ in this), 2)}
    for prefix, runs in (("", this), ("other_", other)):
        full = [d for _, d in runs]
        q1, _, q3 = statistics.quantiles(full, n=4) if len(full) > 1 else (full * 3)[:3]
        row |= {f"{prefix}us_per_decision": round(statistics.median(full), 2),
                f"{prefix}us_per_decision_q1": round(q1, 1),
                f"{prefix}us_per_decision_q3": round(q3, 1)}
    # run by run: the two trees ran back to back, so the ratio holds where the host's speed drifts
    ratios = [a / b for (_, a), (_, b) in zip(this, other, strict=False) if b > 0]
    row["ratio_to_other"] = round(statistics.median(ratios), 3) if ratios else ""
    return row


def table(rows: list[dict]) -> None:
    print("| controller | per call | per full decision (quartiles) | the other tree: per full "
          "decision (quartiles) | ratio, run by run (median) |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = [f"{float(r['us_per_call']):.2f}"] + [
            f"{float(r[p + 'us_per_decision']):.2f} ({float(r[p + 'us_per_decision_q1']):.1f}–"
            f"{float(r[p + 'us_per_decision_q3']):.1f})" for p in ("", "other_")] + [
            f"{float(r['ratio_to_other']):.3f}" if r["ratio_to_other"] != "" else ""]
        print(f"| {LABELS.get(r['controller'], '`' + r['controller'] + '`')} | "
              f"{' | '.join(cells)} |")


def decide(spec: str, n: int) -> None:
    """``n`` re-plans of the SLO rule on bench_dcp's snapshots (run in the tree measured; the
    full-decision snapshots are built here as ``bench_dcp.bench`` builds them, since the other
    tree's bench_dcp has only what it had then)."""
    sys.path.insert(0, "bench")
    import bench_dcp

    from ppsched.core.batch import BatchShape
    from ppsched.core.models import BUILTIN_MODELS
    from ppsched.core.policy_context import PolicyContext
    from ppsched.core.slo import Slo
    from ppsched.core.snapshots import ChunkSnapshot, StageMeasurement
    from ppsched.dcp.registry import build_chunk_controller

    ctx = PolicyContext(pp_size=4, slo=Slo(), model=BUILTIN_MODELS["qwen2.5-32b"])
    roomy = spec.endswith("+roomy-kv")
    snaps = [ChunkSnapshot(**{**{f: getattr(s, f) for f in s.__slots__}, "iteration": 1000 * k,
                              "kv_free_tokens": 180_000 if roomy else s.kv_free_tokens})
             for k, s in enumerate(bench_dcp.snapshots(DECISIONS[1], random.Random(0)))]
    ctl = build_chunk_controller("predictive", ctx, predictor=None)
    ctl.observe(StageMeasurement(0.0, 0, 0, BatchShape(((0, 156),), 100, 100_000), 30.0))
    gc.collect()
    gc.freeze()  # the collector then scans what the decisions allocate, not the setup's objects
    for snap in snaps[:n]:
        ctl.decide(snap)


def instructions(other: Path) -> int:
    def count(tree: Path, spec: str, n: int) -> int:
        out = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, str(Path(__file__).resolve()), "--decide", spec, str(n)],
            cwd=tree, env={**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"},
            check=True, capture_output=True, text=True).stderr
        return int(re.search(r"I\s+refs:\s+([\d,]+)", out).group(1).replace(",", ""))

    print("| snapshots | instructions per re-plan | the other tree | ratio |")
    print("|---|---|---|---|")
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # counts do not depend on the load
        for spec in ("predictive@mixed", "predictive@mixed+roomy-kv"):
            runs = {(t, n): pool.submit(count, t, spec, n) for t in (HERE, other)
                    for n in DECISIONS}
            few, many = DECISIONS
            per = [(runs[t, many].result() - runs[t, few].result()) / (many - few)
                   for t in (HERE, other)]
            print(f"| {LABELS[spec]} | {per[0]:,.0f} | {per[1]:,.0f} | {per[0] / per[1]:.3f} |",
                  flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--other", type=Path, help="the checkout to compare with (native built)")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--pin", type=Path, help="write the summary here (CSV)")
    ap.add_argument("--table", type=Path, help="print the table from a pinned CSV")
    ap.add_argument("--instructions", action="store_true",
                    help="instructions per re-plan under cachegrind instead of CPU time")
    ap.add_argument("--decide", nargs=2, metavar=("SPEC", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.decide is not None:
        decide(args.decide[0], int(args.decide[1]))
        return 0
    if args.table is not None:
        with args.table.open() as f:
            table(list(csv.DictReader(f)))
        return 0
    if args.other is None or not (args.other / "bench" / "bench_dcp.py").is_file():
        ap.error(f"--other {args.other}: expected a checkout with bench/bench_dcp.py")
    if args.instructions:
        if shutil.which("valgrind") is None:
            ap.error("--instructions: expected valgrind on PATH (apt install valgrind)")
        return instructions(args.other.resolve())
    if args.runs < 1:
        ap.error(f"--runs {args.runs}: expected >= 1")
    return measure(args.other.resolve(), args.runs, args.calls, args.pin)


if __name__ == "__main__":
    raise SystemExit(main())
