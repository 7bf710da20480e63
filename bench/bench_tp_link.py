"""TP4 against PP4 on each PCIe link variant: the in-kind check of the link model.

For every --hardware name it runs, through the `ppsched run` CLI (qwen2.5-32b, seed 0):
- the Azure 15-minute replay at 0.9x (SLO 2000/200 ms, mixed chunks): TP4 (chunk 2048),
  PP4 static:2048 (PP_2048) and PP4 static:512 (the paper's PP_static): SLO attainment;
- the decode-heavy synthetic at the paper's 14 req/s over the figures' window: TP4, PP4
  static:2048 and PP4 predictive: mean TTFT and TPOT, TP4 / PP.
Prints one row per hardware with the testbed's figures beside it, and the all-reduce time of a
decode step's and a prefill chunk's message. The paper's figures are the check, never an input.

    .venv/bin/python bench/bench_tp_link.py --out results/pinned/tp_link.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from ppsched.core.models import load_model_config
from ppsched.core.slo import Slo
from ppsched.experiments.goodput_runs import measurement_window
from ppsched.experiments.paper_refs import (
    DECODE_HEAVY_PP_OVER_TP,
    REPLAY_ATTAINMENT,
    SYNTHETIC_RATES,
)
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.sim.cost.link import LinkModel
from ppsched.sim.hardware import get_hardware, known_hardware

MODEL = "qwen2.5-32b"
REPLAY = ["--workload", "azure-conv", "--replay", "--window-min", "15", "--speedup", "0.9"]
REPLAY_RUNS = {"tp4": ("tp4", "static:2048"), "static-2048": ("pp4", "static:2048"),
               "static-512": ("pp4", "static:512")}
SYNTHETIC_RUNS = {"tp4": ("tp4", "static:2048"), "static-2048": ("pp4", "static:2048"),
                  "predictive": ("pp4", "predictive")}
DECODE_ROWS, CHUNK_TOKENS = 160, 2048  # TP4's decode graph cap on 40 GB; SGLang's chunk


def synthetic_args() -> list[str]:
    rate = SYNTHETIC_RATES["synthetic-decode"]
    window = measurement_window(WorkloadSpec("synthetic-decode", rate=1.0), Slo())
    return ["--workload", "synthetic-decode", "--rate", f"{rate:g}",
            "--duration", f"{window.arrivals_s:g}", "--lengths", "sampled"]


def run(hardware: str, workload: list[str], parallel: str, chunk: str, out: Path) -> dict:
    cmd = [sys.executable, "-m", "ppsched.cli.main", "run", "--model", MODEL,
           "--hardware", hardware, "--parallel", parallel, "--chunk", chunk, "--mixed-chunk",
           "--slo-ttft-ms", "2000", "--slo-tpot-ms", "200", *workload, "--out", str(out)]
    print("  $", shlex.join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "summary.json").read_text())


def measure(hardware: str, scratch: Path) -> dict[str, object]:
    link = LinkModel(get_hardware(hardware).link)
    hidden_bytes = load_model_config(MODEL).hidden * 2

    def all_reduce_us(tokens: int) -> float:
        return round(1000 * link.all_reduce_ms(tokens * hidden_bytes, 4), 1)

    row: dict[str, object] = {
        "hardware": hardware, "link": link.link.name, "bus_gbps": link.link.bus_gbps,
        "allreduce_decode160_us": all_reduce_us(DECODE_ROWS),
        "allreduce_chunk2048_us": all_reduce_us(CHUNK_TOKENS)}
    for key, (parallel, chunk) in REPLAY_RUNS.items():
        s = run(hardware, REPLAY, parallel, chunk, scratch / f"{hardware}-replay-{key}")
        row[f"replay_{key}_attainment"] = round(s["slo_attainment"], 4)
    synthetic = {key: run(hardware, synthetic_args(), parallel, chunk,
                          scratch / f"{hardware}-synthetic-{key}")
                 for key, (parallel, chunk) in SYNTHETIC_RUNS.items()}
    for pp in ("static-2048", "predictive"):
        for metric in ("ttft", "tpot"):
            ratio = synthetic["tp4"][f"{metric}_ms"]["mean"] / synthetic[pp][f"{metric}_ms"]["mean"]
            row[f"synthetic_{metric}_tp4_over_{pp}"] = round(ratio, 3)
    return row


def paper_row() -> dict[str, object]:
    return {"hardware": "paper testbed", "replay_tp4_attainment": REPLAY_ATTAINMENT["tp4"],
            "replay_static-2048_attainment": REPLAY_ATTAINMENT["static-2048"],
            "replay_static-512_attainment": REPLAY_ATTAINMENT["oracle-static"],
            "synthetic_ttft_tp4_over_predictive": DECODE_HEAVY_PP_OVER_TP["ttft"],
            "synthetic_tpot_tp4_over_predictive": DECODE_HEAVY_PP_OVER_TP["tpot"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", default=",".join(
        h for h in known_hardware() if h.startswith("a100-40g-pcie-")),
        help="comma-separated hardware names (default: the a100-40g-pcie link variants)")
    parser.add_argument("--out", help="write the rows (and the paper's) to this CSV")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(h, Path(tmp)) for h in args.hardware.split(",")]
    rows.append(paper_row())
    fields = list(dict.fromkeys(k for row in rows for k in row))
    print("\n" + "\n".join(f"{f:42s} " + " ".join(f"{str(r.get(f, '')):>20s}" for r in rows)
                           for f in fields))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
