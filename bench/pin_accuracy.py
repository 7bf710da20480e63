"""The cost model's and ALP's accuracy, measured and pinned as results/pinned/accuracy.csv.

Usage: .venv/bin/python bench/pin_accuracy.py [--commit HASH]
Runs `ppsched sim validate --json` and `ppsched profile eval` (with the built-in profile and with
profiles 10x too slow and too fast) and writes one row per figure with the command that measured
it; `ppsched report --benchmarks` renders it in BENCHMARKS.md. The figures are deterministic
(seeded), so they depend on the commit, not on the machine. Takes about a minute.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppsched.experiments.pinned import PINNED_DIR, PinnedMeta, write_pinned  # noqa: E402

EVAL = ("profile", "eval", "--workload", "azure-conv", "--rate", "4.5", "--num-requests", "1000",
        "--json")


def ppsched(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "ppsched.cli.main", *argv], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout) if "--json" in argv else {}


def row(figure: str, value: float, target: str, met: bool | None, command: str) -> dict:
    return {"figure": figure, "value_pct": round(value, 2), "target": target,
            "met": "" if met is None else ("yes" if met else "no"), "command": command}


def measure() -> list[dict]:
    rows = []
    check = ppsched("sim", "validate", "--json")
    lomo = check["leave_one_model_out_detail"]
    validate = "ppsched sim validate --json"
    rows.append(row("cost model, leave-one-model-out MAPE (every op and TP, ≤ 4096 tokens)",
                    lomo["overall_mape"], "≤ 4%", lomo["overall_mape"] <= 4.0, validate))
    rows.append(row(f"cost model, worst held-out model ({lomo['worst_model']})",
                    lomo["worst_model_mape"], "≤ 6%", lomo["worst_model_mape"] <= 6.0, validate))
    shared = check["summary"]["lomo_mlp_mape_shared_hidden"]
    rows.append(row("cost model, leave-one-model-out MLP MAPE, same hidden size", shared,
                    "≤ 5%", shared <= 5.0, validate))
    rows.append(row("cost model, measured token-count steps it places",
                    100 * lomo["step_placement"]["fraction"], "", None, validate))
    alp = ppsched(*EVAL)["mape"]
    rows.append(row("ALP MAPE, azure-conv 4.5 req/s, qwen2.5-32b PP4, built-in profile", alp,
                    "paper 3.26%", None, "ppsched " + " ".join(EVAL)))
    with tempfile.TemporaryDirectory() as tmp:
        for factor in ("10", "0.1"):
            path = str(Path(tmp) / f"x{factor}.json")
            ppsched("profile", "scale", "--factor", factor, "--out", path)
            wrong = ppsched(*EVAL, "--profile", path)["mape"]
            rows.append(row(f"ALP MAPE, same run, offline profile ×{factor}", wrong, "≤ 5%",
                            wrong <= 5.0, f"ppsched profile scale --factor {factor} --out P; "
                            f"ppsched {' '.join(EVAL)} --profile P"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", help="default: git rev-parse --short HEAD")
    args = parser.parse_args()
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                           capture_output=True, text=True,
                                           check=True).stdout.strip()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    frame = pd.DataFrame(measure())
    meta = PinnedMeta("Cost model and ALP accuracy", "python bench/pin_accuracy.py", commit, date,
                      "Deterministic (seeded runs); the ALP figures score stage-0 iterations "
                      "against the simulator's cost model, not GPU timings.")
    print(write_pinned(ROOT / PINNED_DIR, "accuracy", frame, meta))
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
