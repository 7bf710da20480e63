"""Issue 14's table from ``ppsched goodput`` outputs (``ppsched.experiments.controller_table``).

Usage: .venv/bin/python bench/dcp_table.py OUT_DIR [OUT_DIR ...]   (each holds a goodput.csv)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.experiments.controller_table import read_rows, table_lines  # noqa: E402

if __name__ == "__main__":
    print("\n".join(table_lines(read_rows(Path(d) / "goodput.csv" for d in sys.argv[1:]))))
