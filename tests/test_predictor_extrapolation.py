"""ALP trained on narrow data (128-token prefills and decodes) must not blow up on larger chunks.

The simulator's cost model is the ground truth here (allowed in tests, never in the predictor).
Bug reproduced (bench/dcp.md, bench/predictor.md): with plain forgetting, the ~1 ms by which a
128-token prefill exceeds the flat first staircase band was fitted as a huge sum(extend^2) weight
(x = 1/64 at 128 tokens), predicting 1024-token stages at 2x the truth. Before the fix this test
failed with errors of 100-220% on 512-2048-token prefills. With today's cost model and the anchor
disabled (`_anchor` a no-op) it still fails: +37..+55% at 256 tokens, +64..+88% at 384, where
the level-or-offset range allows up to +35..+48%; without the device scale (`_learn_scale` a
no-op) the x0.1/x10 tests fail.
"""

from __future__ import annotations

import random

import pytest

from ppsched.core.batch import BatchShape
from ppsched.core.models import BUILTIN_MODELS
from ppsched.predictor.alp import ALPredictor
from ppsched.predictor.profile import default_profile
from ppsched.sim.cost import build_cost_model

# What one or two staircase bands of training data cannot reveal (measured, bench/predictor.md):
# the simulator's linear layers run above the profile's staircase at small token
# counts (+5.1 ms = +46% at <= 128 tokens, +1.8 ms at 256, +0.4 ms at 384, ~0 from 1536 on; the
# eager launch floor, 4.2 ms per stage here, never binds a prefill stage). Whether that excess is
# a level (it scales up with the chunk) or an offset (it stays) is not in the data, so the test
# bounds are not one tuned constant but the range the two explanations span, computed from the
# profile and the cost model, widened by MARGIN (stated below). Before the anchor fix the errors
# were +32% (256) to +221% (2048) on PP4 and up to +952% on TP4: far outside either explanation.
# MARGIN: the accuracy the trained sizes themselves must reach (5%), on both sides.
MARGIN = 0.05
TOLERANCE = 0.05  # relative error on sizes the data did cover (trained or learned)
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


def level_and_offset(cost, profile, chunks) -> tuple[float, float, float]:
    """What the training bands show of the truth's linear layers against the profile's:
    (slope, intercept) of the least-squares line truth = slope * profile + intercept through
    the trained chunk sizes (None, None for a single band), and the mean offset."""
    xs = [profile.linear_ms(c) for c in chunks]
    ys = [cost.breakdown(0, BatchShape(prefill=((0, c),)))["linear_ms"] for c in chunks]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0.0:
        return None, None, my - mx
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx, my - mx


def explanation_range(cost, profile, shape: BatchShape,
                      explanations) -> tuple[float, float, float]:
    """(low, high, truth) in ms: the spread of `explanations` (each linear_ms -> ms) plus the
    true attention; low also allows all attention missed (the prefill weights' prior is 0 and
    the training chunks excite them little), both sides widened by MARGIN of the truth."""
    parts = cost.breakdown(0, shape)
    lin = profile.linear_ms(shape.prefill_tokens)
    values = [explain(lin) + parts["attention_ms"] for explain in explanations]
    truth = cost.stage_ms_median(0, shape)
    return (min(values) - parts["attention_ms"] - MARGIN * truth,
            max(values) + MARGIN * truth, truth)


def outside(alp: ALPredictor, cost, profile, sizes, explanations) -> dict:
    """(chunk, prefix) -> 'error (allowed low..high)' for predictions outside the range.
    A prediction within MARGIN of the truth is right whatever the explanations span (the device
    fit, alp.py, answers the trained sizes from the data alone)."""
    bad = {}
    for chunk in sizes:
        for prefix in (0, 2000):
            shape = BatchShape(prefill=((prefix, chunk),))
            low, high, truth = explanation_range(cost, profile, shape, explanations)
            got = alp.predict(shape)
            if not (low <= got <= high or abs(got / truth - 1.0) <= MARGIN):
                bad[(chunk, prefix)] = (f"{got / truth - 1:+.0%} (allowed {low / truth - 1:+.0%}"
                                        f"..{high / truth - 1:+.0%})")
    return bad


def one_band_explanations(cost, profile):
    """128-token chunks: one band. The excess over the profile is either an offset (the
    profile's level kept: what ALP's prior on the level says) or a scale of the level."""
    _, _, offset = level_and_offset(cost, profile, (128,))
    ratio = (profile.linear_ms(128) + offset) / profile.linear_ms(128)
    return (lambda lin: lin + offset, lambda lin: lin * ratio)


