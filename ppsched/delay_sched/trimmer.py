"""Delay scheduling (DS): trim a slot's decode batch to an efficient size; bounded starvation.

Rules (PAPER.md, DS section; constants are the artifact's):
- skip when work waits and KV has headroom (queued prompt tokens > 1024 and KV free > 10%):
  prefill will run anyway, so holding decodes only delays them;
- aim every slot at the efficient size of the pipeline-wide mean (decode requests per busy slot):
  a mean just above a boundary b (within the band) means the pipeline holds just over b·pp_size
  requests — the paper's "thresholds at multiples of 128·pp_size" — so every slot trims to b;
  otherwise the slot's target is the boundary that ends the mean's step (same cost as the mean);
- a slot at or below that target still trims a small excess over its own nearest boundary;
- victims: measured TPOT (P90 of recent) >= 0.9·SLO → hold the oldest (their per-request mean TPOT
  moves least), else the newest (old ones finish and free KV).
Starvation bound (ours): a request already held ``max_consecutive_holds`` turns in a row, or whose
TPOT so far exceeds the SLO, is never held. ``select`` is a pure function of the snapshot, so every
PP rank computes the same partition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter

from ppsched.core.knob_checks import check_knobs, finite_number, whole_number
from ppsched.core.policy import TrimDecision
from ppsched.core.snapshots import DecodeSnapshot, DecodingRequest
from ppsched.delay_sched.ladder import BoundaryLadder


@dataclass(frozen=True, slots=True)
class DsConfig:
    """The trimmer's knobs (the artifact's values, PAPER.md). The TPOT SLO and the starvation
    bound K are the run's settings (``--slo-*``, ``--ds-max-consecutive``): ``DelayTrimmer``
    takes them beside this."""

    tight_tpot_fraction: float = 0.9  # TPOT-first victim order at P90 TPOT >= this * SLO_TPOT
    skip_queued_tokens: int = 1024  # skip DS while more prompt tokens than this wait ...
    skip_kv_free_fraction: float = 0.10  # ... and more KV than this fraction is free
    tpot_percentile: float = 90.0  # goodput judges P90 TPOT, so slack is read at P90

    def __post_init__(self) -> None:
        check_knobs("ds", self, (
            ("tight_tpot_fraction", finite_number(self.tight_tpot_fraction)
             and self.tight_tpot_fraction > 0, "a finite number > 0"),
            ("skip_queued_tokens", whole_number(self.skip_queued_tokens)
             and self.skip_queued_tokens >= 0, "an integer >= 0"),
            ("skip_kv_free_fraction", finite_number(self.skip_kv_free_fraction)
             and 0.0 <= self.skip_kv_free_fraction <= 1.0, "a number in [0, 1]"),
            ("tpot_percentile", finite_number(self.tpot_percentile)
             and 0.0 <= self.tpot_percentile <= 100.0, "a number in [0, 100]")))


def _percentile(values: tuple[float, ...], q: float) -> float:
    """Nearest-rank percentile; NaN for no values (the window is short, sorting it is cheap)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


_ARRIVAL_ORDER = attrgetter("arrival_s", "req_id")  # unique per request: no ties


def _members(snap: DecodeSnapshot) -> list[DecodingRequest]:
    """Running ∪ held in arrival order. Both come sorted: the sort merges their two runs in C,
    as a merge would, at a fraction of ``heapq.merge``'s cost per request."""
    if not snap.held:
        return list(snap.running)
    return sorted((*snap.running, *snap.held), key=_ARRIVAL_ORDER)


def _all_ids(snap: DecodeSnapshot) -> tuple[int, ...]:
    return tuple(r.req_id for r in _members(snap))


