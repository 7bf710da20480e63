"""Live (real SGLang 0.5.23, CPU, --pp-size 2): the controller learns the server and honours the
user's choices.

Three servers with the same tiny model, `predictive` chunking, the built-in (A100) profile and
the candidates 8..128, under the same load: SGLang's default loop with a loose TPOT SLO (ALP
learning the server), then --enable-mixed-chunk with a loose and a tight TPOT SLO (the SLO
response: in a mixed loop a smaller chunk shortens the stage every decode rides in, so a tight
TPOT means a smaller chunk; in the default loop it does not -- every prefill turn is a lost
decode turn, so there the least steady-state TPOT wins, tests/test_dcp_predictive.py). Each
server is shared by every assertion (module-scoped); the figures are printed (`pytest -s`) and
recorded in bench/predictor.md. Skipped only when the SGLang venv
(scripts/setup_sglang_cpu.sh) is absent.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pytest

from ppsched.core.requests import RequestSpec
from ppsched.experiments.live_replay import ReplayOptions, replay
from ppsched.sglang_patch.cpu_server import (
    cpu_args,
    free_port,
    launch,
    make_tiny_model,
    sglang_python,
)

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None, reason="SGLang CPU venv absent: run "
                                 "scripts/setup_sglang_cpu.sh")]

CANDIDATES = (8, 16, 32, 64, 128)
WARMUP = 100  # stage-0 iterations before ALP's errors count (profile eval's default)
LOOSE_TPOT_MS = 60_000.0  # no chunk can miss it
TIGHT_FRACTION = 0.25  # of the loose run's predicted round for the largest chunk (see `tight`)
PORTS = range(30000, 31000)  # this test's ports: below the OS's ephemeral range (32768+)



def workload() -> list[RequestSpec]:
    """40 requests over 10 s, prompts of 20-600 tokens (several chunks each), 8-32 outputs."""
    rng = np.random.default_rng(18)
    arrivals = np.sort(rng.uniform(0, 10.0, 40))
    prompts = rng.integers(20, 600, 40)
    outs = rng.integers(8, 32, 40)
    return [RequestSpec(i, float(a), int(p), int(o))
            for i, (a, p, o) in enumerate(zip(arrivals, prompts, outs, strict=True))]


@dataclass(frozen=True)
class Run:
    tpot_slo_ms: float
    log: list[dict]
    tpot_ms: list[float]  # measured per request: (last - first token) / (outputs - 1)
    failed: int

    def rank0(self, kind: str) -> list[dict]:
        return [r for r in self.log if r["kind"] == kind and r["rank"] == 0]

    def applied_chunks(self) -> list[int]:
        return [r["chunk"] for r in self.rank0("chunk_applied")]

    def chunks_with_decoders(self) -> list[int]:
        """Chunks decided while some slot was decoding (the TPOT SLO's reach): the SLO rule
        records it (``decoding``), the plain loop's rule names its nothing-decodes regime."""
        return [r["chunk"] for r in self.rank0("decision") if r["inputs"].get("decoding", 1.0)
                and r["regime"] != "NO_DECODES_MEETING_TPOT"]

    def stages(self) -> list[dict]:
        """Stage-0 iterations ALP predicted (before learning from them), in order."""
        return [r for r in self.rank0("stage") if r.get("alp_ms") is not None]


def serve(model, tmp, tpot_slo_ms: float, *, mixed: bool) -> Run:
    log = tmp / "decisions.jsonl"
    env = {**{k: "" for k in os.environ if k.startswith("PPSCHED_")},
           "PPSCHED_CHUNK": "predictive", "PPSCHED_CANDIDATES": ",".join(map(str, CANDIDATES)),
           "PPSCHED_SLO_TTFT_MS": "60000", "PPSCHED_SLO_TPOT_MS": f"{tpot_slo_ms:.3f}",
           "PPSCHED_DECISION_LOG": str(log)}
    port = free_port(PORTS.start, PORTS.stop - 1)
    extra = ("--enable-mixed-chunk",) if mixed else ()
    server = launch(PY, cpu_args(model, port, chunk=2 * max(CANDIDATES), extra=extra),
                    tmp / "server.log", env=env)
    try:
        records, _ = replay(server.url, workload(), ReplayOptions(concurrency=40))
    finally:
        server.stop()
    tpot = [1000.0 * (r.finish_s - r.first_token_s) / (r.output_tokens - 1)
            for r in records if not r.rejected and r.output_tokens > 1]
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return Run(tpot_slo_ms, lines, tpot, sum(r.rejected for r in records))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model(PY, tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="module")
def plain(model, tmp_path_factory):
    return serve(model, tmp_path_factory.mktemp("plain"), LOOSE_TPOT_MS, mixed=False)


@pytest.fixture(scope="module")
def loose(model, tmp_path_factory):
    return serve(model, tmp_path_factory.mktemp("loose"), LOOSE_TPOT_MS, mixed=True)


@pytest.fixture(scope="module")
def tight(model, loose, tmp_path_factory):
    # Tight = a quarter of the round the loose run's largest chunk was predicted to need
    # (median over its decisions): derived from this box's own speed. A quarter, not a half: the
    # box's speed drifts between two servers -- on one CI run the tight server ran ~2.4x faster
    # (measured TPOT mean 53 vs 131 ms, both at 128), ALP there predicted 128 within half the
    # loose round, and the "tight" SLO was not tight. A quarter stays below 128's round through
    # a 4x drift; where no candidate fits, the rule takes the least stage (the smallest chunk).
    periods = [r["inputs"]["period_ms"] for r in loose.rank0("decision")
               if r["chunk"] == max(CANDIDATES)]
    assert periods, "the loose run never chose the largest candidate"
    tpot_slo_ms = TIGHT_FRACTION * float(np.median(periods))
    return serve(model, tmp_path_factory.mktemp("tight"), tpot_slo_ms, mixed=True)


def ape(predicted: float, measured: float) -> float:
    return 100.0 * abs(predicted - measured) / measured


def hindsight_reference(stages: list[dict]) -> list[float]:
    """Per-row error of the best a shape-only predictor can do on these measurements: the
    median measured time of the same shape (mode, prefill tokens, decodes) over the whole run,
    known in hindsight. Its MAPE is how well this box's stage times repeat."""
    by_shape = defaultdict(list)
    key = [(r["mode"], r["prefill_tokens"], r["decode_count"]) for r in stages]
    for k, r in zip(key, stages, strict=True):
        by_shape[k].append(r["measured_ms"])
    median = {k: float(np.median(v)) for k, v in by_shape.items()}
    return [ape(median[k], r["measured_ms"]) for k, r in zip(key, stages, strict=True)]


def curve(run: Run, step: int = 50) -> list[tuple[int, float, float]]:
    """(first iteration, ALP MAPE, hindsight-reference MAPE) per window of ``step``."""
    stages = run.stages()
    alp = [ape(r["alp_ms"], r["measured_ms"]) for r in stages]
    ref = hindsight_reference(stages)
    return [(i, float(np.mean(alp[i:i + step])), float(np.mean(ref[i:i + step])))
            for i in range(0, len(stages), step)]


def test_no_request_failed(plain, loose, tight):
    assert plain.failed == 0 and loose.failed == 0 and tight.failed == 0


def report(run: Run, which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Print the error-vs-iterations curve; (APE, reference APE, ALP/measured) after warm-up."""
    stages = run.stages()
    assert len(stages) > 2 * WARMUP, f"only {len(stages)} stage iterations; workload too small"
    alp = np.array([ape(r["alp_ms"], r["measured_ms"]) for r in stages][WARMUP:])
    ref = np.array(hindsight_reference(stages)[WARMUP:])
    ratio = np.array([r["alp_ms"] / r["measured_ms"] for r in stages][WARMUP:])
    first = stages[0]
    print(f"\n{which} (TPOT SLO {run.tpot_slo_ms:.0f} ms): first stage measured "
          f"{first['measured_ms']:.1f} ms, ALP {first['alp_ms']:.3f} ms (the A100 profile)")
    for i, a, r in curve(run):
        print(f"  iterations {i:4d}+: ALP MAPE {a:7.1f}%   hindsight per-shape median {r:6.1f}%")
    print(f"  after {WARMUP}: ALP MAPE {alp.mean():.1f}% (median APE {np.median(alp):.1f}%, "
          f"median ALP/measured {np.median(ratio):.2f}), hindsight reference {ref.mean():.1f}%, "
          f"n={len(alp)}")
    print_by_kind(stages[WARMUP:], alp, ref, ratio)
    return alp, ref, ratio


def stage_kind(stage: dict) -> str:
    """Where ALP's error comes from: decode-only stages by request count, prefills by whether
    some piece is shorter than the largest candidate (here: a prompt's last piece)."""
    if stage["mode"] == "decode":
        return f"decode x{min(stage['decode_count'], 5)}{'+' if stage['decode_count'] > 4 else ''}"
    short = any(extend < max(CANDIDATES) for _, extend in stage["prefill"])
    return f"{stage['mode']}, {'a piece < ' if short else 'all pieces = '}{max(CANDIDATES)}"


def print_by_kind(stages: list[dict], alp: np.ndarray, ref: np.ndarray,
                  ratio: np.ndarray) -> None:
    """One line per stage kind: rows, share of ALP's error, both MAPEs, medians (a failure's
    output then says which stages ALP missed; the run's log is gone with the CI machine)."""
    kinds = np.array([stage_kind(s) for s in stages])
    measured = np.array([s["measured_ms"] for s in stages])
    for kind in sorted(set(kinds)):
        rows = kinds == kind
        print(f"    {kind:26s} n={rows.sum():4d}  share of error {alp[rows].sum() / alp.sum():4.2f}"
              f"  ALP {alp[rows].mean():5.1f}%  reference {ref[rows].mean():5.1f}%  median "
              f"{np.median(measured[rows]):5.1f} ms, ALP/measured {np.median(ratio[rows]):.2f}")


def test_alp_level_matches_the_server(plain):
    # The A100 profile starts ~10^4x off this CPU server (first line printed). Stuck on a
    # profile, ALP was 2.8x / 0.33x off; learned, its median ratio to the measured
    # stage is near 1 even where the stage times themselves scatter.
    _, _, ratio = report(plain, "default loop")
    assert 1 / 1.5 <= np.median(ratio) <= 1.5


def test_alp_mape_after_warmup(plain):
    # Each MAPE is a mean over a few hundred noisy rows, so both sides of the 15% line are read
    # with their standard error (one-sided 95%, z = 1.645): the target is checked where the box
    # repeats clearly better than 15% (the reference's upper bound below it), and ALP fails it
    # when its MAPE is clearly above 15% (its lower bound above it). On quiet runs ALP read
    # 12.8 / 16.9% against references of 12.1 / 15.3% (bench/predictor.md): a bare "mean <= 15"
    # on both sides would pass or fail on the noise of one run.
    alp, ref, _ = report(plain, "default loop")
    z = 1.645
    ref_high = ref.mean() + z * ref.std(ddof=1) / np.sqrt(len(ref))
    alp_low = alp.mean() - z * alp.std(ddof=1) / np.sqrt(len(alp))
    print(f"  ALP MAPE {alp.mean():.1f}% (95% lower bound {alp_low:.1f}%), reference "
          f"{ref.mean():.1f}% (95% upper bound {ref_high:.1f}%)")
    if ref_high > 15.0:
        # A shared 2-core box under other jobs' load: identical batches differ by
        # about 15% or more on average, which no predictor can beat. Not a pass.
        pytest.skip(f"stage times do not repeat on this box (hindsight per-shape median "
                    f"{ref.mean():.1f}% MAPE, upper bound {ref_high:.1f}%; ALP "
                    f"{alp.mean():.1f}%): needs a quiet machine")
    assert alp_low <= 15.0, f"ALP MAPE {alp.mean():.1f}% (lower bound {alp_low:.1f}%)"


def test_tight_tpot_slo_makes_predictive_choose_smaller_chunks(loose, tight):
    lo, ti = loose.applied_chunks(), tight.applied_chunks()
    assert lo and ti
    print(f"\nloose TPOT SLO {loose.tpot_slo_ms:.0f} ms: applied chunks "
          f"{sorted(Counter(lo).items())}, median {np.median(lo):.0f}; measured TPOT mean "
          f"{np.mean(loose.tpot_ms):.1f} ms, P90 {np.percentile(loose.tpot_ms, 90):.1f} ms")
    print(f"tight TPOT SLO {tight.tpot_slo_ms:.1f} ms: applied chunks "
          f"{sorted(Counter(ti).items())}, median {np.median(ti):.0f}; measured TPOT mean "
          f"{np.mean(tight.tpot_ms):.1f} ms, P90 {np.percentile(tight.tpot_ms, 90):.1f} ms")
    reasons = Counter(r["reason"] for r in tight.rank0("decision"))
    print(f"tight decisions: {reasons.most_common(4)}")
    # The SLO acts where there are decoders to protect: while nothing decodes (the burst's
    # first prompts), the rule has no TPOT budget and sizes chunks for the first tokens alone
    # (rule_slo, term 4). Compared: the decisions made with decoders present.
    lo_d, ti_d = loose.chunks_with_decoders(), tight.chunks_with_decoders()
    assert lo_d and ti_d
    print(f"with decoders present: loose median {np.median(lo_d):.0f} (n={len(lo_d)}), tight "
          f"median {np.median(ti_d):.0f} (n={len(ti_d)})")
    assert np.median(ti_d) < np.median(lo_d)
    assert np.mean(ti_d) < np.mean(lo_d)
    # Not asserted: that the measured TPOT falls. On this CPU backend it need not: a mixed
    # batch runs each decode as its own extend (~5-7 ms each here, ~1 ms in a decode batch), so
    # a 32-token mixed stage is not much shorter than a 128-token one and needs 4x the turns
    # (measured in bench/predictor.md; ALP has no feature for it).


def test_candidates_below_128_are_used(plain, loose, tight):
    for run in (plain, loose, tight):
        assert set(run.applied_chunks()) <= set(CANDIDATES)
        assert all(r["chunk"] in CANDIDATES for r in run.rank0("decision"))
    small = [c for c in tight.applied_chunks() if c < 128]
    assert small, "no chunk below 128 was applied under the tight SLO"