@pytest.mark.parametrize("online", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_trained_on_128_token_chunks_extrapolates_to_2048(setup, online, seed):
    # 3000 iterations is still a transient for the device scale: it took the excess as a level
    # first and hands it back to the offset slowly (bench/predictor.md), so here the
    # predictions may lie anywhere between the two explanations, not only at the offset one.
    cost, profile = setup
    alp = ALPredictor(profile, correct_linear_online=online)
    train(alp, cost, random.Random(seed), 3000)
    bad = outside(alp, cost, profile, (256, 384, 512, 768, 1024, 1536, 2048),
                  one_band_explanations(cost, profile))
    assert not bad, f"(chunk, prefix) -> error outside level-or-offset: {bad}"
    # the trained sizes themselves stay accurate (the fix does not trade them away)
    assert all(abs(v) < TOLERANCE for v in rel_errors(alp, cost, (128,)).values())


def test_long_narrow_run_settles_on_the_profiles_level(setup):
    cost, profile = setup
    # 20 forgetting windows of 128-token chunks: no slow drift of the unexcited directions, and
    # where the data cannot tell a level from an offset the profile's level decides (ALP's
    # prior, docs/PREDICTOR.md): the offset explanation alone, within MARGIN.
    alp = ALPredictor(profile)
    train(alp, cost, random.Random(2), 8000)
    assert alp.resets == 0
    offset_only = one_band_explanations(cost, profile)[:1]
    bad = outside(alp, cost, profile, (384, 1024, 2048), offset_only)
    assert not bad, f"(chunk, prefix) -> not the profile's level plus an offset: {bad}"


def test_wide_data_after_narrow_data_is_learned(setup):
    cost, profile = setup
    # the prior must not stop the predictor from learning large chunks once it sees them
    rng = random.Random(3)
    alp = ALPredictor(profile)
    train(alp, cost, rng, 2000)
    for _ in range(1500):
        train(alp, cost, rng, 1, chunk=rng.choice((256, 512, 1024, 2048)))
    assert all(abs(v) < TOLERANCE for v in rel_errors(alp, cost, (512, 1024, 2048)).values())


@pytest.mark.parametrize("factor", [0.1, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_profile_off_by_10x_is_unlearned_and_still_extrapolates(setup, factor, seed):
    # A profile for hardware 10x faster/slower than the server, small chunks (64-256 tokens,
    # two staircase bands: enough to tell a device scale from an offset). With the device scale
    # disabled (`_learn_scale` a no-op) the x0.1 run reads about -50% at 1024-2048 tokens and
    # the x10 one +90..+140%, outside the range below. Now the predictions
    # lie between what the bands' data say (their line, extrapolated: the simulator's small-
    # token excess shrinks from band to band, so that line's slope is 0.70x the profile's) and
    # what the RIGHT profile's level says (plus the bands' mean offset): the wrong profile's
    # factor no longer decides. The right profile itself lands in the same range (-21% at 2048
    # tokens, the x0.1 one too; bench/predictor.md).
    cost, profile = setup
    alp = ALPredictor(profile.scaled(factor))
    rng = random.Random(seed)
    for _ in range(3000):
        shape = narrow_shape(rng, rng.choice((64, 128, 256)))
        alp.update(shape, cost.stage_ms(0, shape))
    slope, intercept, offset = level_and_offset(cost, profile, (64, 128, 256))
    bad = outside(alp, cost, profile, (128, 512, 1024, 2048),
                  (lambda lin: slope * lin + intercept, lambda lin: lin + offset))
    assert not bad, f"(chunk, prefix) -> error outside data-or-right-profile: {bad}"


def test_one_band_data_do_not_keep_a_slower_devices_profile(setup):
    # Only 128-token chunks and small decode batches: a level and an offset fit alike. Without
    # the bias's one-sided anchor the x10 profile was kept behind a negative bias and a
    # 2048-token prefill was predicted +676%; now +37..38% (+40% with a Gaussian level prior),
    # the scale explanation of the RIGHT profile (+40..42%): within the range the right
    # profile's two explanations span.
    cost, profile = setup
    alp = ALPredictor(profile.scaled(10.0))
    train(alp, cost, random.Random(0), 3000)
    bad = outside(alp, cost, profile, (384, 2048), one_band_explanations(cost, profile))
    assert not bad, f"(chunk, prefix) -> error outside level-or-offset: {bad}"
    assert alp.weights[3] > -100.0  # no large negative offset left holding the profile


def test_one_band_data_do_not_keep_a_faster_devices_profile(setup):
    # The mirror of the x10 case. A positive offset is a plausible per-iteration overhead; with
    # no prior on it, once the device scale's early transient was over (~4000 iterations) the
    # x0.1 profile was kept behind one: -71% at 2048 tokens from 6000 iterations (the 3000-
    # iteration tests above caught it mid-crossing, +7%). The bias's two-sided prior, 0 +- one
    # first-band level (OFFSET_PRIOR_BANDS), now lets the level move: +6% (bench/predictor.md).
    cost, profile = setup
    alp = ALPredictor(profile.scaled(0.1))
    train(alp, cost, random.Random(0), 6000)
    bad = outside(alp, cost, profile, (384, 2048), one_band_explanations(cost, profile))
    assert not bad, f"(chunk, prefix) -> error outside level-or-offset: {bad}"


@pytest.mark.parametrize("factor", [0.1, 1.0, 10.0])
def test_a_sparse_second_band_overrules_a_wrong_profiles_level(setup, factor):
    # What predictive runs in SGLang's plain loop: mostly 128-token chunks, 1 chunk in 20 of 256
    # tokens. Those few two-band samples show the level; with the Gaussian prior on it (the
    # profile's own level +-10%) the x10 profile held 256-token prefills at +19..+26% (the
    # controller then kept to 128-token chunks: bench/predictor.md, "A profile for other
    # hardware"). The Student-t prior (LEVEL_PRIOR_DOF) yields to data that lie many SDs from
    # it, so every factor learns what the data cover, as the right profile does.
    cost, profile = setup
    alp = ALPredictor(profile.scaled(factor))
    rng = random.Random(4)
    for _ in range(4000):
        shape = narrow_shape(rng, 256 if rng.random() < 0.05 else 128)
        alp.update(shape, cost.stage_ms(0, shape))
    errors = rel_errors(alp, cost, (128, 256))
    assert all(abs(v) < TOLERANCE for v in errors.values()), errors
