"""Shifting-load workloads: the mix or the rate changes within a run, so no single fixed chunk is
right for all of it.

- ``alternating``: phases of ``period_s`` seconds alternate a prefill-heavy mix (prompts 512-1024,
  outputs 32-64 tokens: wants large, efficient chunks) and a decode-heavy one (prompts 32-64,
  outputs 512-1024: wants small chunks that keep TPOT down), Poisson at the same request rate.
- ``diurnal``: azure-conv lengths, Poisson with a rate that swings sinusoidally between
  (1 - depth) and (1 + depth) times the mean over ``period_s`` (thinning), a compressed day.
- ``code_conv``: one deployment's traffic alternating, ``period_s`` each, between its code phase
  (azure-code lengths: prompt p50 1469 / p90 5188 tokens, output p50 13: long prompts, few
  decoders) and its conversation phase (azure-conv lengths: prompt p50 1020, output p50 129: many
  decoders ride in every stage). Both real Azure 2023 traces, Poisson at one rate. Built to test
  whether such phases want different chunks; measured
  (``bench/bench_dcp_shifting.py --workload code-conv``): on the simulated A100 at SLO 1.0 both
  phases want the same fixed chunk.
- ``chat_batch``: one deployment alternating, ``period_s`` each, between interactive chat
  (azure-conv lengths: many decoders, TPOT-bound) and a batch of prefill-only jobs (scoring,
  classification, reranking, prefix warming: the prompt is read and one token -- a label, a
  score -- comes back). Batch prompts are azure-code's prompt lengths (p50 1469 / p90 5188
  tokens: the same provider's long inputs), output exactly 1. A 1-token request has no TPOT
  (``RequestRecord.tpot_ms`` and the goodput verdict count TPOT over requests with >= 2 output
  tokens only), so the batch phase is bound by TTFT alone, while the chat phase's decoders cap
  the round. Chosen, with its 150 s period and one Poisson rate, before any controller ran on
  it, as the phase pair that code-conv's measurement said was missing. Measured
  (``bench/bench_dcp_shifting.py --workload chat-batch``):
  the batch phase does not want large chunks either (its TTFT pays the pipeline crossing of the
  last piece), 384 on the simulated A100 32B; the phases differ only where the chat phase's
  TPOT cap is below that (32B at SLO 0.6 and 0.4).

Seeded like ``load_workload``: one stream for arrivals, one for lengths. Not in the named catalog
(wiring a generator there is a change to ``traces/load.py``); ``bench/bench_dcp_shifting.py``
runs them.
"""

from __future__ import annotations

import math

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.traces.arrivals import check_rate, poisson_arrivals
from ppsched.traces.load import load_workload
from ppsched.traces.workload import Workload

PREFILL_HEAVY = ((512, 1024), (32, 64))  # (prompt range, output range), inclusive
DECODE_HEAVY = ((32, 64), (512, 1024))
# code_conv's phases, in order: the trace each one draws its lengths from
CODE_CONV_PHASES = {"code": "azure-code", "conv": "azure-conv"}
# chat_batch's phases, in order: the trace each one draws its prompt lengths from
CHAT_BATCH_PHASES = {"chat": "azure-conv", "batch": "azure-code"}
BATCH_OUTPUT_TOKENS = 1  # prefill-only jobs: one token (a label, a score) comes back
SHIFTING_NAMES = ("alternating", "diurnal", "code-conv", "chat-batch")
PHASED = {"code-conv": tuple(CODE_CONV_PHASES), "chat-batch": tuple(CHAT_BATCH_PHASES)}
ALTERNATING_PERIOD_S = 120.0
DIURNAL_PERIOD_S = 300.0
CODE_CONV_PERIOD_S = 150.0
CHAT_BATCH_PERIOD_S = 150.0


def _check(rate: float, duration_s: float, period_s: float) -> None:
    check_rate(rate)
    for name, value in (("duration_s", duration_s), ("period_s", period_s)):
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"shifting workload {name}={value!r}: expected seconds > 0")


