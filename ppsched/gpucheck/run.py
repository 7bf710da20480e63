"""Run the kit's checks in order; each becomes a CheckResult, none can stop the others."""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppsched.core.errors import UserError
from ppsched.gpucheck.alp_replay import alp_mape, learned_rows, read_records, timing_summary
from ppsched.gpucheck.probe import GpuInfo
from ppsched.gpucheck.report import CheckResult, Report
from ppsched.gpucheck.serve import ServeOptions, make_model, run_server_replay, verdict
from ppsched.gpucheck.stage_forward import (
    TOLERANCE,
    build_stage_forward,
    event_vs_sync,
    within_tolerance,
)

MAPE_TARGET = 15.0  # % after warm-up: the live bound the CPU server's test holds
ALP_WARMUP = 50


@dataclass(frozen=True, slots=True)
class KitOptions:
    out: Path
    python: Path  # the GPU SGLang install's python (model making and the server)
    stage_model: str = "qwen2.5-14b"  # built-in model whose PP4 stage the timing check runs
    stage_layers: int = 12
    stage_tokens: tuple[int, ...] = (512, 2048)
    repeats: int = 10
    profile_tokens: tuple[int, ...] = tuple(range(32, 4097, 32))
    profile_repeats: int = 5
    requests: int = 48
    serve: bool = True


def timed(name: str, step: Callable[[], CheckResult]) -> CheckResult:
    """Run a step; an exception becomes a failed check with its last lines."""
    t0 = time.monotonic()
    try:
        result = step()
    except Exception as exc:  # noqa: BLE001 - one failing check must not hide the others
        tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        result = CheckResult(name, "fail", f"raised {tail[:300]}")
    return CheckResult(result.name, result.status, result.summary, result.figures,
                       round(time.monotonic() - t0, 1))


def check_event_vs_sync(torch: Any, opts: KitOptions) -> CheckResult:
    from ppsched.core.models import load_model_config

    model = load_model_config(opts.stage_model)
    figures, worst = {}, 0.0
    for tokens in opts.stage_tokens:
        fwd = build_stage_forward(torch, model, opts.stage_layers, tokens)
        fig = event_vs_sync(fwd, torch.cuda, repeats=opts.repeats)
        figures[f"{tokens} tokens"] = fig
        worst = max(worst, fig["rel_diff"])
    ok = all(within_tolerance(f) for f in figures.values())
    return CheckResult("event-vs-sync", "pass" if ok else "fail",
                       f"{opts.stage_model} stage of {opts.stage_layers} layers: CUDA-event vs "
                       f"synchronized time differ by at most {100 * worst:.2f}% "
                       f"(bound {100 * TOLERANCE:.0f}%)", figures)


def check_profile(torch: Any, model_dir: Path, pp: int, out: Path, opts: KitOptions
                  ) -> tuple[CheckResult, Path | None]:
    from ppsched.core.models import load_model_config
    from ppsched.predictor.collect import collect_mlp_csv
    from ppsched.predictor.profile import fit_profile

    model = load_model_config(str(model_dir / "config.json"))
    csv = collect_mlp_csv(model, out / "mlp.csv", device="cuda", tokens=opts.profile_tokens,
                          repeats=opts.profile_repeats, warmup=2, torch=torch)
    profile = fit_profile(csv, model, tp=1, layers=math.ceil(model.layers / pp))
    path = out / "profile.json"
    path.write_text(profile.to_json() + "\n")
    figures = {"alpha0_ms_per_token": profile.alpha0, "alpha1_ms": profile.alpha1,
               "boundaries": list(profile.boundaries), "fit_mape_pct": profile.fit_mape,
               "staircase_mape_pct": profile.staircase_mape, "variant": profile.variant,
               "layers": profile.layers, "profile": str(path)}
    return CheckResult("profile", "pass",
                       f"collected {len(opts.profile_tokens)} token counts on the GPU; fit MAPE "
                       f"{profile.fit_mape:.1f}%; boundaries {list(profile.boundaries)[:8]}",
                       figures), path


def check_serve(opts: KitOptions, gpus: int, profile: Path | None, work: Path) -> CheckResult:
    from ppsched.predictor.profile import LinearProfile

    facts = run_server_replay(ServeOptions(opts.python, gpus, opts.requests, profile=profile),
                              work)
    records = read_records(facts["log"])
    summary = timing_summary(records)
    ok, problems = verdict(summary, facts["completed"], facts["requests"], facts["ds_on"])
    figures: dict[str, Any] = {**{k: v for k, v in facts.items() if k != "log"}, **summary}
    rows = learned_rows(records)
    if profile is not None and len(rows) > ALP_WARMUP:
        mape = alp_mape(rows, LinearProfile.from_json(str(profile)), ALP_WARMUP)
        figures["alp"] = mape
        if not mape["mape"] <= MAPE_TARGET:
            problems.append(f"ALP MAPE {mape['mape']:.1f}% after {ALP_WARMUP} iterations > "
                            f"{MAPE_TARGET:.0f}%")
    else:
        problems.append(f"ALP MAPE not computed ({len(rows)} learned stages, profile "
                        f"{'present' if profile else 'missing'})")
    status = "pass" if ok and not problems else "fail"
    summary_line = "; ".join(problems) if problems else (
        f"PP {gpus}, {facts['completed']}/{facts['requests']} requests, every stage cuda-event, "
        f"ALP MAPE {figures['alp']['mape']:.1f}% on {len(rows)} real iterations")
    return CheckResult("serve", status, summary_line, figures)


def run_kit(torch: Any, info: GpuInfo, opts: KitOptions, command: str) -> Report:
    opts.out.mkdir(parents=True, exist_ok=True)
    results: list[CheckResult] = []
    model_dir = opts.out / "model"
    made = timed("model", lambda: (make_model(opts.python, model_dir),
                                   CheckResult("model", "pass", f"made {model_dir}"))[1])
    results.append(made)
    profile_path: list[Path | None] = [None]

    def profile_step() -> CheckResult:
        if made.status != "pass":
            return CheckResult("profile", "skip", "no model to profile")
        result, profile_path[0] = check_profile(torch, model_dir, info.count, opts.out, opts)
        return result

    results.append(timed("profile", profile_step))
    results.append(timed("event-vs-sync", lambda: check_event_vs_sync(torch, opts)))
    if opts.serve:
        def serve_step() -> CheckResult:
            if made.status != "pass":
                return CheckResult("serve", "skip", "no model to serve")
            return check_serve(opts, info.count, profile_path[0], opts.out)
        results.append(timed("serve", serve_step))
    else:
        results.append(CheckResult("serve", "skip", "--no-serve"))
    machine = info.describe()
    return Report(machine, command, tuple(results))


def require_positive(name: str, value: int) -> None:
    if value < 1:
        raise UserError(f"--{name} {value}: expected an integer >= 1")
