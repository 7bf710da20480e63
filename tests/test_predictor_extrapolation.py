"""ALP trained on narrow data (128-token prefills and decodes) must not blow up on larger chunks.

The simulator's cost model is the ground truth here (allowed in tests, never in the predictor).
Bug reproduced (bench/dcp.md, bench/predictor.md): with plain forgetting, the ~1 ms by which a
128-token prefill exceeds the flat first staircase band was fitted as a huge sum(extend^2) weight
(x = 1/64 at 128 tokens), predicting 1024-token stages at 2x the truth. Before the fix this test
failed with errors of 100-220% on 512-2048-token prefills.
"""

from __future__ import annotations

import random

import pytest

from ppsched.core.batch import BatchShape
from ppsched.core.models import BUILTIN_MODELS
from ppsched.predictor.alp import ALPredictor
from ppsched.predictor.profile import default_profile
from ppsched.sim.cost import build_cost_model

# Relative error allowed on prefill chunk sizes never seen in training. Not 0: the offline
# profile (one source's staircase, Qwen-72B's) differs from the simulator's linear layers, which
# since issue 13 blend three profiled GEMM shapes (docs/COST_MODEL.md): at 384 tokens, prefix
# 2000 the trained predictor reads +16% (+11% when the simulator used Qwen-72B alone), and
# 128-token data cannot reveal that. Before the fix the errors were +32% (256) to +221% (2048)
# on PP4 and up to +952% on TP4.
TOLERANCE = 0.18
MODEL = BUILTIN_MODELS["qwen2.5-32b"]
PARALLEL = {"pp4": (4, 1)}  # TP4 is a known limitation: bench/predictor.md


@pytest.fixture(scope="module", params=sorted(PARALLEL))
def setup(request):
    pp, tp = PARALLEL[request.param]
    cost = build_cost_model(MODEL, "a100-40g-pcie", pp_size=pp, tp_size=tp, seed=0, noise=True)
    return cost, default_profile(MODEL, pp_size=pp, tp=tp)


def narrow_shape(rng: random.Random, chunk: int) -> BatchShape:
    """Half decode batches, half single `chunk`-token prefill pieces: a small-chunk run."""
    if rng.random() < 0.5:
        n = rng.randrange(1, 64)
        return BatchShape(decode_count=n, decode_ctx_sum=sum(rng.randrange(100, 3000)
                                                             for _ in range(n)))
    return BatchShape(prefill=((rng.randrange(0, 3000), chunk),))


def train(alp: ALPredictor, cost, rng: random.Random, steps: int, chunk: int = 128) -> None:
    for _ in range(steps):
        shape = narrow_shape(rng, chunk)
        alp.update(shape, cost.stage_ms(0, shape))  # noisy, as the engine measures


def rel_errors(alp: ALPredictor, cost, chunks) -> dict[tuple[int, int], float]:
    out = {}
    for chunk in chunks:
        for prefix in (0, 2000):
            shape = BatchShape(prefill=((prefix, chunk),))
            truth = cost.stage_ms_median(0, shape)
            out[(chunk, prefix)] = alp.predict(shape) / truth - 1.0
    return out


@pytest.mark.parametrize("online", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_trained_on_128_token_chunks_extrapolates_to_2048(setup, online, seed):
    cost, profile = setup
    alp = ALPredictor(profile, correct_linear_online=online)
    train(alp, cost, random.Random(seed), 3000)
    errs = rel_errors(alp, cost, (256, 384, 512, 768, 1024, 1536, 2048))
    bad = {k: f"{v:+.0%}" for k, v in errs.items() if abs(v) > TOLERANCE}
    assert not bad, f"(chunk, prefix) -> error beyond {TOLERANCE:.0%}: {bad}"
    # the trained sizes themselves stay accurate (the fix does not trade them away)
    assert all(abs(v) < 0.05 for v in rel_errors(alp, cost, (128,)).values())


def test_long_narrow_run_stays_bounded(setup):
    cost, profile = setup
    # 20 forgetting windows of 128-token chunks: no slow drift of the unexcited directions
    alp = ALPredictor(profile)
    train(alp, cost, random.Random(2), 8000)
    assert alp.resets == 0
    assert all(abs(v) <= TOLERANCE for v in rel_errors(alp, cost, (1024, 2048)).values())


def test_wide_data_after_narrow_data_is_learned(setup):
    cost, profile = setup
    # the prior must not stop the predictor from learning large chunks once it sees them
    rng = random.Random(3)
    alp = ALPredictor(profile)
    train(alp, cost, rng, 2000)
    for _ in range(1500):
        train(alp, cost, rng, 1, chunk=rng.choice((256, 512, 1024, 2048)))
    assert all(abs(v) < 0.05 for v in rel_errors(alp, cost, (512, 1024, 2048)).values())


@pytest.mark.parametrize("factor", [0.1, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_profile_off_by_10x_is_unlearned_and_still_extrapolates(setup, factor, seed):
    # A profile for hardware 10x faster/slower than the server, small chunks (64-256 tokens,
    # two staircase bands: enough to tell a device scale from an offset). Before the device
    # scale the x10 profile stayed ~10x off; now the large chunks are as good as with the right
    # profile. With one band only (128-token chunks alone) a level and an offset look the
    # same: docs/PREDICTOR.md (x10 then +37% at 2048 tokens, beyond this tolerance).
    cost, profile = setup
    alp = ALPredictor(profile.scaled(factor))
    rng = random.Random(seed)
    for _ in range(3000):
        shape = narrow_shape(rng, rng.choice((64, 128, 256)))
        alp.update(shape, cost.stage_ms(0, shape))
    errs = rel_errors(alp, cost, (128, 512, 1024, 2048))
    bad = {k: f"{v:+.0%}" for k, v in errs.items() if abs(v) > TOLERANCE}
    assert not bad, f"(chunk, prefix) -> error beyond {TOLERANCE:.0%}: {bad}"


def test_one_band_data_do_not_keep_a_slower_devices_profile(setup):
    # Only 128-token chunks and small decode batches: a level and an offset fit alike. Without
    # the bias's one-sided anchor the x10 profile was kept behind a negative bias and a
    # 2048-token prefill was predicted +676%; now +37% (docs/PREDICTOR.md). The bound, 50%,
    # only tells the two apart: one-band data cannot do better.
    cost, profile = setup
    alp = ALPredictor(profile.scaled(10.0))
    train(alp, cost, random.Random(0), 3000)
    errs = rel_errors(alp, cost, (2048,))
    assert all(abs(v) < 0.5 for v in errs.values()), errs
    assert alp.weights[3] > -100.0  # no large negative offset left holding the profile
