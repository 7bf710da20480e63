"""Sustained goodput on shifting-load workloads (``ppsched.traces.shifting``), per chunk controller.

Usage: .venv/bin/python bench/bench_dcp_shifting.py --workload alternating [--model qwen2.5-32b]
              [--chunks static:128,...,predictive] [--seeds 0] [--slo-scale 1.0]
              [--only code|conv|chat|batch]  (code-conv, chat-batch: one phase for the whole run)
              [--period S]  (chat-batch: phases of S s; the window measures one of each, 2·S)
              [--verify]  (each controller's lowest rate again at 4x the window, seed 1000)
--chunks also takes ``phase:A/B`` on chat-batch: a reference, not a controller, that reads the
phase from the clock and runs A tokens in chat phases, B in batch phases (what switching per phase
could reach; a real controller cannot know the phase).
Same verdict as ``ppsched goodput`` (``ppsched.metrics.steady``: P90 TTFT/TPOT on the
measurement window, admissions keep up, the last quarter too), window from the median output of
the requests that decode (``decoding_output_p50``); search: ``ppsched goodput``'s
(double/halve from --start, bisect to 2%, a pass backed by one 4% below it). Goodput per seed
and the lowest over seeds; oracle-static = the best static chunk of --chunks in hindsight.
Mixed loop, PP4.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ppsched.sim.engine.simulate as sim_engine  # noqa: E402
from ppsched.core.policy import ChunkDecision  # noqa: E402
from ppsched.core.slo import Slo  # noqa: E402
from ppsched.experiments.goodput import SearchSettings  # noqa: E402
from ppsched.experiments.goodput_verify import VERIFY_FACTOR, VERIFY_SEED_OFFSET  # noqa: E402
from ppsched.experiments.joint_search import joint_search  # noqa: E402
from ppsched.experiments.run_config import RunConfig  # noqa: E402
from ppsched.metrics.steady import Window, verdict, window_for  # noqa: E402
from ppsched.sim import simulate  # noqa: E402
from ppsched.traces.shifting import (  # noqa: E402
    CHAT_BATCH_PERIOD_S,
    chat_batch,
    decoding_output_p50,
    shifting_workload,
)

STATICS = "static:128,static:256,static:384,static:512,static:768,static:1024,static:2048"


class PhaseReference:
    """``phase:A/B``: A tokens while chat-batch's clock says chat, B in batch (bench only)."""

    def __init__(self, spec: str, period_s: float) -> None:
        chat, batch = spec.split(":", 1)[1].split("/")
        self.name, self.chat, self.batch, self.period_s = spec, int(chat), int(batch), period_s

    def decide(self, snap) -> ChunkDecision:
        in_chat = int(snap.now_s // self.period_s) % 2 == 0  # chat_batch starts with chat
        return ChunkDecision(self.chat if in_chat else self.batch, "phase-reference")

    def observe(self, measurement) -> None:
        return None


def use_phase_reference(period_s: float) -> None:
    build = sim_engine.build_chunk_controller

    def build_or_reference(spec, ctx, **kw):
        return PhaseReference(spec, period_s) if spec.startswith("phase:") else build(spec, ctx,
                                                                                    **kw)

    sim_engine.build_chunk_controller = build_or_reference


def workload_and_window(args: argparse.Namespace, rate: float, seed: int,
                        longer: float = 1.0):
    probe = shifting_workload(args.workload, 1.0, 600.0, seed)  # whole mix: same window --only
    window = window_for(decoding_output_p50(probe), Slo())
    if args.period is not None:  # one chat and one batch phase
        window = Window(window.warmup_s, 2 * args.period, window.cooldown_s)
    window = window.longer(longer)
    if args.period is None:
        return shifting_workload(args.workload, rate, window.arrivals_s, seed,
                                 only=args.only), window
    return chat_batch(rate, window.arrivals_s, seed, period_s=args.period, only=args.only), window


def passes(args: argparse.Namespace, chunk: str, rate: float, seed: int,
           longer: float = 1.0) -> bool:
    """One run's verdict; ``longer`` > 1 measures a window that many times longer (the
    verification)."""
    slo = Slo().scaled(args.slo_scale)
    wl, window = workload_and_window(args, rate, seed, longer)
    cfg = RunConfig(model=args.model, chunk=chunk, slo=slo, seed=seed, mixed_chunk=True)
    v = verdict(simulate(cfg, wl).records, window, slo)
    print(f"  {chunk:<18} seed {seed} rate {rate:6.3f}: {v.reason}", flush=True)
    return v.ok


def goodput(args: argparse.Namespace, chunk: str, seed: int) -> float:
    """The goodput search's own rule (``joint_search`` with ``SearchSettings``' defaults: a
    pass counts only when the rate 4% below it passes too), from --start."""
    search = SearchSettings(start=args.start)
    found = joint_search(lambda rates: [{1.0: passes(args, chunk, r, seed)} for r in rates],
                         [1.0], start=search.start, growth=search.growth, floor=search.floor,
                         rel_tol=search.rel_tol, max_steps=search.max_steps,
                         backing=search.backing)
    return found[1.0].goodput_rps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="alternating")
    ap.add_argument("--model", default="qwen2.5-32b")
    ap.add_argument("--chunks", default=STATICS + ",predictive,predictive-paper,greedy")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--slo-scale", type=float, default=1.0)
    ap.add_argument("--start", type=float, default=4.0)
    ap.add_argument("--only", default=None,
                    help="code-conv: keep one phase (code or conv); chat-batch: chat or batch")
    ap.add_argument("--verify", action="store_true",
                    help="check each controller's lowest rate over seeds at 4x the window with "
                         "a fresh seed (1000), as ppsched goodput --verify does")
    ap.add_argument("--period", type=float, default=None,
                    help=f"chat-batch only: phase length in s (default {CHAT_BATCH_PERIOD_S:g})")
    args = ap.parse_args()
    if args.period is not None and (args.workload != "chat-batch" or not args.period > 0):
        ap.error(f"--period {args.period}: expected seconds > 0, with --workload chat-batch")
    if any(c.startswith("phase:") for c in args.chunks.split(",")):
        if args.workload != "chat-batch":
            ap.error("phase:A/B chunks: expected --workload chat-batch")
        use_phase_reference(args.period or CHAT_BATCH_PERIOD_S)
    seeds = [int(s) for s in args.seeds.split(",")]
    result: dict[str, list[float]] = {}
    for chunk in args.chunks.split(","):
        result[chunk] = [goodput(args, chunk, s) for s in seeds]
        print(f"GOODPUT {chunk}: min {min(result[chunk]):.3f} per seed {result[chunk]}",
              flush=True)
        if args.verify and min(result[chunk]) > 0:
            ok = passes(args, chunk, min(result[chunk]), VERIFY_SEED_OFFSET, VERIFY_FACTOR)
            print(f"VERIFY {chunk} at {min(result[chunk]):.3f} (seed {VERIFY_SEED_OFFSET}, "
                  f"{VERIFY_FACTOR:g}x the window): {'pass' if ok else 'FAIL'}", flush=True)
    statics = {c: min(g) for c, g in result.items() if c.startswith("static:")}
    if statics:
        best = max(statics, key=statics.__getitem__)
        print(f"oracle-static = {best}: {statics[best]:.3f} req/s")
        for c, g in result.items():
            if not c.startswith("static:") and statics[best] > 0:
                print(f"{c}: {min(g):.3f} req/s = {min(g) / statics[best]:.2f}x oracle-static")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
