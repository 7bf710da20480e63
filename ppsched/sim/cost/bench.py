"""Micro-benchmark of the cost model's hot path: `python -m ppsched.sim.cost.bench`."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from ppsched.core.batch import BatchShape
from ppsched.core.models import BUILTIN_MODELS
from ppsched.sim.cost.model import build_cost_model


def _shapes(seed: int = 0, n: int = 1000) -> dict[str, list[BatchShape]]:
    rng = random.Random(seed)
    decode = []
    for _ in range(n):
        b = rng.randint(1, 200)
        decode.append(BatchShape(decode_count=b, decode_ctx_sum=b * rng.randint(100, 3000)))
    mixed = []
    for _ in range(n):
        d = rng.randint(0, 64)
        mixed.append(BatchShape(prefill=((rng.randint(0, 3000), rng.randint(1, 2048)),),
                                decode_count=d, decode_ctx_sum=d * 800))
    multi = [BatchShape(prefill=tuple((rng.randint(0, 500), rng.randint(1, 300))
                                      for _ in range(4))) for _ in range(n)]
    return {"decode": decode, "prefill+decodes": mixed, "4 prefill pieces": multi}


def _time(fn: Callable[[BatchShape], float], shapes: list[BatchShape], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        for shape in shapes:
            fn(shape)
    return (time.perf_counter() - start) / (reps * len(shapes)) * 1e6


def main(reps: int = 100) -> None:
    model = BUILTIN_MODELS["qwen2.5-32b"]
    t0 = time.perf_counter()
    pp = build_cost_model(model, "a100-40g-pcie", pp_size=4, tp_size=1)
    t1 = time.perf_counter()
    build_cost_model(model, "a100-40g-pcie", pp_size=4, tp_size=1, seed=1)
    t2 = time.perf_counter()
    tp = build_cost_model(model, "a100-40g-pcie", pp_size=1, tp_size=4)
    print(f"build qwen2.5-32b pp4: cold {1e3 * (t1 - t0):.0f} ms, cached {1e3 * (t2 - t1):.1f} ms")
    shapes = _shapes()
    rows = [("stage_ms mid stage", "decode", lambda s: pp.stage_ms(1, s)),
            ("stage_ms last stage", "decode", lambda s: pp.stage_ms(3, s)),
            ("stage_ms mid stage", "prefill+decodes", lambda s: pp.stage_ms(1, s)),
            ("stage_ms mid stage", "4 prefill pieces", lambda s: pp.stage_ms(1, s)),
            ("tp_step_ms (tp4)", "decode", tp.tp_step_ms),
            ("link_ms", "decode", pp.link_ms),
            ("cpu_overhead_ms", "decode", pp.cpu_overhead_ms)]
    print(f"{'call':22s} {'shapes':18s} us/call")
    for label, kind, fn in rows:
        print(f"{label:22s} {kind:18s} {_time(fn, shapes[kind], reps):6.2f}")


if __name__ == "__main__":
    main()
