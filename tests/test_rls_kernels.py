"""The unrolled RLS kernels are bit-identical to the row loops they replace, for every size."""

from __future__ import annotations

import math
import random
from operator import mul

import pytest

from ppsched.predictor.rls_kernels import anchor_step, matrix, relative_rls_step, rls_step


def loop_rls(p, w, x, err, forgetting, guard):
    """The loops as ALP's and the device fit's updates write them."""
    n = len(w)
    px = [sum(map(mul, row, x)) for row in p]
    denom = forgetting + sum(map(mul, x, px))
    if guard and not (denom > 0 and math.isfinite(denom)):
        return False
    inv_lambda = 1.0 / forgetting
    for i in range(n):
        ki = px[i] / denom
        w[i] += ki * err
        row = p[i]
        for j in range(i, n):
            v = (row[j] - ki * px[j]) * inv_lambda
            row[j] = v
            p[j][i] = v
    return True


def loop_anchor(p, w, pa, gain, denom):
    n = len(w)
    for i in range(n):
        w[i] += pa[i] * gain
        ki = pa[i] / denom
        row = p[i]
        for j in range(i, n):
            v = row[j] - ki * pa[j]
            row[j] = v
            p[j][i] = v


def random_state(rng, n):
    a = [[rng.gauss(0, 1) for _ in range(n)] for _ in range(n)]
    p = [[sum(a[i][k] * a[j][k] for k in range(n)) + (0.5 if i == j else 0.0)
          for j in range(n)] for i in range(n)]
    w = [rng.gauss(0, 3) for _ in range(n)]
    return p, w


@pytest.mark.parametrize("n", [1, 4, 5, 7])
def test_kernels_match_the_loops_bit_for_bit(n):
    rng = random.Random(n)
    p_loop, w_loop = random_state(rng, n)
    p_kern = matrix(n)(p_loop)
    w_kern = w_loop[:]
    rls, anchor = rls_step(n), anchor_step(n)
    for step in range(300):
        x = [rng.choice([0.0, -0.0, rng.gauss(0, 2), rng.uniform(0, 1e-3)]) for _ in range(n)]
        err = rng.gauss(0, 5)
        forgetting = rng.choice([0.99, 0.9975, 1.0])
        assert loop_rls(p_loop, w_loop, x, err, forgetting, True) == \
            rls(p_kern, w_kern, x, err, forgetting, True)
        a = step % n
        pa_loop, pa_kern = p_loop[a][:], p_kern.rows()[a]
        denom = 1.0 / (0.0025 * rng.uniform(0.01, 10)) + pa_loop[a]
        gain = (rng.gauss(0, 1) - w_loop[a]) / denom
        loop_anchor(p_loop, w_loop, pa_loop, gain, denom)
        anchor(p_kern, w_kern, pa_kern, gain, denom)
        assert [v.hex() for v in w_kern] == [v.hex() for v in w_loop], step
        assert [[v.hex() for v in r] for r in p_kern.rows()] == \
            [[v.hex() for v in r] for r in p_loop]


@pytest.mark.parametrize("n", [1, 7])
def test_the_relative_step_matches_the_loops_bit_for_bit(n):
    """The device fit's step: the row scaled by 1/y, its error against the target, the RLS
    step unguarded, and whether every diagonal stays in (0, limit)."""
    rng = random.Random(100 + n)
    p_loop, w_loop = random_state(rng, n)
    p_kern = matrix(n)(p_loop)
    w_kern = w_loop[:]
    step = relative_rls_step(n, 1e8)
    healthy_seen = set()
    for i in range(300):
        x = [rng.choice([0.0, 1.0, rng.gauss(0, 2), rng.uniform(0, 1e-3)]) for _ in range(n)]
        inv_y = 1.0 / (0.1 * rng.uniform(0.5, 80))
        xs = [v * inv_y for v in x]
        err = 10.0 - sum(map(mul, w_loop, xs))
        loop_rls(p_loop, w_loop, xs, err, 0.99, False)
        healthy = step(p_kern, w_kern, x, inv_y, 10.0, 0.99)
        assert healthy == all(0.0 < p_loop[j][j] < 1e8 for j in range(n)), i
        healthy_seen.add(healthy)
        assert [v.hex() for v in w_kern] == [v.hex() for v in w_loop], i
        assert [[v.hex() for v in r] for r in p_kern.rows()] == \
            [[v.hex() for v in r] for r in p_loop]
        if not healthy:
            p_loop, _ = random_state(rng, n)
            p_kern = matrix(n)(p_loop)
    assert True in healthy_seen


def test_a_bad_denominator_changes_nothing_when_guarded():
    p = matrix(2)([[-1.0, 0.0], [0.0, -1.0]])
    w = [1.0, 2.0]
    assert rls_step(2)(p, w, [1.0, 1.0], 3.0, 0.5, True) is False
    assert p.rows() == [[-1.0, 0.0], [0.0, -1.0]] and w == [1.0, 2.0]


@pytest.mark.pure
def test_a_predictor_using_the_kernels_still_pickles():
    import pickle

    from ppsched.core.batch import BatchShape
    from ppsched.core.models import BUILTIN_MODELS
    from ppsched.predictor.alp import ALPredictor
    from ppsched.predictor.profile import default_profile

    alp = ALPredictor(default_profile(BUILTIN_MODELS["qwen2.5-32b"], pp_size=4))
    shape = BatchShape(((0, 512),), 8, 4000)
    alp.update(shape, 40.0)
    copy = pickle.loads(pickle.dumps(alp))
    copy.update(shape, 41.0)
    alp.update(shape, 41.0)
    assert copy.weights == alp.weights and copy.cov.rows() == alp.cov.rows()


def test_the_generated_kernels_module_is_current():
    """ppsched/predictor/kernels.py is what the generators give today's sizes and constants
    (``python scripts/gen_kernels.py`` rewrites it)."""
    from ppsched.native import source_path
    from ppsched.predictor.kernels_source import module_source

    source = source_path("ppsched.predictor.kernels").read_text()
    assert source == module_source(), "stale: run python scripts/gen_kernels.py"