def alternating(rate: float, duration_s: float, seed: int = 0,
                period_s: float = ALTERNATING_PERIOD_S
                ) -> Workload:
    """Prefill-heavy and decode-heavy phases of ``period_s`` each, starting prefill-heavy."""
    _check(rate, duration_s, period_s)
    arr_seq, len_seq = np.random.SeedSequence(seed).spawn(2)
    times = poisson_arrivals(np.random.default_rng(arr_seq), rate, duration_s=duration_s)
    rng = np.random.default_rng(len_seq)
    requests = []
    for i, t in enumerate(times):
        (p_lo, p_hi), (o_lo, o_hi) = PREFILL_HEAVY if int(t // period_s) % 2 == 0 \
            else DECODE_HEAVY
        requests.append(RequestSpec(i, float(t), int(rng.integers(p_lo, p_hi + 1)),
                                    int(rng.integers(o_lo, o_hi + 1))))
    return Workload("alternating", tuple(requests), source="synthetic",
                    notes=(f"alternating phases of {period_s:g} s: prefill-heavy (prompt "
                           "512-1024, output 32-64) then decode-heavy (prompt 32-64, output "
                           "512-1024)",),
                    arrival=f"poisson rate={rate} seed={seed}")


def diurnal(rate: float, duration_s: float, seed: int = 0, period_s: float = DIURNAL_PERIOD_S,
            depth: float = 0.8, data_dir: str | None = None) -> Workload:
    """azure-conv lengths; Poisson at rate * (1 + depth * sin(2 pi t / period_s)), mean ``rate``."""
    _check(rate, duration_s, period_s)
    if not 0 <= depth < 1:
        raise UserError(f"diurnal depth={depth!r}: expected 0 <= depth < 1")
    peak = rate * (1 + depth)
    base = load_workload("azure-conv", rate=peak, duration_s=duration_s, seed=seed,
                         data_dir=data_dir)
    keep_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[2])
    requests = []
    for r in base.requests:  # thinning: keep an arrival at t with probability rate(t) / peak
        if keep_rng.random() * peak <= rate * (1 + depth * math.sin(2 * math.pi * r.arrival_s
                                                                     / period_s)):
            requests.append(RequestSpec(len(requests), r.arrival_s, r.prompt_tokens,
                                        r.output_tokens))
    return Workload("diurnal", tuple(requests), source=base.source,
                    notes=base.notes + (f"diurnal rate: mean {rate:g} req/s, x(1 +- {depth:g}) "
                                        f"over {period_s:g} s",),
                    arrival=f"modulated poisson rate={rate} seed={seed}")


