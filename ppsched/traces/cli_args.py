"""The workload flags shared by every command that replays requests (stats, run, sweep, ...)."""

from __future__ import annotations

import argparse

from ppsched.core.errors import UserError
from ppsched.traces.catalog import WORKLOAD_NAMES
from ppsched.traces.load import load_workload
from ppsched.traces.readers import FORMATS
from ppsched.traces.workload import Workload


def add_workload_args(parser: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """Add the workload flags. With positional=True a bare NAME is accepted besides --workload."""
    group = parser.add_argument_group("workload")
    if positional:
        group.add_argument("workload_name", nargs="?", metavar="NAME", default=None,
                           help=f"workload: {', '.join(WORKLOAD_NAMES)}")
    group.add_argument("--workload", dest="workload", metavar="NAME", default=None,
                       help=f"workload: {', '.join(WORKLOAD_NAMES)}")
    group.add_argument("--trace-file", metavar="PATH", default=None,
                       help="your own trace file instead of a named workload (needs --format)")
    group.add_argument("--format", dest="trace_format", choices=sorted(FORMATS), default=None,
                       help="azure: TIMESTAMP,ContextTokens,GeneratedTokens; "
                            "lengths: num_prefill_tokens,num_decode_tokens; "
                            "mooncake: JSONL timestamp(ms),input_length,output_length,hash_ids")
    group.add_argument("--rate", type=float, default=None,
                       help="Poisson arrivals at this many requests/s (seeded)")
    group.add_argument("--replay", action="store_true",
                       help="replay the trace's own timestamps (default for timestamped traces)")
    group.add_argument("--window-min", type=float, default=None,
                       help="replay only the trace's first N minutes")
    group.add_argument("--speedup", type=float, default=1.0,
                       help="replay speed factor: gaps divided by it (0.9 = 10%% slower)")
    group.add_argument("--num-requests", type=int, default=None,
                       help="number of requests (more than the file has: sampled with replacement)")
    group.add_argument("--duration", dest="duration_s", type=float, default=None,
                       help="keep arrivals before this many seconds")
    group.add_argument("--seed", type=int, default=0, help="seed for arrivals and sampling")
    group.add_argument("--lengths", choices=("sampled", "in-order"), default="sampled",
                       help="with --rate: 'sampled' draws each request's lengths i.i.d. from "
                            "every row of the trace (seeded, as bench_serving does and as the "
                            "goodput method's runs are made); 'in-order' takes the file's first "
                            "rows in order")
    group.add_argument("--max-context", type=int, default=None,
                       help="cap prompt+output at this many tokens (capped requests are counted)")
    group.add_argument("--data-dir", default=None,
                       help="data directory (default: $PPSCHED_DATA_DIR or ppsched/data/)")


def workload_from_args(args: argparse.Namespace) -> Workload:
    """Build the workload the parsed flags describe (see add_workload_args)."""
    name = getattr(args, "workload", None)
    bare = getattr(args, "workload_name", None)
    if bare is not None and name is not None and bare != name:
        raise UserError(f"workload given twice: {bare!r} and --workload {name!r}; expected one")
    name = name or bare
    if name is None and args.trace_file is None:
        raise UserError(f"no workload: expected a NAME ({', '.join(WORKLOAD_NAMES)}) "
                        "or --trace-file PATH --format azure|lengths|mooncake")
    return load_workload(name, trace_file=args.trace_file, trace_format=args.trace_format,
                         rate=args.rate, replay=args.replay, window_min=args.window_min,
                         speedup=args.speedup, num_requests=args.num_requests,
                         duration_s=args.duration_s, seed=args.seed,
                         max_context=args.max_context,
                         max_prompt=getattr(args, "max_prompt", None), data_dir=args.data_dir,
                         resample=args.rate is not None
                         and getattr(args, "lengths", "sampled") == "sampled")
