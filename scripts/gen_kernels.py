"""Write ppsched/predictor/kernels.py from ppsched/predictor/kernels_source.py.

    .venv/bin/python scripts/gen_kernels.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PPSCHED_PURE"] = "1"  # generate from the sources, never a stale extension

from ppsched.predictor.kernels_source import module_source  # noqa: E402

TARGET = ROOT / "ppsched" / "predictor" / "kernels.py"

if __name__ == "__main__":
    TARGET.write_text(module_source())
    print(f"wrote {TARGET.relative_to(ROOT)}")
