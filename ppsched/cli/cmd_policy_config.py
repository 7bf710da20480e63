"""`ppsched policy-config`: every policy knob as JSON, the defaults or a file's over them."""

from __future__ import annotations

import argparse
import json


def _show(args: argparse.Namespace) -> int:
    from ppsched.policy_config import load_policy_config

    print(json.dumps(load_policy_config(args.file, "policy-config").to_dict(), indent=2))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "policy-config", help="print every policy knob as JSON (the defaults, or FILE over them)",
        description="Print the policies' knobs (sections predictive, greedy, ds, admission) as "
                    "the JSON --policy-config reads: the defaults, or FILE checked and merged "
                    "over them. Save it, edit what you change, pass it to run, goodput, sweep "
                    "or serve.")
    parser.add_argument("file", nargs="?", default=None, help="a policy config JSON to check")
    parser.set_defaults(handler=_show)
