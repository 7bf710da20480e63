"""``predictive`` / ``predictive-paper``: chunk choice from ALP-predicted stage latency.

Every 2*pp_size iterations, for each candidate chunk c (the user's sizes; by default the paper's
128-step grid up to 2048):
- stage(c) = predicted one-stage latency of a microbatch holding c prefill tokens as one piece
  (prefix = what the chunked request already prefilled) plus one slot's decodes;
- TPOT bound: stage(c) * pp_size <= 1.05 * SLO_TPOT (a decode advances once per pipeline period,
  and the period is pp_size stage times when stages are balanced);
- demand (tokens/s) = backlog of requests that waited >= 0.25 * SLO_TTFT over their remaining
  TTFT budget, plus the prompt-token arrival rate over 10 s;
- supply(c) in tokens/s: the paper counts one chunk per pipeline period, c / (stage(c) * pp).
Smallest c with supply >= demand among those meeting TPOT; none: the largest meeting TPOT
(overloaded: drain); nothing meets TPOT: the minimum. Then the KV watermark and safety guards.

Variants (``PredictiveConfig``): the paper's reading, and ours where we think the paper's model is
off. Ours: (1) supply = c / stage(c): with a queue, every slot builds a prefill batch, so each
stage finishes one c-token microbatch per stage time, pp_size chunks per period, not one;
(2) demand = max over the FCFS prefix of (cumulative tokens / budget of its last request): FCFS
serves older requests first, so request i is done only when everything ahead of it is too;
(3) the TPOT bound uses the fullest slot's decodes, since the chunk held for 2*pp_size iterations
lands in every slot, not only the one that happened to ask;
(4) the batch the engine will really build: once ALP has seen a mixed batch (SGLang
--enable-mixed-chunk), decodes spend one budget token each, so a c-token budget carries c - d
prefill tokens, and supply counts those; until then (SGLang's default loop) a prefill microbatch
carries no decodes and its slot's decodes skip that turn, so the KV-watermark guard (shrink to
free KV) is skipped there: smaller chunks mean more lost decode turns, and the engine's admission
already waits for free KV;
(5) among chunks that keep up with the demand, the one with the least steady-state TPOT rather
than the smallest (``steady_tpot``). The smallest chunk is best only when a stage has no fixed
cost; a 128-token prefill stage costs about as much as a 30-request decode stage (~16 ms, mostly
fixed), so 128-token chunks need twice the turns of 256-token ones for little saving, and in the
plain loop every prefill turn is a decode turn lost.
(6) in mixed loops (``select="frontier"``, the default), every microbatch is its own decision:
the asking slot's decodes size it, the rule is ``frontier`` (least predicted stage time whose
prefill supply covers max(arrival rate, the "optimal available" deadline rate)), predictions are
shifted by the measured residual of their 128-token tile (``calibrate``), and there is no
KV-watermark shrink. Until a mixed batch is seen, (5) applies.
The engine loop is learned from ``observe``: the first mixed batch seen switches to (4)'s mixed
shapes; before that the controller assumes SGLang's default (plain) loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ppsched.core.batch import BatchShape
from ppsched.core.policy import ChunkDecision
from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot, StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.frontier import frontier_choice, oa_rate
from ppsched.dcp.signals import (
    PAPER_KV_WATERMARK,
    ArrivalWindow,
    check_candidates,
    kv_pressure,
    safe_floor,
    usable_candidates,
)

INF = float("inf")
NAN = float("nan")


class StagePredictor(Protocol):
    """What the controller needs from ALP (``ppsched.predictor.ALPredictor``)."""

    def predict_many(self, shapes: Sequence[BatchShape]) -> Sequence[float]: ...

    def update(self, shape: BatchShape, measured_ms: float) -> None: ...


@dataclass(frozen=True, slots=True)
class PredictiveConfig:
    kv_watermark: float = PAPER_KV_WATERMARK
    tpot_margin: float = 1.05  # artifact: stage * pp <= 1.05 SLO_TPOT
    wait_fraction: float = 0.25  # artifact: backlog counts requests that waited >= 0.25 SLO_TTFT
    window_s: float = 10.0  # artifact: arrival-rate window
    cadence: int = 2  # decide every cadence * pp_size iterations
    supply: str = "pipelined"  # "paper": c / (stage * pp); "pipelined": c / stage
    demand: str = "fcfs"  # "paper": sum_i rem_i / budget_i; "fcfs": max prefix cum / budget
    decodes: str = "fullest"  # "paper": the asking slot's decodes; "fullest": the fullest slot's
    batch: str = "engine"  # "paper": c prefill + d decodes; "engine": as the engine builds it (4)
    # "paper": smallest feasible; "steady": least steady-state TPOT (5); "frontier": (6) in mixed
    # loops, "steady" until a mixed batch is seen
    select: str = "frontier"

    def __post_init__(self) -> None:
        if not (self.tpot_margin > 0 and 0 <= self.wait_fraction < 1 and self.window_s > 0
                and self.cadence >= 1 and 0 <= self.kv_watermark < 1):
            raise ValueError("predictive: expected tpot_margin > 0, 0 <= wait_fraction < 1, "
                             "window_s > 0, cadence >= 1, 0 <= kv_watermark < 1")
        for name, value, allowed in (("supply", self.supply, ("paper", "pipelined")),
                                     ("demand", self.demand, ("paper", "fcfs")),
                                     ("decodes", self.decodes, ("paper", "fullest")),
                                     ("batch", self.batch, ("paper", "engine")),
                                     ("select", self.select, ("paper", "steady", "frontier"))):
            if value not in allowed:
                raise ValueError(f"predictive: {name}={value!r}, expected one of {allowed}")


PAPER_CONFIG = PredictiveConfig(supply="paper", demand="paper", decodes="paper", batch="paper",
                                select="paper")


def backlog_demand(snap: ChunkSnapshot, slo: Slo, wait_fraction: float, fcfs: bool) -> float:
    """Tokens/s the queue's long-waiting requests need to meet their TTFT; inf if already late.

    Long waiters are the oldest, so they are a prefix of the FCFS view (``snap.queue`` is
    oldest-first, possibly truncated; the chunked request is counted once, first).
    """
    now = snap.now_s
    ttft_s = slo.ttft_ms / 1000.0
    min_wait = wait_fraction * ttft_s
    reqs = list(snap.queue)
    ch = snap.chunked
    if ch is not None and not any(q.req_id == ch.req_id for q in reqs):
        reqs.insert(0, ch)
    demand = 0.0
    cum = 0
    for q in reqs:
        waited = now - q.arrival_s
        cum += q.remaining_prompt_tokens
        if waited < min_wait:
            continue  # not late yet (retracted requests can re-enter out of arrival order)
        budget = ttft_s - waited
        if budget <= 0:
            return INF
        rate = (cum if fcfs else q.remaining_prompt_tokens) / budget
        demand = max(demand, rate) if fcfs else demand + rate
    return demand


def steady_tpot(prefill: Sequence[int], stage: Sequence[float], decode_ms: float, demand: float,
                pp: int, *, lost_turn: bool, iters: int = 12) -> list[float]:
    """Mean TPOT (ms) per candidate when prefill turns must carry ``demand`` tokens/ms.

    Each of the pp slots takes one turn per round; a fraction f of turns prefill p tokens with
    stage time P, the rest decode with stage time D. Every stage serves the round's microbatches
    in order and a slot waits for its own result, so a round lasts pp * (longest stage in it):
    R(f) = pp (P - (P - D)(1 - f)^pp) with turns independent. Keeping up needs
    pp f p = demand R(f), solved by fixed-point iteration from f = demand D / p. A decode advances
    once per round, or only in the (1 - f) of its slot's turns that are not prefill when
    ``lost_turn`` (SGLang's default loop: a prefill batch carries no decodes). inf where the
    candidate cannot keep up (f >= 1).
    """
    out = []
    for p, big in zip(prefill, stage, strict=True):
        if p <= 0:
            out.append(INF)
            continue
        excess = big - decode_ms
        f = demand * decode_ms / p
        for _ in range(iters):
            if f >= 1.0:
                break
            nxt = demand * (big - excess * (1.0 - f) ** pp) / p
            done = abs(nxt - f) < 1e-6
            f = nxt
            if done:
                break
        if f >= 1.0:
            out.append(INF)
            continue
        rnd = pp * (big - excess * (1.0 - f) ** pp)
        out.append(rnd / (1.0 - f) if lost_turn else rnd)
    return out


class PredictiveChunk:
    def __init__(self, slo: Slo, pp_size: int, predictor: StagePredictor,
                 config: PredictiveConfig | None = None, name: str = "predictive",
                 candidates: tuple[int, ...] | None = None) -> None:
        if pp_size < 1:
            raise ValueError(f"pp_size={pp_size}: expected >= 1")
        self.name = name
        self.slo = slo
        self.pp_size = pp_size
        self.predictor = predictor
        self.cfg = config or PredictiveConfig()
        self.candidates = None if candidates is None else check_candidates(candidates)
        self._arrivals = ArrivalWindow(self.cfg.window_s)
        self._next_iteration = 0
        self._last: ChunkDecision | None = None
        self.mixed_seen = False  # has the engine ever run decodes inside a prefill batch?
        self._residual = TileResidual()  # used by the frontier rule only

    def observe(self, measurement: StageMeasurement) -> None:
        # ALP learns from every measured iteration, prefill or decode, any stage
        kind = measurement.shape.kind
        if kind != "empty" and measurement.measured_ms > 0:
            if self.cfg.select == "frontier":  # residual of the prediction made before learning
                predicted = self.predictor.predict_many((measurement.shape,))[0]
                self._residual.update(measurement.shape, predicted, measurement.measured_ms)
            self.predictor.update(measurement.shape, measurement.measured_ms)
        if kind == "mixed":
            self.mixed_seen = True

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        cfg = self.cfg
        arrival_rate = self._arrivals.update(snap.now_s, snap.arrived_prompt_tokens_total)
        candidates = usable_candidates(self.candidates, snap.max_chunk_tokens)
        floor = safe_floor(candidates, snap.max_slot_decode_reqs)
        if cfg.select == "frontier" and self.mixed_seen:
            return self._remember(self._frontier(snap, candidates, floor, arrival_rate))
        last = self._last
        if snap.iteration < self._next_iteration and last is not None:
            if last.chunk_tokens >= floor or last.chunk_tokens >= candidates[-1]:
                return last
            return self._remember(ChunkDecision(floor, "hold+safety-floor", last.inputs,
                                                last.predicted_stage_ms))
        self._next_iteration = snap.iteration + cfg.cadence * self.pp_size

        slots = snap.slots
        if cfg.decodes == "fullest":
            load = max(slots, key=lambda s: (s.decode_reqs, s.decode_ctx_sum), default=None)
        else:
            load = next((s for s in slots if s.slot == snap.slot), None)
        d_reqs, d_ctx = (load.decode_reqs, load.decode_ctx_sum) if load is not None else (0, 0)
        n = len(slots) or 1
        avg_reqs = sum(s.decode_reqs for s in slots) // n
        avg_ctx = sum(s.decode_ctx_sum for s in slots) // n
        ch = snap.chunked
        prefix = ch.prompt_tokens - ch.remaining_prompt_tokens if ch is not None else 0
        pp = self.pp_size
        plain = cfg.batch == "engine" and not self.mixed_seen
        if cfg.batch == "paper":
            prefill = list(candidates)
            shapes = [BatchShape(((prefix, c),), d_reqs, d_ctx) for c in candidates]
        elif self.mixed_seen:  # decodes share the budget; a candidate at or below d carries none
            prefill = [max(c - d_reqs, 0) for c in candidates]
            shapes = [BatchShape(((prefix, p),) if p else (), d_reqs, d_ctx) for p in prefill]
        else:  # SGLang's default: a prefill-only microbatch; the other slots decode meanwhile
            prefill = list(candidates)
            shapes = [BatchShape(((prefix, c),)) for c in candidates]
        shapes.append(BatchShape((), avg_reqs, avg_ctx))  # the typical decode microbatch
        stage = list(self.predictor.predict_many(shapes))
        dec_avg = stage.pop()
        if not avg_reqs:
            dec_avg = 0.0
        periods = [ms * pp for ms in stage]  # a round is paced by its longest microbatch
        tpot_cap = cfg.tpot_margin * self.slo.tpot_ms
        demand = backlog_demand(snap, self.slo, cfg.wait_fraction, cfg.demand == "fcfs")
        demand += arrival_rate
        per_period = pp if cfg.supply == "paper" else 1

        feasible = []  # indices meeting TPOT and supplying the demand
        meets_tpot = -1  # largest index whose period meets TPOT
        for i, p in enumerate(prefill):
            if periods[i] > tpot_cap:
                continue
            meets_tpot = i
            if p and 1000.0 * p / (stage[i] * per_period) >= demand:
                feasible.append(i)
        tpot_est = None
        steady_reason = ""
        if cfg.select != "paper" and dec_avg > 0 and demand < INF:
            tpot_est = steady_tpot(prefill, stage, dec_avg, demand / 1000.0, pp, lost_turn=plain)
            keep_up = [i for i, t in enumerate(tpot_est) if t < INF]
            feasible = [i for i in keep_up if tpot_est[i] <= tpot_cap]
            # keeps up but TPOT is tight everywhere: the least-TPOT chunk is still the best bet
            pool = feasible or keep_up
            chosen = min(pool, key=tpot_est.__getitem__) if pool else -1
            steady_reason = "feasible:min-tpot" if feasible else "tpot-tight:min-tpot"
        else:
            chosen = feasible[0] if feasible else -1
        # KV guard: a small chunk frees KV only when decodes ride in prefill batches; in the plain
        # loop it multiplies prefill turns, each a lost decode turn (admission already waits for KV)
        if kv_pressure(snap, cfg.kv_watermark) and not plain:
            idx, reason = candidates.index(floor), "kv-watermark"
        elif meets_tpot < 0:
            idx, reason = 0, "tpot-infeasible:min"
        elif chosen >= 0:
            idx, reason = chosen, (steady_reason if tpot_est else "feasible:smallest")
        else:
            idx, reason = meets_tpot, "overloaded:largest-meeting-tpot"
        chunk = candidates[idx]
        if chunk < floor:
            chunk, reason = floor, reason + "+safety-floor"
            idx = candidates.index(floor)
        supply = 1000.0 * prefill[idx] / (stage[idx] * per_period) if stage[idx] > 0 else INF
        return self._remember(ChunkDecision(chunk, reason, (
            ("demand_tok_s", demand), ("arrival_tok_s", arrival_rate),
            ("supply_tok_s", supply), ("period_ms", periods[idx]),
            ("mixed_seen", float(self.mixed_seen)),
            ("tpot_cap_ms", tpot_cap),
            ("max_tpot_chunk", float(candidates[meets_tpot]) if meets_tpot >= 0 else 0.0),
            ("slot_decodes", float(d_reqs)), ("prefix", float(prefix)),
            ("kv_free_frac", snap.kv_free_fraction),
            ("tpot_est_ms", tpot_est[idx] if tpot_est else NAN),
        ), float(stage[idx])))

    def _frontier(self, snap: ChunkSnapshot, candidates: tuple[int, ...], floor: int,
                  arrival_rate: float) -> ChunkDecision:
        """(6) per microbatch, mixed loop: ``frontier`` module. The asking slot's decodes are the
        ones this batch carries, so they size it; decided on every call, since each slot's
        microbatch is its own decision (no 2*pp hold)."""
        cfg = self.cfg
        pp = self.pp_size
        load = next((s for s in snap.slots if s.slot == snap.slot), None)
        d_reqs, d_ctx = (load.decode_reqs, load.decode_ctx_sum) if load is not None else (0, 0)
        ch = snap.chunked
        prefix = ch.prompt_tokens - ch.remaining_prompt_tokens if ch is not None else 0
        prefill = [max(c - d_reqs, 0) for c in candidates]
        shapes = [BatchShape(((prefix, p),) if p else (), d_reqs, d_ctx) for p in prefill]
        if d_reqs:
            shapes.append(BatchShape((), d_reqs, d_ctx))
        correct = self._residual.correct
        stage = [correct(sh, ms) for sh, ms in zip(shapes, self.predictor.predict_many(shapes),
                                                   strict=True)]
        dec_ms = stage.pop() if d_reqs else 0.0  # no decodes: the idle slot costs nothing
        tpot_cap = cfg.tpot_margin * self.slo.tpot_ms
        ok = [i for i, ms in enumerate(stage) if ms * pp <= tpot_cap]
        # a request's last chunk still has to cross the pipeline: its deadline comes one
        # traversal (pp stages of the slowest admissible microbatch) before the TTFT SLO
        lead = pp * max((stage[i] for i in ok), default=0.0)
        rate = max(oa_rate(snap, self.slo.ttft_ms, lead), arrival_rate / 1000.0)
        # no KV-watermark shrink here: decodes ride in every prefill batch whatever its size, so
        # a smaller budget only starves prefill while the engine's admission already waits for
        # KV (azure-conv 6.5 req/s seed 0: P90 TTFT 11.1 s with the guard, 3.2 s without)
        if not ok:
            idx, reason = 0, "tpot-infeasible:min"
        else:
            sub, covers = frontier_choice([prefill[i] for i in ok], [stage[i] for i in ok],
                                          rate)
            if sub < 0:  # every admissible budget is spent on decodes alone
                idx, reason = ok[-1], "frontier:no-prefill-room"
            else:
                idx, reason = ok[sub], ("frontier:covers" if covers else "frontier:drain")
        chunk = candidates[idx]
        if chunk < floor:
            chunk, reason = floor, reason + "+safety-floor"
            idx = candidates.index(floor)
        supply = 1000.0 * prefill[idx] / stage[idx] if stage[idx] > 0 else INF
        return ChunkDecision(chunk, reason, (
            ("demand_tok_s", 1000.0 * rate), ("arrival_tok_s", arrival_rate),
            ("supply_tok_s", supply), ("period_ms", stage[idx] * pp),
            ("mixed_seen", 1.0), ("tpot_cap_ms", tpot_cap),
            ("slot_decodes", float(d_reqs)), ("prefix", float(prefix)),
            ("kv_free_frac", snap.kv_free_fraction), ("decode_stage_ms", dec_ms),
        ), float(stage[idx]))

    def _remember(self, decision: ChunkDecision) -> ChunkDecision:
        self._last = decision
        return decision
