"""ALP: adaptive latency prediction of one pipeline stage's iteration.

predicted = linear(batched tokens) from the offline profile
          + w . [sum(prefix*extend)/2^21, sum(extend^2)/2^20, decode_ctx_sum/1e5, 0.1]
The attention weights ``w`` learn the residual (measured - linear) online by recursive least
squares with forgetting. With ``correct_linear_online`` ALP also adapts to the device it runs
on: a device scale (the geometric mean of measured/predicted, learned first, so an offline
profile off by x10 stops mattering within a few iterations) multiplies the whole prediction,
the RLS works in the profile's units (measured / scale), and a fifth feature, linear/100 ms,
corrects the profile's linear term relative to the attention terms. The prefill weights keep a
prior at 0 and the linear term a prior at the offline profile's own absolute value, priors that
forgetting never erases (stabilised forgetting, ``_anchor``): where the data cannot tell a
scale from an offset (every batch in one staircase band), the profile decides, so a model
trained on 128-token chunks still extrapolates to 2048-token prefills. The bias (a
per-iteration overhead) has a prior at 0 +- one first-band level of the profile, so neither a
negative nor a large positive offset can hold a profile for other hardware.

Where the device's cost *shape* is not the profile's (the priors above keep the profile's shape
where the data are narrow), a second estimate learned from the measurements alone, the device
fit (``device_fit.py``), answers instead: only for batches inside the box of features it was
trained on, and only while its prequential error there is below the formula's.

Pure-Python arithmetic on 4-5 floats: at this size it beats numpy's per-call overhead
(bench/bench_predictor.py measures both).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from operator import mul
from typing import Final

from ppsched.core.batch import BatchShape, ShapeSums, shape_sums
from ppsched.core.errors import UserError
from ppsched.predictor import kernels
from ppsched.predictor.device_fit import N_FEATURES, DeviceFit
from ppsched.predictor.profile import LinearProfile

# Final: compiled, each a constant where a module global is a dict lookup per use
PREFIX_SCALE: Final = 2.0**21
EXTEND_SCALE: Final = 2.0**20
DECODE_SCALE: Final = 1e5
BIAS: Final = 0.1
LINEAR_SCALE: Final = 100.0  # ms: the online linear-correction feature is linear_ms / 100
COV_LIMIT = 1e8  # a covariance diagonal above this (or non-finite) means blow-up: reset
# Weights kept near their prior unless the data say otherwise (stabilised forgetting, see
# _anchor), as (index, prior precision; None = 1/init_cov, the paper's P0). The prefill terms
# (prior 0) grow quadratically with a chunk size the scheduler may not have tried yet. The
# linear correction (in percent of the profile's term) is collinear with the bias and the device
# scale while batches stay inside one staircase band; its prior: the offline profile's absolute
# level is right to within LINEAR_PRIOR_SD percent (one standard deviation), which only
# decides what the data cannot. Not the bias (every sample excites
# it) nor the decode-context term (linear, excited by every decode batch; anchoring it cost 0.3
# points of MAPE on summarization, bench/predictor.md).
LINEAR_PRIOR_SD = 10.0
# ...with Student-t tails of LEVEL_PRIOR_DOF degrees of freedom, not Gaussian ones: "right to
# +-10%, unless the data say it is far off". A profile for 10x slower hardware puts the prior
# ~50 SDs from what a few samples of a second band show; a Gaussian prior then still won and held
# 256-token prefills at +19..+26% with 1 chunk in 20 of 256 tokens (predictive's plain loop). Where
# the data leave the level open (one band) the estimate sits at the prior (z ~ 0) and the t and
# the Gaussian prior agree. Measured insensitive (bench/predictor.md): any DOF from 1.5 to 1000
# passes tests/test_predictor_extrapolation.py and learns the sparse second band; 1 (Cauchy) lets
# a x0.1 profile trained on one band drift to -13% at 2048 tokens (allowed -11%). 4: the usual
# robust choice between the two.
LEVEL_PRIOR_DOF = 4.0
# (weight, precision: None for 1/init_cov)
ANCHORS: tuple[tuple[int, float | None], ...] = (
    (0, None), (1, None), (4, 1.0 / LINEAR_PRIOR_SD**2))
# The bias is a per-iteration overhead: anchored at 0 (precision 1/init_cov) only while it is
# negative. With every batch in one staircase band a too-high level and a negative offset fit
# alike; a profile for slower hardware would otherwise be kept, offset by a negative bias (a
# x10 profile trained on 128-token chunks predicted 2048-token prefills +676%; now +37%).
NONNEGATIVE: tuple[tuple[int, float | None], ...] = ((3, None),)
# ...and it has a two-sided prior too: 0 +- OFFSET_PRIOR_BANDS first-band levels of the profile,
# in the profile's units. Without it a positive offset was free, and
# one-band data kept a profile for *faster* hardware behind one once the device scale's early
# transient was over (x0.1 profile, 128-token chunks: 2048-token prefills -71% after 6000
# iterations; now +6%). One first-band level is loose enough that the simulator's real offset
# (+46% of that level at 128 tokens) stays an offset (bench/predictor.md).
OFFSET_PRIOR_BANDS = 1.0
# The device fit (device_fit.py) answers once it has been scored on this many batches inside its
# box -- twice its number of weights -- and only while its prequential error there is below ALP's.
FIT_MIN_SCORED = 2 * N_FEATURES
# the reference anchor kernels per weight count (``_anchor``; ``update`` runs the fused step)
_ANCHOR_STEP: dict[int, Callable[..., None]] = {4: kernels.anchor_step_4,
                                                5: kernels.anchor_step_5}


def _anchor_layout(online: bool) -> tuple[tuple[int, float | None, bool], ...]:
    """The priors ``_anchor`` applies, in its order: (weight, precision (None: 1/init_cov;
    the bias's two-sided prior: NaN, set from the profile), one-sided)."""
    n = 5 if online else 4
    layout = tuple((a, prec, False) for a, prec in ANCHORS if a < n)
    if online:
        layout += tuple((a, prec, True) for a, prec in NONNEGATIVE if a < n)
        layout += ((3, math.nan, False),)
    return layout


def fused_layout(online: bool) -> tuple[tuple[int, bool, bool], ...]:
    """The priors of the fused step (``alp_kernel.AnchorLayout``): (weight, one-sided, the
    level prior), in ``_anchor``'s order."""
    return tuple((a, one_sided, a == 4) for a, _, one_sided in _anchor_layout(online))


# the covariance class per weight count (the fused steps, ``kernels.alp_step_4``/``5``, are
# generated ahead of time by ``kernels_source`` and called by name: compiled, a direct call)
Covariance = kernels.Matrix4 | kernels.Matrix5
_MATRIX: dict[int, Callable[[Sequence[Sequence[float]]], Covariance]] = {
    4: kernels.Matrix4, 5: kernels.Matrix5}


def features(shape: BatchShape) -> tuple[float, float, float, float]:
    """The paper's four attention features of a batch, scaled."""
    _, cross, square, _, _, _ = shape_sums(shape)
    return (cross / PREFIX_SCALE, square / EXTEND_SCALE, shape.decode_ctx_sum / DECODE_SCALE,
            BIAS)


class ALPredictor:
    def __init__(self, profile: LinearProfile, *, forgetting: float = 0.9975,
                 init_cov: float = 1.25, residual_clip: float = 0.4,
                 correct_linear_online: bool = True, device_fit: bool | None = None) -> None:
        """``device_fit`` None: with ``correct_linear_online`` (the paper's ALP has neither)."""
        if not (0.0 < forgetting <= 1.0):
            raise UserError(f"forgetting={forgetting!r}: expected 0 < forgetting <= 1")
        if not (init_cov > 0 and math.isfinite(init_cov)):
            raise UserError(f"init_cov={init_cov!r}: expected a finite number > 0")
        if not (residual_clip > 0 and math.isfinite(residual_clip)):
            raise UserError(f"residual_clip={residual_clip!r}: expected a finite number > 0")
        self.profile = profile
        self.forgetting = float(forgetting)
        self.init_cov = float(init_cov)
        self.residual_clip = float(residual_clip)
        self.correct_linear_online = bool(correct_linear_online)
        self.n = 5 if correct_linear_online else 4
        self._sums_shape: BatchShape | None = None
        self._sums_value: ShapeSums = (0, 0, 0, 0, 0, 0)
        self._sums_lin = 0.0  # the profile's linear term of that shape
        self._term = profile.linear_term()  # compiled (``linear_term``): a direct call
        self.weights = [0.0] * self.n
        # P, one float field per entry (``kernels.Matrix4``/``5``; ``cov.rows()`` reads it)
        self.cov: Covariance = _MATRIX[self.n](self._identity())
        offset = self._offset_prior_precision(profile) if correct_linear_online else math.nan
        self._anchors = tuple((a, 1.0 / self.init_cov if prec is None else
                               offset if math.isnan(prec) else prec, one_sided)
                              for a, prec, one_sided in _anchor_layout(correct_linear_online))
        self._precisions = tuple(prec for _, prec, _ in self._anchors)
        self.updates = 0
        self.resets = 0
        self.clipped = 0
        self.scale = 1.0  # device scale: measured / profile-unit prediction (online only)
        self.scale_updates = 0
        # the second opinion (device_fit.py) and both models' running APE on the batches
        # inside its box, each scored before it learns the batch
        if device_fit is None:
            device_fit = self.correct_linear_online
        self.fit = DeviceFit() if device_fit else None
        self.alp_ape = 0.0
        self.fit_ape = 0.0
        self.scored = 0
        self.use_fit = False

    @staticmethod
    def _offset_prior_precision(profile: LinearProfile) -> float:
        """Precision of the bias weight's prior 0 +- OFFSET_PRIOR_BANDS x the profile's
        first-band level (the staircase's first level, whichever variant predicts; without
        bands the line at 1 token). The bias feature is BIAS: the weight's SD is level / BIAS."""
        first = profile.staircase[0][1] if profile.staircase else profile.linear_ms(1)
        if not (first > 0 and math.isfinite(first)):
            raise UserError(f"profile's first-band time {first!r} ms: expected a finite time > 0 "
                            "(it sets the scale of ALP's offset prior)")
        return (BIAS / (OFFSET_PRIOR_BANDS * first)) ** 2

    def _identity(self) -> list[list[float]]:
        """P0: init_cov, except a weight with its own prior starts at that prior's variance
        (the linear correction: LINEAR_PRIOR_SD^2; init_cov would say +-1.1%)."""
        diag = [self.init_cov] * self.n
        for a, precision in ANCHORS:
            if a < self.n and precision is not None:
                diag[a] = 1.0 / precision
        return [[diag[i] if i == j else 0.0 for j in range(self.n)] for i in range(self.n)]

    def _x(self, shape: BatchShape) -> tuple[float, list[float]]:
        """(linear ms, feature vector) of a shape."""
        sums = shape_sums(shape)
        lin = self._term.ms(sums[0])
        return lin, self._x_of(sums, lin)

    def _x_of(self, sums: ShapeSums, lin: float) -> list[float]:
        """The feature vector from the shape's sums and its linear term ``lin``."""
        _, cross, square, _, decode_ctx, _ = sums
        x = [cross / PREFIX_SCALE, square / EXTEND_SCALE, decode_ctx / DECODE_SCALE, BIAS]
        if self.correct_linear_online:
            x.append(lin / LINEAR_SCALE)
        return x

    def predict(self, shape: BatchShape) -> float:
        """Predicted ms of one stage for this batch: the device fit's inside its box while it
        is the better predictor, else the profile-anchored formula's."""
        sums = shape_sums(shape)
        if self.use_fit:
            fitted = self._fitted(sums)
            if fitted is not None:
                return fitted
        return self._formula((sums,))[0]

    def _fitted(self, sums: ShapeSums) -> float | None:
        """The device fit's prediction, None outside its box (or not positive)."""
        tokens, cross, square, pieces, decode_ctx, decodes = sums
        fitted = self.fit.predict_in_box(  # type: ignore[union-attr]
            tokens, pieces, decode_ctx, cross, square, decodes)
        return fitted if fitted is not None and fitted > 0.0 else None

    def predict_formula(self, shape: BatchShape) -> float:
        """The profile-anchored prediction (the formula in the module docstring)."""
        _, cross, square, _, decode_ctx, _ = self._sums(shape)
        lin = self._sums_lin
        w = self.weights
        w4 = w[4] if self.n == 5 else 0.0
        # ``_formula``'s expression for one batch, term for term
        return (lin + w[0] * cross / PREFIX_SCALE + w[1] * square / EXTEND_SCALE
                + w[2] * decode_ctx / DECODE_SCALE + w[3] * BIAS
                + w4 * lin / LINEAR_SCALE) * self.scale

    def _sums(self, shape: BatchShape) -> ShapeSums:
        """``shape_sums``, remembered for the last shape with its linear term (``_sums_lin``):
        a controller predicts a measured batch and then learns from the same batch."""
        if shape is not self._sums_shape:
            sums = self._sums_value = shape_sums(shape)
            self._sums_lin = self._term.ms(sums[0])
            self._sums_shape = shape
        return self._sums_value

    def _formula(self, scan: Sequence[ShapeSums]) -> list[float]:
        """The formula for each batch of the scan; one loop with the weights bound once (a
        16-candidate scan is on the decision's budget)."""
        term = self._term
        w0, w1, w2, w3 = self.weights[:4]
        w4 = self.weights[4] if self.n == 5 else 0.0
        scale = self.scale
        out = []
        for tokens, cross, square, _, decode_ctx, _ in scan:
            lin = term.ms(tokens)
            out.append((lin + w0 * cross / PREFIX_SCALE + w1 * square / EXTEND_SCALE
                        + w2 * decode_ctx / DECODE_SCALE + w3 * BIAS
                        + w4 * lin / LINEAR_SCALE) * scale)
        return out

    def predict_many(self, shapes: Sequence[BatchShape]) -> list[float]:
        """Predictions for a candidate scan (e.g. one per chunk size)."""
        return self.predict_scan(shapes)[0]

    def predict_scan(self, shapes: Sequence[BatchShape]) -> tuple[list[float], bool]:
        """``predict_sums`` of the shapes' sums."""
        return self.predict_sums([shape_sums(s) for s in shapes])

    def predict_sums(self, scan: Sequence[ShapeSums]) -> tuple[list[float], bool]:
        """(predictions, from the fit) for a scan of batches given by their sums (``shape_sums``;
        the candidate scan builds them without BatchShapes, ``piece_sums``): one model answers
        the whole scan -- the device fit only if every batch lies in its box, else the formula
        for all. A scan compares candidates; the fit for the seen sizes beside the formula for
        the unseen ones would compare two models' biases across the box's edge."""
        if not self.use_fit:
            return self._formula(scan), False
        fitted = []
        for i in range(len(scan) - 1, -1, -1):  # largest first: the likeliest to be outside
            value = self._fitted(scan[i])
            if value is None:
                return self._formula(scan), False
            fitted.append(value)
        fitted.reverse()
        return fitted, True

    def update(self, shape: BatchShape, measured_ms: float) -> None:
        """One RLS step on the residual measured - linear term, then the priors (``_anchor``),
        fused into one generated step (``alp_kernel``)."""
        if not (math.isfinite(measured_ms) and measured_ms > 0):
            return  # a failed or empty measurement teaches nothing
        sums = self._sums(shape)
        lin = self._sums_lin
        x = self._x_of(sums, lin)
        predicted = lin + sum(map(mul, self.weights, x))  # in the profile's units
        if self.fit is not None:
            self._second_opinion(sums, predicted * self.scale, measured_ms)
        if self.correct_linear_online and predicted > 0:
            self._learn_scale(measured_ms / (self.scale * predicted))
        measured_ms /= self.scale  # the RLS below works in the profile's units
        err = measured_ms - predicted
        limit = self.residual_clip * measured_ms  # outliers move w by at most 40% of the value
        if err > limit:
            err = limit
            self.clipped += 1
        elif err < -limit:
            err = -limit
            self.clipped += 1
        # k = P x / (lambda + x'P x), w += k err, P <- (P - k (Px)^T) / lambda, kept symmetric;
        # then every prior's pseudo-observation (``_anchor``) and the health checks
        cov = self.cov
        if isinstance(cov, kernels.Matrix5):
            status = kernels.alp_step_5(cov, self.weights, x, err, self.forgetting,
                                        self._precisions, self.scale)
        else:
            status = kernels.alp_step_4(cov, self.weights, x, err, self.forgetting,
                                        self._precisions, self.scale)
        if status < 0:
            self._reset()
            return
        self.updates += 1
        if status == 0:  # a diagonal out of (0, COV_LIMIT) (NaN fails too) or a weight not finite
            self._reset()

    def _second_opinion(self, sums: ShapeSums, alp_ms: float, measured_ms: float) -> None:
        """Score ALP and the device fit on this batch if it lies in the fit's box (running
        means, gain 1/k then the forgetting window), then teach the fit; choose the fit for
        batches in its box while it is the better of the two."""
        fitted = self.fit.learn(sums, measured_ms)  # type: ignore[union-attr]
        if fitted is not None:  # inside the box: scored with the fit before it learned
            gain = max(1.0 / (self.scored + 1), 1.0 - self.forgetting)
            self.alp_ape += gain * (abs(alp_ms - measured_ms) / measured_ms - self.alp_ape)
            self.fit_ape += gain * (abs(fitted - measured_ms) / measured_ms - self.fit_ape)
            self.scored += 1
        self.use_fit = self.scored >= FIT_MIN_SCORED and self.fit_ape < self.alp_ape

    def _learn_scale(self, ratio: float) -> None:
        """Device scale: a running geometric mean of measured/predicted (gain 1/k), then the
        same forgetting window as the RLS. In log space an error of x10 and one of x0.1 weigh
        alike and no residual clip slows it; one outlier moves it by gain * log(ratio) only.
        Whatever part of it the data cannot tell from an offset is handed back to the profile
        by the linear term's anchor (``_anchor``)."""
        gain = max(1.0 / (self.scale_updates + 1), 1.0 - self.forgetting)
        self.scale *= math.exp(gain * math.log(ratio))
        self.scale_updates += 1

    def _anchor(self) -> None:
        """Stabilised forgetting: give back the prior precision that forgetting just removed.

        Plain forgetting scales the information matrix by lambda every step, so P0's prior
        (weight 0 = the offline profile alone, precision 1/init_cov) fades away. A weight the
        recent data excite only over a narrow range is then fitted to whatever misfit sits there:
        with only 128-token chunks, sum(extend^2)/2^20 is 1/64, a 1 ms offset becomes a weight
        of 64 and a 1024-token chunk is predicted 64 ms too slow. Adding (1-lambda)*precision_a
        to the information of each anchored weight every step (an exact rank-1 update with the
        pseudo-observation "w_a = 0") keeps a prior for good: the estimate minimises the
        forgetting-weighted squared error plus sum_a precision_a * w_a^2, and
        P_aa <= 1/precision_a. Wide data (chunks of several sizes) outweigh it within a few
        dozen samples.

        The linear correction's prior is the offline profile's absolute value: w4 such that
        scale * (1 + w4/100) = 1. Its precision is stated against residuals in ms, as the
        data's are; the RLS works in units of ms/scale, hence the division by scale^2 (without
        it a x0.1 profile's prior weighs 100x more against the data than a correct one's).
        That prior has Student-t tails (LEVEL_PRIOR_DOF): data far from it overrule it.
        With the device scale on, the bias is anchored at 0 while negative (NONNEGATIVE) and,
        more loosely, at 0 +- one first-band level on both sides (OFFSET_PRIOR_BANDS).
        """
        forgotten = 1.0 - self.forgetting
        if forgotten <= 0.0:
            return  # lambda = 1: nothing is forgotten, P0 itself stays the prior
        w = self.weights
        p = self.cov
        step = _ANCHOR_STEP[self.n]
        for a, precision, one_sided in self._anchors:
            if one_sided and w[a] >= 0.0:
                continue
            pa = p.rows()[a]
            prior = 0.0
            if a == 4:
                prior = (1.0 / self.scale - 1.0) * LINEAR_SCALE
                precision /= self.scale * self.scale
                # Student-t prior (IRLS weight): one z SDs from the estimate weighs
                # (dof + 1) / (dof + z^2) of its precision
                z2 = (w[a] - prior) ** 2 * precision
                precision *= (LEVEL_PRIOR_DOF + 1.0) / (LEVEL_PRIOR_DOF + z2)
            denom = 1.0 / (forgotten * precision) + pa[a]
            step(p, w, pa, (prior - w[a]) / denom, denom)  # w += pa gain, P -= pa pa^T / denom

    def _reset(self) -> None:
        """Non-finite or blown-up covariance (e.g. a corrupted saved state): restart it, keep
        finite weights. Unexcited bias or decode directions could still wind up here."""
        self.cov = _MATRIX[self.n](self._identity())
        if not all(math.isfinite(v) for v in self.weights):
            self.weights = [0.0] * self.n
        self.resets += 1

    def to_json(self) -> str:
        return json.dumps({
            "profile": json.loads(self.profile.to_json()),
            "forgetting": self.forgetting, "init_cov": self.init_cov,
            "residual_clip": self.residual_clip,
            "correct_linear_online": self.correct_linear_online,
            "weights": self.weights, "cov": self.cov.rows(), "scale": self.scale,
            "scale_updates": self.scale_updates, "updates": self.updates,
            "resets": self.resets, "clipped": self.clipped,
            "device_fit": None if self.fit is None else {
                **self.fit.state(), "alp_ape": self.alp_ape, "fit_ape": self.fit_ape,
                "scored": self.scored},
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ALPredictor:
        try:
            data = json.loads(text)
            profile = LinearProfile.from_json(json.dumps(data["profile"]))
            alp = cls(profile, forgetting=float(data["forgetting"]),
                      init_cov=float(data["init_cov"]),
                      residual_clip=float(data["residual_clip"]),
                      correct_linear_online=bool(data["correct_linear_online"]),
                      device_fit=data.get("device_fit") is not None)
            weights = [float(v) for v in data["weights"]]
            cov = [[float(v) for v in row] for row in data["cov"]]
            scale = float(data.get("scale", 1.0))  # states saved before the device scale: 1
            scale_updates = int(data.get("scale_updates", 0))
            fit_state = data.get("device_fit")
            if fit_state is not None:
                alp.fit.load(fit_state)  # type: ignore[union-attr]
                alp.alp_ape = float(fit_state["alp_ape"])
                alp.fit_ape = float(fit_state["fit_ape"])
                alp.scored = int(fit_state["scored"])
                alp.use_fit = alp.scored >= FIT_MIN_SCORED and alp.fit_ape < alp.alp_ape
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UserError(f"ALP state JSON is malformed: {exc!r}") from exc
        if len(weights) != alp.n or len(cov) != alp.n or any(len(r) != alp.n for r in cov):
            raise UserError(f"ALP state JSON: expected {alp.n} weights and a {alp.n}x{alp.n} "
                            f"covariance, got {len(weights)} and {len(cov)} rows")
        if not (scale > 0 and math.isfinite(scale)):
            raise UserError(f"ALP state JSON: scale={scale!r}, expected a finite number > 0")
        alp.weights, alp.cov = weights, _MATRIX[alp.n](cov)
        alp.scale, alp.scale_updates = scale, scale_updates
        alp.updates = int(data.get("updates", 0))
        alp.resets = int(data.get("resets", 0))
        alp.clipped = int(data.get("clipped", 0))
        return alp

    def size_bytes(self) -> int:
        """Serialised size (UTF-8 JSON), profile included."""
        return len(self.to_json().encode())
