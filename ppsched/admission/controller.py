"""Reject at arrival a request whose SLO cannot be met: predicted queue drain, observed misses.

Predicted TTFT = (prompt tokens ahead + own prompt) / drain rate + one pass of the last chunk
through the pipeline (pp_size x the longest recent stage time). The drain rate is measured while
the queue was backlogged (``DrainRateEstimator``), so it already reflects what bounds the engine
under overload (KV room, request caps), not just prefill compute. Before enough backlog was
seen, and whenever the queue is empty (nothing ahead: the request's own prefill starts at once),
one chunk per recent median stage time stands in. With nothing measured at all the request is
admitted.

TPOT guards (on by default): an SGLang-style engine gives prefill priority, so every admitted
prompt also pauses the decodes of the slot it lands in. Admitting more while decodes are already
late only makes more requests miss, so two guards reject until TPOT recovers: the decode cadence
(``core.rounds.DecodeCadence``: the current inter-token gap from recent microbatches, no lag)
above headroom x the TPOT SLO, and the recent P90 TPOT of finished requests (``guard.py``: lags
by a request lifetime, catches what the average cadence hides) above the SLO. On 10x overload
of azure-conv the cadence guard raised the admitted requests' attainment from about 0.65 to 0.85
(bench/reliability.md).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ppsched.admission.drain import DrainRateEstimator
from ppsched.admission.guard import SampleGuard
from ppsched.admission.snapshot import AdmissionDecision, AdmissionSnapshot
from ppsched.core.errors import UserError
from ppsched.core.rounds import DecodeCadence
from ppsched.core.snapshots import StageMeasurement

ADMISSION_MODES = ("on", "off")


def _number(value: object, low: float, high: float, *, low_open: bool = True) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return (low < value if low_open else low <= value) and value <= high


@dataclass(frozen=True, slots=True)
class AdmissionConfig:
    """``headroom``: admit only if predicted TTFT <= headroom x SLO (below 1: room for the spread
    of waits around the average drain). ``half_life_s``: how fast old drain samples fade;
    ``min_window_s``: backlog time needed before the measured rate is trusted.
    ``cadence_guard``: reject while the decode cadence's TPOT is above headroom x the SLO.
    ``guard_percentile``: the finished-request TPOT guard's statistic (None: guard off);
    ``guard_min_samples``: samples needed before it may fire; ``guard_stale_s``: samples
    unchanged this long are ignored."""

    headroom: float = 0.8
    half_life_s: float = 20.0
    min_window_s: float = 1.0
    cadence_guard: bool = True
    guard_percentile: float | None = 90.0
    guard_min_samples: int = 8
    guard_stale_s: float = 5.0

    def __post_init__(self) -> None:
        if not _number(self.headroom, 0, 4):
            raise UserError(f"admission headroom {self.headroom!r}: expected a number in (0, 4]")
        if not _number(self.half_life_s, 0, math.inf):
            raise UserError(f"admission half_life_s {self.half_life_s!r}: expected a finite "
                            "number > 0")
        if not _number(self.min_window_s, 0, self.half_life_s, low_open=False) \
                or self.min_window_s == self.half_life_s:
            raise UserError(f"admission min_window_s {self.min_window_s!r}: expected a number "
                            f">= 0 and < half_life_s ({self.half_life_s})")
        if self.guard_percentile is not None and not _number(self.guard_percentile, 0, 100):
            raise UserError(f"admission guard_percentile {self.guard_percentile!r}: expected a "
                            "number in (0, 100] or None")
        if isinstance(self.guard_min_samples, bool) or not isinstance(self.guard_min_samples, int) \
                or self.guard_min_samples < 1:
            raise UserError(f"admission guard_min_samples {self.guard_min_samples!r}: expected "
                            "an integer >= 1")
        if not _number(self.guard_stale_s, 0, math.inf):
            raise UserError(f"admission guard_stale_s {self.guard_stale_s!r}: expected a finite "
                            "number > 0")


class AdmissionController:
    """Stateful: call ``admit`` for every request the engine would otherwise queue, in arrival
    order (its drain measurement counts the tokens it admitted)."""

    name = "ttft-drain"

    def __init__(self, config: AdmissionConfig | None = None) -> None:
        self.config = cfg = config or AdmissionConfig()
        self.drain = DrainRateEstimator(cfg.half_life_s, cfg.min_window_s)
        self._tpot_guard = None
        if cfg.guard_percentile is not None:
            self._tpot_guard = SampleGuard(cfg.guard_percentile, cfg.guard_min_samples,
                                           cfg.guard_stale_s)
        self.cadence = DecodeCadence()
        self.admitted = 0
        self.rejected = 0

    def observe(self, measurement: StageMeasurement) -> None:
        """A measured stage iteration (the engine feeds every one, like a chunk controller's)."""
        self.cadence.observe(measurement)

    def predict_ttft_ms(self, snap: AdmissionSnapshot) -> tuple[float, float | None]:
        """(predicted TTFT in ms, drain rate in tokens/s used); NaN/None with no estimate."""
        stages = snap.recent_stage_ms
        rate = self.drain.rate_tokens_per_s if snap.queued_prompt_tokens else None
        if rate is None and stages:
            rate = 1000.0 * snap.chunk_tokens / statistics.median(stages)
        if rate is None:
            return math.nan, None
        if rate <= 0:
            return math.inf, rate
        tail_ms = snap.pp_size * max(stages) if stages else 0.0
        ahead = snap.queued_prompt_tokens + snap.prompt_tokens
        return 1000.0 * ahead / rate + tail_ms, rate

    def _guard_reason(self, snap: AdmissionSnapshot) -> str | None:
        if self.config.cadence_guard:
            now_tpot = self.cadence.tpot_ms(snap.now_s)
            limit = self.config.headroom * snap.slo.tpot_ms
            if now_tpot is not None and now_tpot > limit:
                return (f"admission: decode cadence TPOT {now_tpot:.0f} ms > {limit:.0f} ms "
                        "(prefill already displacing decodes)")
        if self._tpot_guard is None:
            return None
        level = self._tpot_guard.level(snap.now_s, snap.recent_tpot_ms)
        if level is None or level <= snap.slo.tpot_ms:
            return None
        return (f"admission: recent P{self.config.guard_percentile:g} TPOT {level:.0f} ms > SLO "
                f"{snap.slo.tpot_ms:g} ms (decodes already late)")

    def admit(self, snap: AdmissionSnapshot) -> AdmissionDecision:
        self.drain.update(snap.now_s, snap.queued_prompt_tokens)
        predicted, rate = self.predict_ttft_ms(snap)
        limit = self.config.headroom * snap.slo.ttft_ms
        guard = self._guard_reason(snap)
        if not math.isnan(predicted) and predicted > limit:
            decision = AdmissionDecision(
                False, f"admission: predicted TTFT {predicted:.0f} ms > {limit:.0f} ms "
                       f"({snap.queued_prompt_tokens} tokens queued ahead, drain "
                       f"{rate:.0f} tokens/s)", predicted)
        elif guard is not None:
            decision = AdmissionDecision(False, guard, predicted)
        elif math.isnan(predicted):
            decision = AdmissionDecision(True, "admission: no drain estimate yet", predicted)
        else:
            decision = AdmissionDecision(True, "admission: ok", predicted)
        if decision.admit:
            self.drain.admitted(snap.prompt_tokens)
            self.admitted += 1
        else:
            self.rejected += 1
        return decision


def build_admission(mode: str, config: AdmissionConfig | None = None
                    ) -> AdmissionController | None:
    """``--admission on|off``: a controller, or None (admit everything, the default)."""
    if mode == "off":
        return None
    if mode != "on":
        raise UserError(f"--admission {mode!r}: expected one of {', '.join(ADMISSION_MODES)}")
    return AdmissionController(config)
