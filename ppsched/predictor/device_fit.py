"""ALP's second opinion: the running device's stage times fitted from its own measurements alone.

ALP (``alp.py``) prices a batch with the offline profile's shape -- its staircase, its ratio of
attention to linear-layer time -- and learns a device scale, an offset and attention corrections
whose priors keep that shape where the data are narrow (so a model trained on 128-token chunks
still extrapolates to 2048). On a device whose cost shape is not the profile's (a CPU server:
attention over a 400-token prefix costs as much as the 128 new tokens' linear layers; on an A100
it is a few percent) those priors hold the profile's shape against the data, and ALP stays 40-50%
off the measured stages (tests/test_live_learning.py).

``DeviceFit`` is the other estimate: recursive least squares with a shorter forgetting over seven
features of the batch, predicting the device's milliseconds from a fit in relative error
(``update``), with a weak prior -- what the measurements say and nothing else. ALP answers
with it only where it is the better predictor of the stages just seen (``ALPredictor``:
prequential error, each prediction scored before it is learned from) and only for batches
inside the box of features it was trained on: outside the data it cannot extrapolate safely, and
the profile-anchored prediction answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import mul

from ppsched.core.batch import BatchShape, ShapeSums, shape_sums
from ppsched.predictor import kernels

TOKEN_SCALE = 1000.0  # batched tokens (prefill + one per decode) / 1000
PREFIX_SCALE = 2.0**21  # as ALP's attention features
EXTEND_SCALE = 2.0**20
DECODE_CTX_SCALE = 1e5
DECODE_COUNT_SCALE = 100.0
N_FEATURES = 7
# Weak prior: weights 0 +- 1000 ms per feature unit (the data decide within a few samples;
# the live CPU server needs ~1300 ms per 2^21 prefix x extend).
PRIOR_VAR = 1e6
# The fit's rows are relative errors in units of this share of the stage (``update``): with
# the prior above it weighs as the old 1 ms residual did on the ~10 ms stages it was set for.
RELATIVE_NOISE = 0.1
COV_LIMIT = 1e8  # an unexcited direction's variance grows by 1/lambda per step: restart at this


def fit_features(shape: BatchShape) -> list[float]:
    """(1, tokens, prefill pieces, decode context, prefix x extend, extend^2, decodes), scaled."""
    return fit_features_of(shape_sums(shape))


def fit_features_of(sums: ShapeSums) -> list[float]:
    """``fit_features`` from the shape's sums (``shape_sums``)."""
    tokens, cross, square, pieces, decode_ctx, decodes = sums
    return [1.0, tokens / TOKEN_SCALE, float(pieces), decode_ctx / DECODE_CTX_SCALE,
            cross / PREFIX_SCALE, square / EXTEND_SCALE, decodes / DECODE_COUNT_SCALE]


# Its own window: 1/(1 - 0.99) = 100 stages, ~14 per weight. A device drifts (co-tenants, clocks,
# caches) faster than ALP's 400-stage window follows, and the fit has no prior to protect:
# on six live CPU logs (bench/predictor.md) ALP's MAPE with the fit at 0.9975 / 0.99 / 0.98 read
# a mean 15.1 / 14.5 / 14.2%; 0.98 would leave ~7 samples per weight.
FIT_FORGETTING = 0.99
# its step, ``kernels.relative_rls_step_7`` (N_FEATURES weights, COV_LIMIT: ``kernels_source``),
# updates the covariance as one float field per entry
_MATRIX = kernels.Matrix7


