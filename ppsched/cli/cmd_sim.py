"""`ppsched sim validate`: MAPE of the simulator's cost model against the measured profiles."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ppsched.core.paths import data_dir


def _validate(args: argparse.Namespace) -> int:
    from ppsched.sim.cost.validate import format_report, validate  # heavy imports on demand

    result = validate(Path(data_dir(args.data_dir)).resolve())
    print(json.dumps(result, indent=2, sort_keys=True) if args.json else format_report(result))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser("sim", help="simulator utilities (cost-model validation)")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    val = sim_sub.add_parser(
        "validate", help="per-op MAPE of the cost model vs measured A100 medians: profiled "
                         "shapes, interpolation hold-out, leave-one-model-out")
    val.add_argument("--data-dir", default=None,
                     help="data folder with profiles/a100 "
                          "(default: $PPSCHED_DATA_DIR, else ppsched/data)")
    val.add_argument("--json", action="store_true", help="print the full result as JSON")
    val.set_defaults(handler=_validate)
