"""Cost of one DS decision: ``python -m ppsched.delay_sched.microbench [slot_size ...]``.

Slots of the given sizes (default 64 130 200 400) with 4 PP slots; prints µs per ``select`` for
the no-trim path (balanced, between boundaries) and the trim path (just above a boundary).
"""

from __future__ import annotations

import sys
import timeit

from ppsched.core.snapshots import DecodeSnapshot, DecodingRequest
from ppsched.delay_sched.ladder import BoundaryLadder
from ppsched.delay_sched.trimmer import DelayTrimmer


def _snapshot(size: int, others: int) -> DecodeSnapshot:
    reqs = tuple(DecodingRequest(i, float(i), 600, 20, 10.0, 12.0, 0) for i in range(size))
    return DecodeSnapshot(now_s=20.0, slot=0, pp_size=4, running=reqs, held=(),
                          slot_sizes=(size, others, others, others), kv_free_tokens=100,
                          kv_total_tokens=10_000, queued_requests=0, queued_prompt_tokens=0,
                          recent_tpot_ms=tuple(float(50 + i % 100) for i in range(256)))


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [64, 130, 200, 400]
    trimmer = DelayTrimmer(BoundaryLadder((128, 256, 384, 512)), 200.0)
    for size in sizes:
        snap = _snapshot(size, size)
        decision = trimmer.select(snap)
        reps = 2000
        sec = min(timeit.repeat(lambda s=snap: trimmer.select(s), number=reps, repeat=5))
        print(f"slot={size:4d} hold={len(decision.hold_ids):3d} reason={decision.reason:22s} "
              f"{1e6 * sec / reps:8.1f} us/select")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