def code_conv(rate: float, duration_s: float, seed: int = 0,
              period_s: float = CODE_CONV_PERIOD_S,
              only: str | None = None, data_dir: str | None = None) -> Workload:
    """Code and conversation phases of ``period_s`` each, starting with code; lengths drawn i.i.d.
    from each phase's trace. ``only`` ("code" or "conv") keeps that phase for the whole run (to
    see which fixed chunk each phase wants on its own). The default 150 s period puts equal
    shares of both phases in a 60 s warm-up + 300 s measurement window."""
    _check(rate, duration_s, period_s)
    if only is not None and only not in CODE_CONV_PHASES:
        raise UserError(f"code_conv only={only!r}: expected None or one of "
                        f"{', '.join(CODE_CONV_PHASES)}")
    # One seed for both: the same Poisson arrival stream, each arrival taking the lengths of the
    # trace whose phase it falls in (resample: i.i.d. rows, so each seed sees its own sample).
    phases = [load_workload(trace, rate=rate, duration_s=duration_s, seed=seed,
                            data_dir=data_dir, resample=True).requests
              for trace in CODE_CONV_PHASES.values()]
    names = list(CODE_CONV_PHASES)
    requests = []
    for i, r in enumerate(phases[0]):
        phase = names.index(only) if only is not None else int(r.arrival_s // period_s) % 2
        src = phases[phase][i]
        requests.append(RequestSpec(i, r.arrival_s, src.prompt_tokens, src.output_tokens))
    shape = (f"only the {only} phase" if only is not None else
             f"alternating phases of {period_s:g} s: code (azure-code lengths) then "
             "conversation (azure-conv lengths)")
    return Workload("code-conv", tuple(requests), source="azure-code+azure-conv",
                    notes=(shape,), arrival=f"poisson rate={rate} seed={seed}")


def chat_batch(rate: float, duration_s: float, seed: int = 0,
               period_s: float = CHAT_BATCH_PERIOD_S,
               only: str | None = None, data_dir: str | None = None) -> Workload:
    """Chat and batch phases of ``period_s`` each, starting with chat. Chat requests take
    azure-conv's (prompt, output) rows, batch requests azure-code's prompt with one output token,
    drawn i.i.d. ``only`` ("chat" or "batch") keeps that phase for the whole run. The default
    150 s period puts equal shares of both phases in a 60 s warm-up + 300 s measurement window."""
    _check(rate, duration_s, period_s)
    if only is not None and only not in CHAT_BATCH_PHASES:
        raise UserError(f"chat_batch only={only!r}: expected None or one of "
                        f"{', '.join(CHAT_BATCH_PHASES)}")
    # One Poisson stream for both phases (the same seed gives both traces the same arrivals);
    # each arrival takes the lengths of the trace its phase draws from.
    chat, batch = (load_workload(trace, rate=rate, duration_s=duration_s, seed=seed,
                                 data_dir=data_dir, resample=True).requests
                   for trace in CHAT_BATCH_PHASES.values())
    requests = []
    for i, r in enumerate(chat):
        phase = only if only is not None else \
            tuple(CHAT_BATCH_PHASES)[int(r.arrival_s // period_s) % 2]
        prompt, output = ((r.prompt_tokens, r.output_tokens) if phase == "chat"
                          else (batch[i].prompt_tokens, BATCH_OUTPUT_TOKENS))
        requests.append(RequestSpec(i, r.arrival_s, prompt, output))
    shape = (f"only the {only} phase" if only is not None else
             f"alternating phases of {period_s:g} s: chat (azure-conv lengths) then batch "
             f"(azure-code prompts, {BATCH_OUTPUT_TOKENS} output token)")
    return Workload("chat-batch", tuple(requests), source="azure-conv+azure-code",
                    notes=(shape,), arrival=f"poisson rate={rate} seed={seed}")


def phase_of(name: str, arrival_s: float) -> str:
    """The phase a request arriving at ``arrival_s`` belongs to, at each generator's defaults
    (diurnal: the half period above or below the mean rate)."""
    if name == "alternating":
        return "prefill-heavy" if int(arrival_s // ALTERNATING_PERIOD_S) % 2 == 0 \
            else "decode-heavy"
    if name == "code-conv":
        return list(CODE_CONV_PHASES)[int(arrival_s // CODE_CONV_PERIOD_S) % 2]
    if name == "chat-batch":
        return list(CHAT_BATCH_PHASES)[int(arrival_s // CHAT_BATCH_PERIOD_S) % 2]
    if name == "diurnal":
        return "high" if arrival_s % DIURNAL_PERIOD_S < DIURNAL_PERIOD_S / 2 else "low"
    raise UserError(f"shifting workload {name!r}: expected one of {', '.join(SHIFTING_NAMES)}")


def decoding_output_p50(workload: Workload) -> float:
    """The median output of the requests that decode (>= 2 output tokens), to size the sustained
    goodput window (``metrics.steady.window_for``). A 1-token request's E2E is its TTFT: sized by
    chat-batch's whole mix (median output 1) the cool-down would be 2 s and the last measured chat
    requests would decode under a fading load. Equal to the whole mix's median on alternating,
    diurnal and code-conv (checked for seeds 0 and 1), so their windows are unchanged."""
    outputs = [r.output_tokens for r in workload.requests if r.output_tokens >= 2]
    if not outputs:
        raise UserError(f"workload {workload.name!r}: no request with >= 2 output tokens to size "
                        "the window by")
    return float(np.median(outputs))


def shifting_workload(name: str, rate: float, duration_s: float, seed: int = 0,
                      only: str | None = None) -> Workload:
    """A shifting workload by name; ``only`` picks one phase of ``code-conv`` or ``chat-batch``."""
    if only is not None and name not in PHASED:
        raise UserError(f"shifting workload {name!r} with only={only!r}: only "
                        f"{' and '.join(PHASED)} have phases to pick")
    if name == "code-conv":
        return code_conv(rate, duration_s, seed, only=only)
    if name == "chat-batch":
        return chat_batch(rate, duration_s, seed, only=only)
    if name == "alternating":
        return alternating(rate, duration_s, seed)
    if name == "diurnal":
        return diurnal(rate, duration_s, seed)
    raise UserError(f"shifting workload {name!r}: expected one of {', '.join(SHIFTING_NAMES)}")
