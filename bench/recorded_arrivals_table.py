"""Goodput on recorded arrivals beside the Poisson figures: one small table from the goodput.csv
that ``bench/run_recorded_arrivals.sh`` writes per trace.

Usage: .venv/bin/python bench/recorded_arrivals_table.py OUT_DIR PINNED_CSV
OUT_DIR holds one folder per trace (azure-conv, azure-code, mooncake-synthetic), each with the
goodput.csv of ``ppsched goodput --arrivals trace``. Each row: the trace, the part replayed, its
mean rate as recorded, the policy, its goodput (req/s) and speed factor, the search's bracket and
runs, and the Poisson goodput of the same policy and of oracle-static (the best fixed chunk) from
the committed results where there are.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.experiments.recorded_arrivals import recorded_arrivals, with_arrivals  # noqa: E402
from ppsched.experiments.workload_spec import WorkloadSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# (trace, minutes replayed (None: all), context cap) as run_recorded_arrivals.sh runs them
TRACES = (("azure-conv", None, None), ("azure-code", None, None),
          ("mooncake-synthetic", 5.0, 8192))
# the pinned Poisson goodput of qwen2.5-32b per trace (3 seeds, verified); mooncake-synthetic's
# held-out rows are the 8192-capped ones
POISSON = {"azure-conv": "results/pinned/goodput.csv",
           "azure-code": "results/pinned/heldout.csv",
           "mooncake-synthetic": "results/pinned/heldout.csv"}
MODEL = "qwen2.5-32b"


def poisson_goodput(trace: str, policy: str, scale: float) -> tuple[float | None, str]:
    """(goodput, the chunk oracle-static chose or '') of ``policy`` on Poisson arrivals."""
    path = ROOT / POISSON[trace]
    if not path.is_file():
        return None, ""
    table = pd.read_csv(path)
    row = table[(table.model == MODEL) & (table.workload == trace) & (table.policy == policy)
                & (table.slo_scale == scale)]
    if not len(row):
        return None, ""
    chosen = row.chosen.iloc[0]
    return float(row.goodput_rps.iloc[0]), chosen if isinstance(chosen, str) else ""


def main(out_dir: Path, pinned: Path) -> None:
    rows = []
    for trace, minutes, cap in TRACES:
        spec = with_arrivals(WorkloadSpec(trace, rate=1.0, max_context=cap), "trace", minutes)
        recorded = recorded_arrivals(spec)
        table = pd.read_csv(out_dir / trace / "goodput.csv")
        # the best fixed chunk on Poisson arrivals, beside every row of the trace
        oracle, chunk = poisson_goodput(trace, "oracle-static", table.slo_scale.iloc[0])
        for r in table.itertuples():
            rows.append({
                "workload": trace, "window_min": minutes or "", "max_context": cap or "",
                "requests": recorded.requests, "mean_rate_rps": round(recorded.mean_rate, 4),
                "slo_scale": r.slo_scale, "policy": r.policy,
                "goodput_rps": round(r.goodput_rps, 4),
                "speed_factor": round(r.goodput_rps / recorded.mean_rate, 4),
                "bracket_lo": round(r.bracket_lo, 4), "bracket_hi": round(r.bracket_hi, 4),
                "runs": r.runs, "measure_s": round(r.measure_s, 1),
                "poisson_goodput_rps": poisson_goodput(trace, r.policy, r.slo_scale)[0],
                "poisson_oracle_static_rps": oracle, "poisson_oracle_chunk": chunk})
    pinned.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(pinned, index=False)
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
