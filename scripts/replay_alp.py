"""Replay a live decision log's stage-0 measurements through a fresh ALP, offline.

    python scripts/replay_alp.py decisions.jsonl --model MODEL_DIR_OR_NAME --pp-size 2 \
        [--no-device-fit] [--warmup 100]

Each logged ``stage`` record (rank 0, learned) is predicted, then learned from, in log order --
what the plugin's learner did -- so the printed MAPE after ``--warmup`` is the live test's
figure for this predictor, and ``--no-device-fit`` shows it without the device fit. The
reference is the live test's: per (mode, prefill tokens, decodes), the median measured time
over the whole log (tests/test_live_learning.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.core.models import load_model_config
from ppsched.core.policy_context import PolicyContext
from ppsched.core.slo import Slo
from ppsched.predictor.alp import ALPredictor
from ppsched.predictor.profile import default_profile


def stage_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise UserError(f"decision log {str(path)!r}: no such file")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{n}: not JSON ({exc})") from None
        if rec.get("kind") == "stage" and rec.get("rank") == 0 and rec.get("learned"):
            rows.append(rec)
    if not rows:
        raise UserError(f"{path}: no learned rank-0 stage records (a decision log of a "
                        "predictive server, PPSCHED_DECISION_LOG)")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--model", required=True, help="config.json directory or built-in name")
    ap.add_argument("--pp-size", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--no-device-fit", action="store_true")
    args = ap.parse_args(argv)
    try:
        if args.pp_size < 1 or args.warmup < 0:
            raise UserError(f"--pp-size {args.pp_size} / --warmup {args.warmup}: expected "
                            ">= 1 / >= 0")
        rows = stage_records(args.log)
        model = load_model_config(args.model)
        ctx = PolicyContext(pp_size=args.pp_size, slo=Slo(), model=model,
                            hardware="a100-40g-pcie", tp_size=1, max_chunk_tokens=128)
        profile = default_profile(model, pp_size=ctx.pp_size, tp=1)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    alp = ALPredictor(profile, device_fit=not args.no_device_fit)
    ape, keys = [], []
    for rec in rows:
        shape = BatchShape(prefill=tuple(tuple(p) for p in rec["prefill"]),
                           decode_count=rec["decode_count"], decode_ctx_sum=rec["decode_ctx"])
        measured = rec["measured_ms"]
        ape.append(100.0 * abs(alp.predict(shape) - measured) / measured)
        keys.append((rec["mode"], rec["prefill_tokens"], rec["decode_count"]))
        alp.update(shape, measured)
    by_shape = defaultdict(list)
    for key, rec in zip(keys, rows, strict=True):
        by_shape[key].append(rec["measured_ms"])
    median = {k: statistics.median(v) for k, v in by_shape.items()}
    ref = [100.0 * abs(median[k] - r["measured_ms"]) / r["measured_ms"]
           for k, r in zip(keys, rows, strict=True)]
    after, ref_after = ape[args.warmup:], ref[args.warmup:]
    if not after:
        print(f"error: {len(rows)} stage records, none after --warmup {args.warmup}",
              file=sys.stderr)
        return 2
    fit = "off" if alp.fit is None else ("answering" if alp.use_fit else "not answering")
    print(f"{args.log}: {len(rows)} stages; after {args.warmup}: ALP MAPE "
          f"{statistics.fmean(after):.1f}%, reference {statistics.fmean(ref_after):.1f}% "
          f"(device fit {fit} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
