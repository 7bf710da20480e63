"""Flags shared by the experiment commands (sweep, goodput, demo, figures, paper) and their
translation into the library's objects (Setup, WorkloadSpec, SearchSettings, Runner)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ppsched.cli.executor_args import add_executor_args, executor_choice
from ppsched.core.errors import UserError
from ppsched.traces.readers import FORMATS

DEFAULT_SCALES = "1.0,0.8,0.6,0.4,0.2"


def add_common(p: argparse.ArgumentParser, *, model: bool = True) -> None:
    if model:
        p.add_argument("--model", default="qwen2.5-32b", help="built-in name or HF config.json")
        p.add_argument("--hardware", default="a100-40g-pcie")
    p.add_argument("--seed", type=int, default=0, help="first seed (seeds run seed, seed+1, ..)")
    p.add_argument("--no-mixed-chunk", dest="mixed_chunk", action="store_false",
                   help="SGLang's default loop: prefill batches carry no decodes (the paper's "
                        "system mixes them, so experiments do by default)")
    p.add_argument("--policy-config", default=None, metavar="FILE",
                   help="JSON of policy knobs over the defaults (`ppsched policy-config` prints "
                        "them): sections predictive, greedy, ds, admission")
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes (default: os.cpu_count())")
    p.add_argument("--cache", default="results/cache", help="run cache folder")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_executor_args(p)


def add_trace(p: argparse.ArgumentParser) -> None:
    """Any trace: a catalog name (--workload) or a user file, capped at --max-context."""
    p.add_argument("--trace-file", metavar="PATH", default=None,
                   help="your own trace instead of --workload (needs --format)")
    p.add_argument("--format", dest="trace_format", choices=sorted(FORMATS), default=None,
                   help="format of --trace-file")
    p.add_argument("--max-context", type=int, default=None,
                   help="cap prompt+output at this many tokens (capped requests are counted); "
                        "without it, requests over the model's context are rejected and count "
                        "as infinitely late")
    p.add_argument("--data-dir", default=None,
                   help="data directory (default: $PPSCHED_DATA_DIR or the packaged ppsched/data/)")


def add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=None, metavar="PATH",
                   help="ALP's offline profile JSON (`ppsched profile fit` or `profile scale`) "
                        "for the policies that read one (predictive*, DS); default: the "
                        "model's built-in profile. Recorded in goodput.csv and the cache key")


DEFAULT_SEEDS = 3  # the published figure: lowest over 3 seeds, verified (docs/GOODPUT.md)


def add_search(p: argparse.ArgumentParser) -> None:
    from ppsched.experiments.goodput import SearchSettings

    d = SearchSettings()
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                   help=f"seeds per point (default {DEFAULT_SEEDS}); goodput = lowest over "
                        "seeds, median and max reported")
    p.add_argument("--verify", action="store_true",
                   help="re-run each reported point at 4x the window with a fresh seed (the "
                        "default; --no-verify or --quick skip it)")
    p.add_argument("--no-verify", dest="no_verify", action="store_true",
                   help="skip the 4x-window verification (an unverified search figure)")
    p.add_argument("--quick", action="store_true",
                   help="one seed, no verification: the search's unverified figure, fast")
    p.add_argument("--no-stop-early", dest="stop_early", action="store_false",
                   help="simulate every run to the end (by default a run stops once its verdict "
                        "has certainly failed; the figures are the same)")
    p.add_argument("--start", type=float, default=d.start, help="first rate tried (req/s)")
    p.add_argument("--floor", type=float, default=d.floor,
                   help="lowest rate tried; below it goodput is 0")
    p.add_argument("--rel-tol", type=float, default=d.rel_tol,
                   help="bisection resolution as a share of the rate (<= 0.02)")
    p.add_argument("--max-steps", type=int, default=d.max_steps)
    add_window(p)


def add_window(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measure-s", type=float, default=None,
                   help="measurement window (simulated s; default sized from the workload, "
                        "docs/GOODPUT.md)")
    p.add_argument("--warmup-s", type=float, default=None, help="warm-up excluded from stats")
    p.add_argument("--cooldown-s", type=float, default=None,
                   help="arrivals kept after the window while measured requests drain")


def make_runner(args: argparse.Namespace, label: str):
    from ppsched.experiments.progress import Progress
    from ppsched.experiments.runner import Runner

    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: expected an integer >= 1")
    return Runner(args.cache, jobs=args.jobs, executor=executor_choice(args),
                  progress=Progress(label, enabled=not args.no_progress))


def make_setup(args: argparse.Namespace, model: str | None = None):
    from ppsched.core.models import load_model_config
    from ppsched.experiments.plan import Setup
    from ppsched.experiments.run_config import HARDWARE
    from ppsched.policy_config import load_policy_config

    name = model or args.model
    load_model_config(name)  # fail early with the model's own message
    if args.hardware not in HARDWARE:
        raise UserError(f"--hardware {args.hardware!r}: expected one of {', '.join(HARDWARE)}")
    if args.seed < 0:
        raise UserError(f"--seed {args.seed}: expected an integer >= 0")
    return Setup(model=name, hardware=args.hardware, seed=args.seed,
                 mixed_chunk=getattr(args, "mixed_chunk", True),
                 profile_path=_profile_path(getattr(args, "profile", None)),
                 policy=load_policy_config(getattr(args, "policy_config", None)))


def _profile_path(given: str | None) -> str | None:
    """--profile as an absolute path to a readable profile JSON (checked now, not in a worker)."""
    if given is None:
        return None
    from pathlib import Path

    from ppsched.predictor.profile import LinearProfile

    path = Path(given).expanduser()
    if not path.is_file():
        raise UserError(f"--profile {given!r}: expected an ALP profile JSON file "
                        "(`ppsched profile fit` or `ppsched profile scale`)")
    LinearProfile.from_json(str(path))  # a malformed profile fails here with its own message
    return str(path.resolve())


def make_workload(args: argparse.Namespace, name: str | None):
    """The WorkloadSpec of --workload NAME or --trace-file/--format (rate set per run)."""
    from ppsched.experiments.workload_spec import WorkloadSpec
    from ppsched.traces.catalog import lookup

    trace = getattr(args, "trace_file", None)
    fmt = getattr(args, "trace_format", None)
    if trace is not None:
        if fmt is None:
            raise UserError(f"--trace-file {trace!r} needs --format, one of {sorted(FORMATS)}")
        from pathlib import Path

        path = Path(trace).expanduser()
        if not path.is_file():
            raise UserError(f"trace file {str(path)!r} does not exist or is not a file")
        spec = WorkloadSpec(path.stem, rate=1.0, seed=args.seed, trace_file=str(path.resolve()),
                            trace_format=fmt)
    else:
        if fmt is not None:
            raise UserError(f"--format {fmt!r} applies only with --trace-file")
        if not name:
            raise UserError("no workload: expected --workload NAME or --trace-file PATH --format F")
        lookup(name)  # unknown names fail here with the catalog's message
        spec = WorkloadSpec(name, rate=1.0, seed=args.seed)
    max_context = getattr(args, "max_context", None)
    if max_context is not None and (max_context < 2):
        raise UserError(f"--max-context {max_context}: expected a whole number >= 2")
    return replace(spec, max_context=max_context, data_dir=getattr(args, "data_dir", None))


def search_flags(args: argparse.Namespace) -> dict:
    """seeds, verify and stop_early from --seeds/--verify/--no-verify/--quick/--no-stop-early."""
    if args.verify and (args.no_verify or args.quick):
        raise UserError("--verify with --no-verify or --quick: expected one of them")
    seeds = args.seeds
    if args.quick:
        if seeds not in (1, DEFAULT_SEEDS):
            raise UserError(f"--quick with --seeds {seeds}: --quick searches one seed; expected "
                            "--seeds without --quick")
        seeds = 1
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise UserError(f"--seeds {seeds!r}: expected a whole number >= 1")
    return {"seeds": seeds, "verify": not (args.no_verify or args.quick),
            "stop_early": args.stop_early}


def make_settings(args: argparse.Namespace, workload=None, setup=None):
    """SearchSettings from the flags; a partly given window fills the rest from the default."""
    from ppsched.experiments.goodput import SearchSettings
    from ppsched.experiments.goodput_runs import measurement_window
    from ppsched.metrics.steady import Window

    window = None
    given = {k: getattr(args, k, None) for k in ("warmup_s", "measure_s", "cooldown_s")}
    if any(v is not None for v in given.values()):
        if workload is None or setup is None:
            raise UserError("--warmup-s/--measure-s/--cooldown-s need a workload")
        base = measurement_window(workload, setup.base_slo)
        window = Window(**{k: (v if v is not None else getattr(base, k))
                           for k, v in given.items()})
    return SearchSettings(start=args.start, floor=args.floor, rel_tol=args.rel_tol,
                          max_steps=args.max_steps, window=window, **search_flags(args))
