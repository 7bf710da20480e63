"""`ppsched workload stats`: counts, span, rate and token-length statistics of a workload."""

from __future__ import annotations

import argparse
import json

from ppsched.metrics.jsonable import jsonable
from ppsched.traces import add_workload_args, workload_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("workload", help="inspect workloads")
    sub = parser.add_subparsers(dest="workload_command", required=True,
                                parser_class=type(parser))
    stats = sub.add_parser(
        "stats", help="request count, span, rate, prompt/output length statistics",
        description="Statistics of a named workload or of your own trace file, with the same "
                    "arrival options as `run` (replay of the trace's timestamps by default for "
                    "timestamped traces; --rate for Poisson arrivals).")
    add_workload_args(stats, positional=True)
    stats.add_argument("--model", default="qwen2.5-32b",
                       help="count requests over this model's context length (built-in name or "
                            "HF config.json); the simulator rejects them")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=stats_command)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def stats_command(args: argparse.Namespace) -> int:
    from ppsched.core.models import load_model_config

    context = load_model_config(args.model).max_context
    workload = workload_from_args(args)
    info = workload.describe(context_limit=context)
    if args.json:
        print(json.dumps(jsonable(info), allow_nan=False))
        return 0
    print(f"workload   {info['name']}  ({info['source']})")
    print(f"arrivals   {info['arrival']}")
    print(f"requests   {info['requests']}  (capped by --max-context: {info['truncated']}; "
          f"over {args.model}'s context of {context} tokens, rejected by a run: "
          f"{info['over_context']})")
    print(f"span       {_fmt(info['span_s'])} s   rate {_fmt(info['rate_rps'], 3)} req/s")
    print(f"{'tokens':<10} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9}")
    for key, label in (("prompt_tokens", "prompt"), ("output_tokens", "output")):
        row = info[key]
        print(f"{label:<10} " + " ".join(f"{row[k]:>9.1f}" for k in ("mean", "p50", "p90", "p99")))
    for note in info["notes"]:
        print(f"note       {note}")
    return 0
