"""`ppsched profile fit|collect|scale|eval`: the offline latency profile and ALP's accuracy."""

from __future__ import annotations

import argparse
import json
import math
import sys

from ppsched.core.errors import UserError


def register(subparsers) -> None:
    parser = subparsers.add_parser("profile", help="fit/collect a latency profile; evaluate ALP")
    sub = parser.add_subparsers(dest="profile_command", required=True,
                                parser_class=type(parser))

    p = sub.add_parser("fit", help="fit ALP's linear term and boundaries from a vidur mlp.csv")
    p.add_argument("--mlp-csv", required=True, help="vidur-format mlp.csv (any GPU, any model)")
    p.add_argument("--model", required=True, help="target: built-in name or HF config.json")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree inside a stage")
    p.add_argument("--pp-size", type=int, default=4,
                   help="pipeline stages: the profile prices one stage of layers/pp-size layers")
    p.add_argument("--rel-jump", type=float, default=None,
                   help="boundary threshold: relative time jump (default 0.12)")
    p.add_argument("--out", default=None, help="write the profile JSON here")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.set_defaults(handler=cmd_fit)

    p = sub.add_parser("collect", help="measure the model's linear ops with torch -> mlp.csv")
    p.add_argument("--model", required=True, help="built-in name or HF config.json")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", required=True, help="mlp.csv to write")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--tokens", default=None,
                   help="comma-separated token counts (default: vidur grid 1,2,4,8,16,...,4096)")
    p.add_argument("--repeats", type=int, default=20, help="timed runs per op and token count")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs before timing")
    p.set_defaults(handler=cmd_collect)

    p = sub.add_parser("scale", help="write a profile with every time multiplied by --factor")
    p.add_argument("--factor", type=float, required=True,
                   help="e.g. 10: a profile 10x too slow for the device (ALP must unlearn it)")
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--profile", default=None,
                   help="profile JSON to scale (default: the built-in one for --model/--pp-size)")
    p.add_argument("--model", default="qwen2.5-32b", help="built-in name or HF config.json")
    p.add_argument("--pp-size", type=int, default=4)
    p.add_argument("--tp", type=int, default=1)
    p.set_defaults(handler=cmd_scale)

    p = sub.add_parser("eval", help="ALP MAPE vs simulated stage latency over a whole run")
    from ppsched.traces.cli_args import add_workload_args

    add_workload_args(p)
    p.add_argument("--model", default="qwen2.5-32b")
    p.add_argument("--hardware", default="a100-40g-pcie")
    p.add_argument("--parallel", default="pp4", help="ppN (ALP predicts one PP stage)")
    p.add_argument("--chunk", default="static:512", help="chunk controller of the simulated run")
    p.add_argument("--profile", default=None, help="profile JSON (default: built-in)")
    p.add_argument("--warmup-iterations", type=int, default=100,
                   help="stage-0 iterations replayed before errors count")
    p.add_argument("--ds", default="off", help="delay scheduling in the simulated run: on or off")
    p.add_argument("--mixed-chunk", action="store_true",
                   help="let prefill batches carry their slot's decodes (mixed iterations)")
    p.add_argument("--no-noise", action="store_true",
                   help="simulate without run-to-run noise (ALP's model error alone)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_eval)


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise UserError(f"--{name} {value}: expected an integer >= 1")


def cmd_fit(args: argparse.Namespace) -> int:
    from ppsched.core.models import load_model_config
    from ppsched.predictor.profile import fit_profile

    _check_positive("tp", args.tp)
    _check_positive("pp-size", args.pp_size)
    model = load_model_config(args.model)
    extra = {} if args.rel_jump is None else {"rel_jump": args.rel_jump}
    profile = fit_profile(args.mlp_csv, model, tp=args.tp,
                          layers=math.ceil(model.layers / args.pp_size), **extra)
    text = profile.to_json()
    if args.out:
        _write(args.out, text)
    if args.json:
        print(text)
    else:
        print(f"{model.name} tp={args.tp} stage of {profile.layers} layers from {args.mlp_csv}\n"
              f"  linear: {profile.alpha0:.5f} ms/token * tokens + {profile.alpha1:.3f} ms "
              f"(held-out MAPE {profile.fit_mape:.2f}%)\n"
              f"  staircase: {len(profile.staircase)} bands (held-out MAPE "
              f"{profile.staircase_mape:.2f}%) -> default variant: {profile.variant}\n"
              f"  boundaries: {list(profile.boundaries)}")
        if args.out:
            print(f"  wrote {args.out}")
    return 0


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise UserError(f"--out {path!r} could not be written: {exc}") from exc


def cmd_scale(args: argparse.Namespace) -> int:
    from ppsched.core.models import load_model_config
    from ppsched.predictor.profile import LinearProfile, default_profile

    if args.profile:
        profile = LinearProfile.from_json(args.profile)
    else:
        _check_positive("tp", args.tp)
        _check_positive("pp-size", args.pp_size)
        profile = default_profile(load_model_config(args.model), pp_size=args.pp_size,
                                  tp=args.tp)
    scaled = profile.scaled(args.factor)
    _write(args.out, scaled.to_json())
    print(f"wrote {args.out}: {scaled.source} ({scaled.layers} layers, linear "
          f"{scaled.alpha0:.5f} ms/token + {scaled.alpha1:.3f} ms)")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from ppsched.core.models import load_model_config
    from ppsched.predictor.collect import collect_mlp_csv, parse_tokens

    _check_positive("tp", args.tp)
    _check_positive("repeats", args.repeats)
    model = load_model_config(args.model)
    tokens = parse_tokens(args.tokens) if args.tokens else None
    path = collect_mlp_csv(model, args.out, device=args.device, tp=args.tp, tokens=tokens,
                           repeats=args.repeats, warmup=args.warmup,
                           log=lambda line: print(line, file=sys.stderr))
    print(f"wrote {path}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from ppsched.traces.cli_args import workload_from_args

    if args.workload is None and args.trace_file is None:
        args.workload = "azure-conv"
    workload = workload_from_args(args)
    report = evaluate_simulated_run(workload, workload_name=args.workload or args.trace_file,
                                    model=args.model, hardware=args.hardware,
                                    parallel=args.parallel, chunk=args.chunk,
                                    profile_path=args.profile, data_dir=args.data_dir,
                                    seed=args.seed, warmup=args.warmup_iterations,
                                    noise=not args.no_noise, mixed_chunk=args.mixed_chunk,
                                    ds=args.ds)
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
        return 0
    print(f"ALP on {report['workload']} ({report['model']} {report['parallel']}, chunk "
          f"{report['chunk']}): {report['iterations']} stage-0 iterations, first "
          f"{report['warmup_iterations']} are warm-up; run P90 TTFT "
          f"{report['run_p90_ttft_ms']:.0f} ms, P90 TPOT {report['run_p90_tpot_ms']:.0f} ms")
    for name, res in report["variants"].items():
        kinds = ", ".join(f"{k} {v['mape']:.2f}% (n={v['n']})"
                          for k, v in res["by_type"].items() if v["n"])
        print(f"  {name:>22}: MAPE {res['mape']:.2f}%  P90 APE {res['p90_ape']:.2f}%  [{kinds}]")
    print(f"  default ({report['default_predictor']}): MAPE {report['mape']:.2f}%, P90 APE "
          f"{report['p90_ape']:.2f}%")
    return 0


def stage0_rows(frame) -> list:
    """(BatchShape, measured_ms) of stage 0, in start order, from the simulator's frame.

    The frame keeps per-batch sums, not per-piece (prefix, extend): a batch with several
    prefill pieces is replayed as one piece (sum of prefixes, sum of extends), which
    overstates its attention features; errors reported here are therefore pessimistic for
    multi-piece prefill batches (the live controllers observe exact shapes).
    """
    from ppsched.core.batch import BatchShape

    rows = frame[frame["stage"] == 0].sort_values("start_s", kind="stable")
    out = []
    for r in rows.itertuples(index=False):
        prefill = ((int(r.prefix_tokens), int(r.prefill_tokens)),) if r.prefill_tokens else ()
        out.append((BatchShape(prefill=prefill, decode_count=int(r.decode_reqs),
                               decode_ctx_sum=int(r.decode_ctx_sum)), float(r.measured_ms)))
    return out


def evaluate_simulated_run(workload, *, workload_name: str | None, model: str, hardware: str,
                           parallel: str, chunk: str, profile_path: str | None,
                           data_dir: str | None, seed: int, warmup: int,
                           noise: bool = True, mixed_chunk: bool = False,
                           ds: str = "off") -> dict:
    """Simulate once, replay stage 0 through ALP for each linear variant (and the online
    linear correction), report errors in percent. The CLI owns this: policy code never
    imports the simulator."""
    from ppsched.experiments.run_config import RunConfig, parse_parallel
    from ppsched.predictor.alp import ALPredictor
    from ppsched.predictor.evaluate import evaluate_on_iterations
    from ppsched.predictor.profile import LinearProfile, default_profile
    from ppsched.sim import simulate

    pp, tp = parse_parallel(parallel)
    config = RunConfig(model=model, hardware=hardware, parallel=parallel, chunk=chunk,
                       seed=seed, data_dir=data_dir, profile_path=profile_path, noise=noise,
                       mixed_chunk=mixed_chunk, ds=ds)
    result = simulate(config, workload)
    rows = stage0_rows(result.iterations)
    if len(rows) <= warmup:
        raise UserError(f"--warmup-iterations {warmup}: the run has only {len(rows)} stage-0 "
                        "iterations; expected more (raise --num-requests or lower the warm-up)")
    profile = (LinearProfile.from_json(profile_path) if profile_path else
               default_profile(config.model_config(), pp_size=pp, tp=tp, data_dir=data_dir))
    variants = {}
    for variant in ("linear", "staircase"):
        for online in (False, True):
            alp = ALPredictor(profile.with_variant(variant), correct_linear_online=online)
            name = variant + ("+online-linear" if online else "")
            variants[name] = evaluate_on_iterations(alp, rows, warmup)
    online_default = ALPredictor(profile).correct_linear_online
    default_name = profile.variant + ("+online-linear" if online_default else "")
    chosen = variants[default_name]
    report = {k: chosen[k] for k in ("mape", "p90_ape", "by_type", "n", "linear_variant",
                                     "correct_linear_online")}
    report["default_predictor"] = default_name
    report.update(workload=workload_name, noise=noise, mixed_chunk=mixed_chunk, ds=ds, model=model,
                  parallel=parallel, chunk=chunk,
                  iterations=len(rows), warmup_iterations=warmup, variants=variants,
                  run_p90_ttft_ms=result.summary["ttft_ms"]["p90"],
                  run_p90_tpot_ms=result.summary["tpot_ms"]["p90"],
                  profile_source=profile.source, profile_held_out_mape={
                      "linear": profile.fit_mape, "staircase": profile.staircase_mape})
    return report