class DelayTrimmer:
    """The DS ``DecodeTrimmer``: ``select(snap)`` partitions the slot's running ∪ held."""

    def __init__(self, ladder: BoundaryLadder, tpot_slo_ms: float,
                 max_consecutive_holds: int = 1, config: DsConfig | None = None) -> None:
        if not (finite_number(tpot_slo_ms) and tpot_slo_ms > 0):
            raise ValueError(f"tpot_slo_ms={tpot_slo_ms}: expected a finite number > 0")
        if not (whole_number(max_consecutive_holds) and max_consecutive_holds >= 0):
            raise ValueError(f"max_consecutive_holds={max_consecutive_holds!r}: expected an int "
                             ">= 0")
        self.ladder = ladder
        self.tpot_slo_ms = float(tpot_slo_ms)
        self.max_consecutive_holds = max_consecutive_holds
        self.config = config or DsConfig()
        self.name = f"ds(K={max_consecutive_holds})"

    def holdable(self, req: DecodingRequest) -> bool:
        """The starvation bound: under K consecutive holds and TPOT so far within the SLO."""
        return (req.held_streak < self.max_consecutive_holds
                and req.tpot_so_far_ms() <= self.tpot_slo_ms)

    def target_size(self, snap: DecodeSnapshot) -> tuple[int, str, float]:
        """(target run size, rule, pipeline mean) for this slot before the starvation bound."""
        return self._target(len(snap.running) + len(snap.held), snap.slot_sizes)

    def _target(self, n: int, slot_sizes: Sequence[int]) -> tuple[int, str, float]:
        # Empty slots are left out: they gain nothing from a shorter period of the busy ones.
        busy = [size for size in slot_sizes if size > 0]
        mean = sum(busy) / len(busy) if busy else float(n)
        toward_mean = self.ladder.efficient_size(mean)
        if n > toward_mean:
            own = self.ladder.just_above(n)
            return toward_mean, ("boundary" if own == toward_mean else "balance"), mean
        own = self.ladder.just_above(n)
        return (own, "boundary", mean) if own is not None else (n, "no-trim", mean)

    def settled_reason(self, n: int, slot_sizes: Callable[[], Sequence[int]],
                       kv_free_fraction: float, queued_tokens_exceed: Callable[[int], bool]
                       ) -> str | None:
        """``select``'s reason when it holds nobody whichever requests the slot has, decided from
        counts (``n`` = running + held, the snapshot's ``slot_sizes``, called only past the
        headroom rule, and KV) and whether the queued prompt tokens exceed a limit (an engine
        answers that from a prefix of its queue); None when ``select`` must read the requests.
        ``select`` branches through it, so an engine that skips building the requests on a
        settled turn decides alike."""
        cfg = self.config
        if n <= 1:
            return "no-trim"
        if kv_free_fraction > cfg.skip_kv_free_fraction \
                and queued_tokens_exceed(cfg.skip_queued_tokens):
            return "skip-kv-headroom"
        target, rule, _ = self._target(n, slot_sizes())
        if target >= n:
            return rule if rule == "no-trim" else "at-target"
        return None

    def select(self, snap: DecodeSnapshot) -> TrimDecision:
        cfg = self.config
        n = len(snap.running) + len(snap.held)
        base = (("slot_reqs", float(n)), ("held_before", float(len(snap.held))),
                ("kv_free_fraction", snap.kv_free_fraction),
                ("queued_prompt_tokens", float(snap.queued_prompt_tokens)))
        settled = self.settled_reason(n, lambda: snap.slot_sizes, snap.kv_free_fraction,
                                      lambda limit: snap.queued_prompt_tokens > limit)
        if settled is not None and (n <= 1 or settled == "skip-kv-headroom"):
            return TrimDecision(_all_ids(snap), (), settled, base)
        target, rule, mean = self.target_size(snap)
        inputs = base + (("slot_mean", mean), ("target", float(target)))
        if settled is not None:
            return TrimDecision(_all_ids(snap), (), settled, inputs)
        tpot = _percentile(snap.recent_tpot_ms, cfg.tpot_percentile)
        tight = tpot >= cfg.tight_tpot_fraction * self.tpot_slo_ms  # NaN (no data) → loose
        want = min(n - target, n - 1)  # never hold a whole slot
        members = _members(snap)
        order: Iterable[DecodingRequest] = members if tight else reversed(members)
        hold: set[int] = set()
        for req in order:
            if len(hold) >= want:
                break
            if self.holdable(req):
                hold.add(req.req_id)
        inputs += (("recent_tpot_ms", tpot), ("tight", float(tight)),
                   ("want_hold", float(want)), ("held", float(len(hold))))
        run_ids = tuple([r.req_id for r in members if r.req_id not in hold])
        hold_ids = tuple([r.req_id for r in members if r.req_id in hold])
        victims = "hold-oldest" if tight else "hold-newest"
        reason = f"{rule}:{victims}" if hold else f"{rule}:bound-blocked"
        return TrimDecision(run_ids, hold_ids, reason, inputs)
