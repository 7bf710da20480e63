"""Cost of the plugin's per-turn work on rank 0, on fake requests (no SGLang): building the
chunk snapshot and the decode snapshot for one slot, as the hooks do every microbatch turn.

    .venv/bin/python scripts/bench_plugin_overhead.py [--waiting 256] [--running 256] [--pp 4]
"""

from __future__ import annotations

import argparse
import time

from ppsched.sglang_patch import translate
from ppsched.sglang_patch.translate import RequestClock


class Req:
    def __init__(self, rid: str, prompt: int, out: int) -> None:
        self.rid = rid
        self.origin_input_ids = [0] * prompt
        self.output_ids = [0] * out

    def finished(self) -> bool:
        return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--waiting", type=int, default=256)
    p.add_argument("--running", type=int, default=256, help="decoding requests over all slots")
    p.add_argument("--pp", type=int, default=4)
    p.add_argument("--reps", type=int, default=200)
    a = p.parse_args()
    clock = RequestClock()
    waiting = [Req(f"w{i}", 1000, 0) for i in range(a.waiting)]
    slots = [[Req(f"r{s}-{i}", 1000, 50) for i in range(a.running // a.pp)] for s in range(a.pp)]
    t0 = time.perf_counter()
    for it in range(a.reps):
        translate.chunk_snapshot(now_s=it, iteration=it, slot=it % a.pp, pp_size=a.pp,
                                 waiting=waiting, chunked=None, slot_reqs=slots, kv_free=1,
                                 kv_total=2, clock=clock, recent_stage_ms=[1.0] * 64,
                                 max_chunk=2048, queue_view=64)
    chunk_ms = 1000 * (time.perf_counter() - t0) / a.reps
    t0 = time.perf_counter()
    for it in range(a.reps):
        translate.decode_snapshot(now_s=it, slot=0, pp_size=a.pp, running=slots[0], held=[],
                                  slot_sizes=[len(s) for s in slots], kv_free=1, kv_total=2,
                                  queued_requests=a.waiting, queued_prompt_tokens=0, clock=clock)
    decode_ms = 1000 * (time.perf_counter() - t0) / a.reps
    print(f"waiting {a.waiting}, running {a.running} over {a.pp} slots: chunk snapshot "
          f"{chunk_ms:.3f} ms, decode snapshot {decode_ms:.3f} ms per turn")


if __name__ == "__main__":
    main()
