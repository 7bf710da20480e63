"""`ppsched run`: replay a workload on the simulator (``--engine sim``) or a live server (URL)."""

from __future__ import annotations

import argparse
import importlib

from ppsched.core.errors import UserError
from ppsched.core.slo import PAPER_TPOT_MS, PAPER_TTFT_MS, Slo
from ppsched.dcp.registry import CHUNK_SPECS
from ppsched.experiments.run_config import HARDWARE, RunConfig
from ppsched.policy_config import load_policy_config
from ppsched.traces import add_workload_args, workload_from_args

DEFAULT_CHUNK = "static:2048"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="replay a workload on the simulator or a live SGLang server",
        description="Replay a workload. --engine sim runs the built-in SGLang-style PP/TP "
                    "simulator; --engine http://HOST:PORT replays against a live server. "
                    "Writes summary.json, requests.csv, iterations.csv, decisions.jsonl to --out.")
    parser.add_argument("--engine", default="sim", help="sim (default) or http://HOST:PORT")
    parser.add_argument("--model", default="qwen2.5-32b",
                        help="qwen2.5-32b, qwen2.5-14b or a path to an HF config.json")
    parser.add_argument("--hardware", default="a100-40g-pcie", help=" or ".join(HARDWARE))
    parser.add_argument("--parallel", default="pp4", help="ppN or tpN (e.g. pp4, tp4)")
    parser.add_argument("--chunk", default=None,
                        help=f"chunk controller: {', '.join(CHUNK_SPECS)} (default "
                             f"{DEFAULT_CHUNK}; simulator only: a live server's policy is set "
                             "by `ppsched serve`)")
    parser.add_argument("--ds", default=None,
                        help="delay scheduling: on or off (default off; simulator only)")
    parser.add_argument("--ds-max-consecutive", type=int, default=1,
                        help="most consecutive decode turns a request may be held (DS)")
    parser.add_argument("--slo-ttft-ms", type=float, default=PAPER_TTFT_MS)
    parser.add_argument("--slo-tpot-ms", type=float, default=PAPER_TPOT_MS)
    parser.add_argument("--mem-fraction-static", type=float, default=0.9)
    parser.add_argument("--max-running-requests", type=int, default=None,
                        help="default: SGLang's, derived from the KV capacity")
    parser.add_argument("--pp-max-micro-batch-size", type=int, default=None,
                        help="per-slot admission cap (default max_running_requests // pp)")
    parser.add_argument("--mixed-chunk", action="store_true",
                        help="mix a slot's decodes into its prefill batches (SGLang: off)")
    parser.add_argument("--max-chunk-tokens", type=int, default=2048,
                        help="hard cap on a prefill batch (SGLang --chunked-prefill-size)")
    parser.add_argument("--profile", dest="profile_path", default=None,
                        help="ALP profile JSON from `ppsched profile fit` (predictive chunking)")
    parser.add_argument("--policy-config", default=None, metavar="FILE",
                        help="JSON of policy knobs over the defaults (`ppsched policy-config` "
                             "prints them; simulator only: a live server's by `ppsched serve`)")
    parser.add_argument("--admission", default="off",
                        help="on: reject at arrival a request whose TTFT SLO cannot be met "
                             "given the predicted queue drain time (default off)")
    parser.add_argument("--context-length", type=int, default=None,
                        help="SGLang --context-length: prompt + output longer is rejected "
                             "(default: the model's max_position_embeddings)")
    parser.add_argument("--disable-radix-cache", action="store_true",
                        help="SGLang's flag: no prefix cache even for traces with prefix ids")
    parser.add_argument("--stop-early", action="store_true",
                        help="sim: stop once goodput_ok has certainly failed (more than 10%% of "
                             "the requests past the TTFT SLO with no first token by then); "
                             "summary.json says stopped_early and why")
    parser.add_argument("--no-noise", action="store_true",
                        help="turn off the cost model's seeded run-to-run noise")
    parser.add_argument("--concurrency", type=int, default=256,
                        help="live replay: most requests in flight at once")
    parser.add_argument("--request-timeout", type=float, default=600.0,
                        help="live replay: seconds before a request counts as failed")
    parser.add_argument("--ttft-from", choices=("arrival", "send"), default="arrival",
                        help="live replay: start TTFT/E2E at the scheduled arrival (default; a "
                             "wait for a free connection counts) or at the send (as "
                             "sglang.bench_serving)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="live replay: stop after this many seconds and write what finished")
    parser.add_argument("--progress-every", type=float, default=5.0,
                        help="live replay: seconds between progress lines on stderr (0: none)")
    parser.add_argument("--out", required=True, help="output directory")
    add_workload_args(parser)
    parser.set_defaults(handler=run_command)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    return RunConfig(model=args.model, hardware=args.hardware, parallel=args.parallel,
                     chunk=args.chunk or DEFAULT_CHUNK, ds=args.ds or "off",
                     ds_max_consecutive=args.ds_max_consecutive,
                     slo=Slo(args.slo_ttft_ms, args.slo_tpot_ms), seed=args.seed,
                     mem_fraction_static=args.mem_fraction_static,
                     max_running_requests=args.max_running_requests,
                     pp_max_micro_batch_size=args.pp_max_micro_batch_size,
                     mixed_chunk=args.mixed_chunk, max_chunk_tokens=args.max_chunk_tokens,
                     profile_path=args.profile_path, data_dir=args.data_dir,
                     noise=not args.no_noise, admission=args.admission,
                     context_length=args.context_length,
                     prefix_cache=not args.disable_radix_cache,
                     policy=load_policy_config(args.policy_config))


def run_command(args: argparse.Namespace) -> int:
    engine = args.engine.strip()
    if engine.startswith(("http://", "https://")):
        for flag, value in (("--chunk", args.chunk), ("--ds", args.ds),
                            ("--policy-config", args.policy_config)):
            if value is not None:
                raise UserError(f"{flag} {value!r} with --engine {engine}: a live server's "
                                "scheduling policy is chosen when it starts; use `ppsched serve "
                                f"{flag} {value} -- ...` and replay without {flag}")
        if args.stop_early:
            raise UserError(f"--stop-early with --engine {engine}: a live replay sends every "
                            "request; --stop-early applies to --engine sim")
        try:
            live = importlib.import_module("ppsched.experiments.live_replay")
        except ModuleNotFoundError as exc:
            if exc.name != "ppsched.experiments.live_replay":
                raise
            raise UserError(f"--engine {engine!r}: live replay is not available in this "
                            "build (ppsched.experiments.live_replay missing); use --engine sim") \
                from None
        return int(live.run_live(args) or 0)
    if engine != "sim":
        raise UserError(f"--engine {engine!r}: expected sim or http://HOST:PORT")
    config = config_from_args(args)  # validate flags before reading any file
    config.model_config()
    workload = workload_from_args(args)
    from ppsched.experiments.outputs import write_run_outputs
    from ppsched.metrics.early_stop import StopRule
    from ppsched.sim import simulate

    stop = StopRule(config.slo.ttft_ms) if args.stop_early else None
    result = simulate(config, workload, stop=stop)
    summary = dict(result.summary)
    summary.pop("config", None)
    summary["workload"] = workload.describe(context_limit=config.max_context)
    written = write_run_outputs(args.out, result.records, summary, config.to_dict(),
                                iterations=result.iterations, decisions=result.decisions)
    print_summary(summary, config, str(written["summary"].parent))
    return 0


def print_summary(s: dict, config: RunConfig, out: str) -> None:
    def pct(key: str) -> str:
        v = s[key]
        return f"p50 {v['p50']:.1f}  p90 {v['p90']:.1f}  p99 {v['p99']:.1f} ms"

    print(f"run        {config.model} {config.parallel} on {config.hardware}, chunk "
          f"{config.chunk}, ds {config.ds}, seed {config.seed}")
    print(f"requests   {s['requests']}  completed {s['completed']}  rejected {s['rejected']}  "
          f"retractions {s['retractions']}  DS holds {s['ds_holds']}")
    print(f"TTFT       {pct('ttft_ms')}")
    print(f"TPOT       {pct('tpot_ms')}")
    print(f"E2E        {pct('e2e_ms')}")
    print(f"iteration  {pct('iteration_ms')}  (stage 0)   bubble {s['bubble_fraction']:.1%}")
    print(f"SLO        attainment {s['slo_attainment']:.1%}  goodput_ok {s['goodput_ok']}  "
          f"(TTFT {config.slo.ttft_ms:g} ms, TPOT {config.slo.tpot_ms:g} ms)")
    if s.get("stopped_early"):
        print(f"stopped    early: {s['stop_reason']}")
    print(f"simulated  {s['sim_end_s']:.1f} s in {s['sim_wall_s']:.2f} s wall "
          f"({s['sim_speed']:.0f}x; {s['sim_speed_cpu']:.0f}x per CPU second)")
    print(f"outputs    {out}")
