"""The controller table from ``ppsched goodput`` outputs (``ppsched.experiments.controller_table``).

Usage: .venv/bin/python bench/dcp_table.py [--all-scales] OUT_DIR [OUT_DIR ...]
(each OUT_DIR holds a goodput.csv)

By default only the table's SLO scales (1.0, 0.8, 0.6, 0.4) are counted, as in results/REPORT.md;
``--all-scales`` keeps every scale in the files (results/goodput also has SLO 0.2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.experiments.controller_table import (  # noqa: E402
    ISSUE_SCALES,
    read_rows,
    table_lines,
)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dirs", nargs="+", type=Path)
    parser.add_argument("--all-scales", action="store_true")
    args = parser.parse_args()
    scales = None if args.all_scales else ISSUE_SCALES
    paths = [d / "goodput.csv" for d in args.out_dirs]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        parser.error(f"no goodput.csv in {', '.join(missing)}: expected `ppsched goodput` "
                     "output folders")
    print("\n".join(table_lines(read_rows(paths, scales))))