class DeviceFit:
    def __init__(self, forgetting: float = FIT_FORGETTING) -> None:
        self.forgetting = forgetting
        self.weights = [0.0] * N_FEATURES
        self.cov = self._prior()
        self.low = [float("inf")] * N_FEATURES  # the box of features learned from
        self.high = [float("-inf")] * N_FEATURES
        self.updates = 0
        self.resets = 0

    @staticmethod
    def _prior() -> kernels.Matrix7:
        return _MATRIX([[PRIOR_VAR if i == j else 0.0 for j in range(N_FEATURES)]
                        for i in range(N_FEATURES)])

    def covers(self, x: Sequence[float]) -> bool:
        """Inside the box of features seen (interpolation, not extrapolation)."""
        low, high = self.low, self.high
        if len(x) != N_FEATURES:
            raise ValueError(f"{len(x)} features: expected {N_FEATURES}")
        # written out: this runs on every stage measurement
        return (low[0] <= x[0] <= high[0] and low[1] <= x[1] <= high[1]
                and low[2] <= x[2] <= high[2] and low[3] <= x[3] <= high[3]
                and low[4] <= x[4] <= high[4] and low[5] <= x[5] <= high[5]
                and low[6] <= x[6] <= high[6])

    def predict_in_box(self, tokens: int, pieces: int, decode_ctx: int, cross: int,
                       square: int, decodes: int) -> float | None:
        """``predict_x(fit_features(...))`` from the raw sums, None outside the box (the hot
        path: a candidate scan calls this once per candidate)."""
        x1 = tokens / TOKEN_SCALE
        x3 = decode_ctx / DECODE_CTX_SCALE
        x4 = cross / PREFIX_SCALE
        x5 = square / EXTEND_SCALE
        x6 = decodes / DECODE_COUNT_SCALE
        low, high = self.low, self.high
        if not (low[1] <= x1 <= high[1] and low[2] <= pieces <= high[2]
                and low[3] <= x3 <= high[3] and low[4] <= x4 <= high[4]
                and low[5] <= x5 <= high[5] and low[6] <= x6 <= high[6]):
            return None
        w = self.weights
        return (w[0] + w[1] * x1 + w[2] * pieces + w[3] * x3 + w[4] * x4 + w[5] * x5
                + w[6] * x6)

    def predict_x(self, x: Sequence[float]) -> float:
        return sum(map(mul, self.weights, x))

    def learn(self, sums: ShapeSums, measured_ms: float) -> float | None:
        """The fit's prediction for a measured batch (``sums``: ``shape_sums``) if it lies in
        the box, None outside it -- both before learning the batch -- then ``update``. One call
        per stage measurement: ``fit_features_of``, ``covers`` and ``predict_x`` written out."""
        tokens, cross, square, pieces, decode_ctx, decodes = sums
        x1 = tokens / TOKEN_SCALE
        x2 = float(pieces)
        x3 = decode_ctx / DECODE_CTX_SCALE
        x4 = cross / PREFIX_SCALE
        x5 = square / EXTEND_SCALE
        x6 = decodes / DECODE_COUNT_SCALE
        x = [1.0, x1, x2, x3, x4, x5, x6]
        low, high = self.low, self.high
        inside = (low[0] <= 1.0 <= high[0] and low[1] <= x1 <= high[1]
                  and low[2] <= x2 <= high[2] and low[3] <= x3 <= high[3]
                  and low[4] <= x4 <= high[4] and low[5] <= x5 <= high[5]
                  and low[6] <= x6 <= high[6])
        fitted = sum(map(mul, self.weights, x)) if inside else None
        self.update(x, measured_ms, inside)
        return fitted

    def update(self, x: list[float], measured_ms: float, inside: bool | None = None) -> None:
        """One RLS step (``x``: ``fit_features`` of the batch; ``measured_ms`` > 0, finite;
        ``inside``: ``covers(x)`` if the caller has just asked it, else None).

        Least squares in relative error: the row is divided by the measured time, so a 4 ms
        decode's 10% miss weighs what a 12 ms prefill's does. A stage's jitter grows with its
        length (live CPU logs: 0.4-0.6 ms under 5 ms, 1.1-2.3 ms above) and ALP is scored and
        used relatively (``alp_ape``, the candidates' ratios); fitted in milliseconds the long
        stages' jitter set the shared weights and the most frequent, shortest stages carried
        the misfit (1-decode stages over-predicted by 14-21%; seven replayed logs' MAPE
        8.2-12.3% against 9.0-17.1%, bench/predictor.md). Dividing by the measurement, not
        the expectation, can bias the fit low; with +-20% jitter the 1-decode median read 0.994
        (tests/test_predictor_device_fit.py). In units of ``RELATIVE_NOISE`` the prior keeps
        its old weight: in units of the whole stage it outweighed the data (a noiseless
        CPU-like device was still 3.7% off after 200 stages)."""
        # xs = x / (RELATIVE_NOISE measured), err = 1 / RELATIVE_NOISE - w . xs,
        # k = P xs / (lambda + xs'P xs), w += k err, P = (P - k (P xs)^T) / lambda
        healthy = kernels.relative_rls_step_7(
            self.cov, self.weights, x, 1.0 / (RELATIVE_NOISE * measured_ms),
            1.0 / RELATIVE_NOISE, self.forgetting)
        # widen the box (most batches already lie inside it)
        if not (self.covers(x) if inside is None else inside):
            low, high = self.low, self.high
            for i, v in enumerate(x):
                if v < low[i]:
                    low[i] = v
                if v > high[i]:
                    high[i] = v
        self.updates += 1
        if not healthy:  # a diagonal of the new P outside (0, COV_LIMIT)
            self.cov = self._prior()  # keep the weights, forget their certainty
            self.resets += 1

    def state(self) -> dict:
        return {"weights": self.weights, "cov": self.cov.rows(), "low": self.low, "high": self.high,
                "updates": self.updates, "resets": self.resets}

    def load(self, data: dict) -> None:
        """Restore ``state()`` (values checked by the caller's JSON error handling)."""
        weights = [float(v) for v in data["weights"]]
        cov = [[float(v) for v in row] for row in data["cov"]]
        low = [float(v) for v in data["low"]]
        high = [float(v) for v in data["high"]]
        if len(weights) != N_FEATURES or len(cov) != N_FEATURES or \
                any(len(r) != N_FEATURES for r in cov) or len(low) != N_FEATURES or \
                len(high) != N_FEATURES:
            raise ValueError(f"device fit state: expected {N_FEATURES} features")
        self.weights, self.cov, self.low, self.high = weights, _MATRIX(cov), low, high
        self.updates = int(data["updates"])
        self.resets = int(data["resets"])
