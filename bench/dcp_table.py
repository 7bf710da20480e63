"""The controller table from ``ppsched goodput`` outputs (``ppsched.experiments.controller_table``).

Usage: .venv/bin/python bench/dcp_table.py [--all-scales] SOURCE [SOURCE ...]
(each SOURCE is a folder holding a goodput.csv, or a CSV of goodput rows such as
results/pinned/goodput.csv, heldout.csv and heldout_models.csv, the pinned data BENCHMARKS.md
is generated from)

By default only the table's SLO scales (1.0, 0.8, 0.6, 0.4) are counted, as in BENCHMARKS.md;
``--all-scales`` keeps every scale in the files (make paper's goodput also has SLO 0.2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.experiments.controller_table import (  # noqa: E402
    TARGET_SCALES,
    read_rows,
    table_lines,
)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=Path)
    parser.add_argument("--all-scales", action="store_true")
    args = parser.parse_args()
    scales = None if args.all_scales else TARGET_SCALES
    paths = [s if s.suffix == ".csv" else s / "goodput.csv" for s in args.sources]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        parser.error(f"no file {', '.join(missing)}: expected `ppsched goodput` output "
                     "folders or CSVs of goodput rows")
    print("\n".join(table_lines(read_rows(paths, scales))))
