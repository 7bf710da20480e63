"""ALP cost: us per prediction, per 16-candidate scan, per RLS update; serialised size.

Run: .venv/bin/python bench/bench_predictor.py   (paper: 2.875 us/prediction, 0.643 KB)
Also times a numpy RLS update of the same maths, to justify the pure-Python choice.
"""

from __future__ import annotations

import json
import random
import sys
import timeit

import numpy as np

from ppsched.core.batch import BatchShape
from ppsched.core.models import BUILTIN_MODELS
from ppsched.predictor.alp import ALPredictor, features
from ppsched.predictor.profile import default_profile

CANDIDATES = tuple(range(128, 2049, 128))  # 16 chunk sizes


def shapes(rng: random.Random, n: int) -> list[BatchShape]:
    out = []
    for _ in range(n):
        dec = rng.randrange(1, 96)
        ctx = dec * rng.randrange(200, 3000)
        if rng.random() < 0.5:
            out.append(BatchShape(decode_count=dec, decode_ctx_sum=ctx))
        else:
            out.append(BatchShape(prefill=((rng.randrange(0, 3000), rng.randrange(64, 2048)),),
                                  decode_count=dec, decode_ctx_sum=ctx))
    return out


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def numpy_update(w: np.ndarray, p: np.ndarray, x: np.ndarray, y: float, lam: float) -> None:
    px = p @ x
    k = px / (lam + x @ px)
    w += k * (y - w @ x)
    p -= np.outer(k, px)
    p /= lam
    p += p.T
    p *= 0.5


def main() -> int:
    rng = random.Random(0)
    profile = default_profile(BUILTIN_MODELS["qwen2.5-32b"], pp_size=4)
    data = shapes(rng, 512)
    results = {}
    for online in (False, True):
        alp = ALPredictor(profile, correct_linear_online=online)
        for s in data:
            alp.update(s, 20.0 + 0.05 * s.batched_tokens)
        it = iter(data * 10_000)
        predict_us = per_call_us(lambda alp=alp, it=it: alp.predict(next(it)), 20_000)
        scan = [BatchShape(prefill=((1500, c),), decode_count=40, decode_ctx_sum=60_000)
                for c in CANDIDATES]
        scan_us = per_call_us(lambda alp=alp, scan=scan: alp.predict_many(scan), 2_000)

        def build_and_scan(alp=alp):
            return alp.predict_many([BatchShape(prefill=((1500, c),), decode_count=40,
                                                decode_ctx_sum=60_000) for c in CANDIDATES])

        build_scan_us = per_call_us(build_and_scan, 2_000)
        it2 = iter(data * 10_000)
        update_us = per_call_us(lambda alp=alp, it=it2: alp.update(next(it), 25.0), 10_000)
        state = json.loads(alp.to_json())
        core = {k: state[k] for k in ("weights", "cov")}
        results["online-linear" if online else "paper-4"] = {
            "predict_us": predict_us, "scan16_us": scan_us, "build+scan16_us": build_scan_us,
            "update_us": update_us, "json_bytes": alp.size_bytes(),
            "weights+cov_json_bytes": len(json.dumps(core, separators=(",", ":")).encode()),
        }
    w, p = np.zeros(4), np.eye(4) * 1.25
    xs = [np.array(features(s)) for s in data]
    it3 = iter(xs * 10_000)
    np_update_us = per_call_us(lambda: numpy_update(w, p, next(it3), 25.0, 0.9975), 10_000)
    print(f"python {sys.version.split()[0]}, profile {profile.source} ({profile.variant})")
    print(f"{'variant':<15}{'predict us':>11}{'scan16 us':>11}{'build+scan':>11}"
          f"{'update us':>11}{'JSON B':>8}{'w+P B':>7}")
    for name, r in results.items():
        print(f"{name:<15}{r['predict_us']:>11.2f}{r['scan16_us']:>11.2f}"
              f"{r['build+scan16_us']:>11.2f}{r['update_us']:>11.2f}{r['json_bytes']:>8}"
              f"{r['weights+cov_json_bytes']:>7}")
    print(f"numpy RLS update (same maths, 4 features): {np_update_us:.2f} us")
    print("paper (FastPP artifact): 2.875 us/prediction, 0.643 KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
