"""Simulator speed: simulated seconds per CPU second on a fixed grid, optionally beside a baseline.

Grid: {azure-conv, sharegpt, mooncake-synthetic (context capped at 8192)} x {static:512, greedy,
predictive} x {passing: 0.9x the policy's committed goodput, overloaded: 1.5x it} on qwen2.5-32b
and qwen2.5-14b (PP4, mixed chunk, SLO 1.0, seed 0). Rates come from the committed goodput tables
(results/pinned/goodput.csv and heldout.csv); static:512 takes
oracle-static's goodput. Each run offers ``--duration`` seconds of Poisson arrivals.

Every cell runs in a long-lived worker process per tree (``--baseline DIR`` adds a second worker
on that checkout's code); the two workers take each cell in turn, so both see the same machine
load. Per cell (the median CPU time of ``--repeat`` runs, 3 by default, whose outputs must be
equal): simulated s per CPU s of ``simulate()`` (engine loop, frames, invariants) and of
the engine loop alone, us per microbatch and per request, and a digest of the outputs
(requests, the summary's output figures, decisions, iterations) that must match the baseline's.

    .venv/bin/python bench/bench_sim_speed.py --baseline /work/baseline-main   # whole grid
    .venv/bin/python bench/bench_sim_speed.py --quick                           # 32B, azure-conv
    .venv/bin/python bench/bench_sim_speed.py --baseline pure  # native build vs its pure modules
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("qwen2.5-32b", "qwen2.5-14b")
WORKLOADS = ("azure-conv", "sharegpt", "mooncake-synthetic")
POLICIES = {"static:512": "oracle-static", "greedy": "greedy", "predictive": "predictive"}
LOADS = {"pass": 0.9, "over": 1.5}
MOONCAKE_CAP = 8192
# the summary's output figures as the reference engine wrote them (its inputs -- config, engine
# settings, cost model -- and its own timings are not outputs; a figure added later leaves the
# digest as it is)
# The digest comes from this tree's ppsched/sim/digest.py, loaded by path, so that a worker on a
# baseline checkout (which may predate the module) digests its outputs exactly as this tree does.
_DIGEST_SPEC = importlib.util.spec_from_file_location(
    "ppsched_run_digest", ROOT / "ppsched" / "sim" / "digest.py")
_DIGEST = importlib.util.module_from_spec(_DIGEST_SPEC)
_DIGEST_SPEC.loader.exec_module(_DIGEST)


def goodput_file(workload: str) -> Path:
    """The pinned table the grid's rates come from (mooncake-synthetic's held-out rows are the
    8192-capped ones)."""
    name = "goodput.csv" if workload == "azure-conv" else "heldout.csv"
    return ROOT / "results" / "pinned" / name


def committed_goodput(model: str, workload: str, policy_key: str) -> float:
    path = goodput_file(workload)
    with path.open() as fh:
        for row in csv.DictReader(fh):
            if (row["model"] == model and row["workload"] == workload
                    and row["policy"] == policy_key and float(row["slo_scale"]) == 1.0):
                return float(row["goodput_rps"])
    raise SystemExit(f"{path}: no SLO-1.0 row for policy {policy_key!r}")


def grid(quick: bool) -> list[dict]:
    models = MODELS[:1] if quick else MODELS
    workloads = WORKLOADS[:1] if quick else WORKLOADS
    cells = []
    for model in models:
        for workload in workloads:
            for chunk, key in POLICIES.items():
                goodput = committed_goodput(model, workload, key)
                for load, factor in LOADS.items():
                    cells.append({"model": model, "workload": workload, "chunk": chunk,
                                  "load": load, "rate": round(goodput * factor, 4)})
    return cells


# --- worker: runs inside the tree under test (PYTHONPATH), answers one JSON line per cell -----
def _run_cell(cell: dict, duration: float) -> dict:
    from ppsched.experiments.run_config import RunConfig
    from ppsched.experiments.workload_spec import WorkloadSpec, load
    from ppsched.sim import simulate

    cap = MOONCAKE_CAP if cell["workload"] == "mooncake-synthetic" else None
    config = RunConfig(model=cell["model"], chunk=cell["chunk"], mixed_chunk=True, seed=0)
    workload = load(WorkloadSpec(cell["workload"], rate=cell["rate"], duration_s=duration,
                                 seed=0, resample=True, max_context=cap))
    cpu0 = time.process_time()
    result = simulate(config, workload)
    cpu = time.process_time() - cpu0
    summary = result.summary
    mbs = int(summary["microbatches"])
    return {"sim_s": summary["sim_end_s"], "cpu_s": cpu, "engine_cpu_s": summary["sim_cpu_s"],
            "microbatches": mbs, "requests": len(result.records),
            "digest": _DIGEST.run_digest(result)}


def _median_run(cell: dict, duration: float, repeat: int) -> dict:
    """The cell run ``repeat`` times: the median CPU times (a shared host's neighbours only
    ever add time, and one slow run should not set the figure), the outputs of every run
    checked equal."""
    runs = [_run_cell(cell, duration) for _ in range(repeat)]
    if len({r["digest"] for r in runs}) != 1:
        raise SystemExit(f"{cell}: the same run gave different outputs")
    out = dict(runs[0])
    for key in ("cpu_s", "engine_cpu_s"):
        out[key] = sorted(r[key] for r in runs)[repeat // 2]
    return out


def worker(duration: float, repeat: int) -> int:
    for line in sys.stdin:
        cell = json.loads(line)
        if cell.get("warm"):  # tables, profiles and imports loaded before anything is timed
            _run_cell({**cell, "rate": 1.0}, 5.0)
            print(json.dumps({"warm": True}), flush=True)
            continue
        print(json.dumps(_median_run(cell, duration, repeat)), flush=True)
    return 0


# --- driver ---------------------------------------------------------------------------------
class Worker:
    def __init__(self, tree: Path, duration: float, repeat: int, pure: bool = False) -> None:
        # pure: the tree's pure-Python modules, never its native build (ppsched/native.py)
        env = {**os.environ, "PYTHONPATH": str(tree), "PPSCHED_PURE": "1" if pure else "0"}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker",
                                      "--duration", str(duration), "--repeat", str(repeat)],
                                     cwd=tree, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, cell: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cell) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker for {cell} died (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def speed(r: dict) -> float:
    return r["sim_s"] / r["cpu_s"] if r["cpu_s"] > 0 else math.inf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="a checkout to run the same grid on; 'pure': this "
                    "checkout's pure-Python modules (beside its native build)")
    ap.add_argument("--quick", action="store_true", help="qwen2.5-32b on azure-conv only")
    ap.add_argument("--duration", type=float, default=300.0,
                    help="seconds of arrivals per run (default 300)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per cell; the median CPU time is reported (default 3)")
    ap.add_argument("--pin", action="store_true",
                    help="write results/pinned/sim_speed.csv and its .meta.json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (args.duration > 0 and math.isfinite(args.duration)):
        raise SystemExit(f"--duration {args.duration!r}: expected seconds > 0")
    if args.repeat < 1:
        raise SystemExit(f"--repeat {args.repeat}: expected at least 1 run per cell")
    if args.worker:
        return worker(args.duration, args.repeat)
    pure = args.baseline == "pure"
    base_tree = ROOT if pure else Path(args.baseline).resolve() if args.baseline else None
    if base_tree is not None and not (base_tree / "ppsched").is_dir():
        raise SystemExit(f"--baseline {args.baseline}: expected a ppsched checkout or 'pure'")
    cells = grid(args.quick)
    # the code the workers import now is the code measured
    commits = (_commit(ROOT) + ("" if _native() else " (pure)"),
               _commit(base_tree) + (" (pure)" if pure else "") if base_tree else "")
    print(f"measured: {commits[0]}" + (f"; baseline: {commits[1]}" if base_tree else ""))
    workers = {"new": Worker(ROOT, args.duration, args.repeat)}
    if base_tree is not None:
        workers["base"] = Worker(base_tree, args.duration, args.repeat, pure=pure)
    for model in sorted({c["model"] for c in cells}):
        for chunk in POLICIES:
            for w in workers.values():
                w.ask({"warm": True, "model": model, "workload": "azure-conv", "chunk": chunk,
                       "load": "warm"})
    rows = []
    head = (f"{'model':<12} {'workload':<18} {'policy':<10} {'load':<4} {'rate':>6} "
            f"{'sim s':>7} {'mbs':>6} {'reqs':>5} | {'x/CPU s':>7} {'engine':>7} "
            f"{'us/mb':>6} {'us/req':>7}")
    if args.baseline:
        head += f" | {'base x':>7} {'base us/mb':>10} {'ratio':>6} {'digest':>7}"
    print(head, flush=True)
    for i, cell in enumerate(cells):
        order = list(workers) if i % 2 == 0 else list(reversed(workers))  # alternate who is first
        got = {name: workers[name].ask(cell) for name in order}
        new = got["new"]
        row = {**cell, "sim_s": round(new["sim_s"], 1), "microbatches": new["microbatches"],
               "requests": new["requests"], "speed_cpu": round(speed(new), 1),
               "engine_speed_cpu": round(new["sim_s"] / new["engine_cpu_s"], 1),
               "us_per_mb": round(1e6 * new["cpu_s"] / max(new["microbatches"], 1), 1),
               "us_per_req": round(1e6 * new["cpu_s"] / max(new["requests"], 1), 1),
               "digest": new["digest"]}
        line = (f"{cell['model']:<12} {cell['workload']:<18} {cell['chunk']:<10} "
                f"{cell['load']:<4} {cell['rate']:>6.3g} {row['sim_s']:>7.0f} "
                f"{row['microbatches']:>6} {row['requests']:>5} | {row['speed_cpu']:>7.0f} "
                f"{row['engine_speed_cpu']:>7.0f} {row['us_per_mb']:>6.0f} "
                f"{row['us_per_req']:>7.0f}")
        if "base" in got:
            base = got["base"]
            same = base["digest"] == new["digest"]
            row.update({"base_speed_cpu": round(speed(base), 1),
                        "base_us_per_mb": round(1e6 * base["cpu_s"]
                                                / max(base["microbatches"], 1), 1),
                        "ratio": round(speed(new) / speed(base), 2),
                        "identical": same})
            line += (f" | {row['base_speed_cpu']:>7.0f} {row['base_us_per_mb']:>10.0f} "
                     f"{row['ratio']:>6.2f} {'same' if same else 'DIFF':>7}")
        print(line, flush=True)
        rows.append(row)
    for w in workers.values():
        w.close()
    _print_summary(rows, bool(args.baseline))
    if args.pin:
        _pin(rows, args, commits)
    if args.baseline and not all(r["identical"] for r in rows):
        print("outputs differ from the baseline's in some cells", file=sys.stderr)
        return 1
    return 0


def _native() -> bool:
    """Whether a worker on this checkout runs its native build (``make native``)."""
    code = "import ppsched; print(ppsched.NATIVE)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "PPSCHED_PURE": "0"})
    return out.stdout.strip() == "True"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def _print_summary(rows: list[dict], with_base: bool) -> None:
    print()
    for chunk in POLICIES:
        for load in LOADS:
            sel = [r for r in rows if r["chunk"] == chunk and r["load"] == load]
            if not sel:
                continue
            text = (f"{chunk:<10} {load:<4}: min {min(r['speed_cpu'] for r in sel):6.0f}x  "
                    f"geomean {_geomean([r['speed_cpu'] for r in sel]):6.0f}x per CPU s")
            if with_base:
                text += (f"  (baseline geomean {_geomean([r['base_speed_cpu'] for r in sel]):5.0f}"
                         f"x; ratio geomean {_geomean([r['ratio'] for r in sel]):.2f})")
            print(text)


def _commit(tree: Path) -> str:
    """The checkout's commit, with a mark when its code differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                            "ppsched", "bench"], cwd=tree, capture_output=True,
                           text=True).stdout.strip()
    return head + ("+modified" if dirty else "")


