"""ALP's update (sums in C, ``sum(map(mul, ...))``; the RLS step, the priors and the checks fused
into one generated step, ``alp_kernel``) is bit-identical to the loops.

``Textbook`` is ALPredictor with ``update`` written as plain loops (generator sums); both learn
the same random stream of stages -- prefills, decodes, mixed, outliers, profiles off by x0.1 and
x10 -- and must hold exactly equal weights, covariance and device scale after every step.
"""

import math
import random

import pytest

from ppsched.core.batch import BatchShape
from ppsched.predictor import alp as alp_mod
from ppsched.predictor.alp import ALPredictor, features
from ppsched.predictor.profile import LinearProfile

pytestmark = pytest.mark.pure  # subclasses a compiled class (tests/conftest.py)


class Textbook(ALPredictor):
    def update(self, shape, measured_ms):
        if not (math.isfinite(measured_ms) and measured_ms > 0):
            return
        lin, x = self._x(shape)
        n, w, p = self.n, self.weights, self.cov.rows()
        predicted = lin + sum(w[i] * x[i] for i in range(n))
        if self.correct_linear_online and predicted > 0:
            self._learn_scale(measured_ms / (self.scale * predicted))
        measured_ms /= self.scale
        err = measured_ms - predicted
        limit = self.residual_clip * measured_ms
        if err > limit:
            err = limit
            self.clipped += 1
        elif err < -limit:
            err = -limit
            self.clipped += 1
        px = [sum(p[i][j] * x[j] for j in range(n)) for i in range(n)]
        denom = self.forgetting + sum(x[i] * px[i] for i in range(n))
        if not (denom > 0 and math.isfinite(denom)):
            self._reset()
            return
        k = [v / denom for v in px]
        inv_lambda = 1.0 / self.forgetting
        for i in range(n):
            w[i] += k[i] * err
            ki = k[i]
            row = p[i]
            for j in range(i, n):
                v = (row[j] - ki * px[j]) * inv_lambda
                row[j] = v
                p[j][i] = v
        self.cov = type(self.cov)(p)
        self._anchor()
        p = self.cov.rows()
        self.updates += 1
        if any(not (math.isfinite(p[i][i]) and 0.0 < p[i][i] < alp_mod.COV_LIMIT)
               for i in range(n)) or not all(math.isfinite(v) for v in w):
            self._reset()


def _shape(rng):
    kind = rng.choice(["prefill", "decode", "mixed"])
    prefill = () if kind == "decode" else tuple(
        (rng.randrange(0, 8000), rng.randrange(1, 2048)) for _ in range(rng.randrange(1, 3)))
    decodes = 0 if kind == "prefill" else rng.randrange(1, 300)
    return BatchShape(prefill, decodes, decodes * rng.randrange(1, 4000))


@pytest.mark.parametrize("factor, online, forgetting", [
    (1.0, True, 0.9975), (0.1, True, 0.9975), (10.0, True, 0.9975), (1.0, False, 0.9975),
    (1.0, True, 1.0), (0.1, False, 0.99)])
def test_update_is_bit_identical_to_the_loops(factor, online, forgetting):
    profile = LinearProfile(
        alpha0=0.004, alpha1=6.0, boundaries=tuple(128 * i for i in range(1, 17)),
        staircase=tuple((128 * i, 6.0 + 0.5 * i) for i in range(1, 17)), fit_mape=1.0,
        staircase_mape=1.0, variant="staircase", model="test", tp=1, source="test",
    ).scaled(factor)
    rng = random.Random(int(factor * 10) + online)
    fast = ALPredictor(profile, correct_linear_online=online, forgetting=forgetting)
    slow = Textbook(profile, correct_linear_online=online, forgetting=forgetting)
    for step in range(2000):
        shape = _shape(rng)
        x = features(shape)
        truth = 5.0 + 40 * x[0] + 30 * x[1] + 8 * x[2] + 0.004 * shape.batched_tokens
        measured = truth * rng.uniform(0.8, 1.25) * rng.choice([1.0] * 30 + [4.0, 0.2])
        fast.update(shape, measured)
        slow.update(shape, measured)
        assert fast.weights == slow.weights, step
        assert fast.cov.rows() == slow.cov.rows(), step
        assert (fast.scale, fast.clipped, fast.resets) == (slow.scale, slow.clipped, slow.resets)
    assert fast.updates == 2000 and any(w != 0.0 for w in fast.weights)