def _pin(rows: list[dict], args: argparse.Namespace, commits: tuple[str, str]) -> None:
    out = ROOT / "results" / "pinned"
    out.mkdir(parents=True, exist_ok=True)
    cols = ["model", "workload", "chunk", "load", "rate", "sim_s", "microbatches", "requests",
            "speed_cpu", "engine_speed_cpu", "us_per_mb", "us_per_req"]
    if args.baseline:
        cols += ["base_speed_cpu", "base_us_per_mb", "ratio", "identical"]
    with (out / "sim_speed.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    commit, base = commits
    command = ("python bench/bench_sim_speed.py --pin --duration " + f"{args.duration:g}"
               + f" --repeat {args.repeat}")
    if args.quick:
        command += " --quick"
    if args.baseline:
        command += " --baseline " + ("pure" if args.baseline == "pure" else "BASELINE_CHECKOUT")
    meta = {"title": "Simulator speed: simulated seconds per CPU second",
            "command": command, "commit": commit,
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "note": ("speed_cpu: simulated s / CPU s of simulate() (engine, frames, invariants), "
                     f"median of {args.repeat} runs per cell; "
                     "engine_speed_cpu: the engine loop alone; pass = 0.9x, over = 1.5x the "
                     "policy's committed goodput (static:512: oracle-static's); PP4, mixed "
                     "chunk, seed 0; shared 2-core host"
                     + (f"; base_*: commit {base} run side by side, identical = output "
                        "digests equal" if base else "")
                     + ("; speed_cpu is the native build's (make native), base_* the same "
                        "checkout's pure-Python modules" if args.baseline == "pure" else ""))}
    (out / "sim_speed.meta.json").write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
