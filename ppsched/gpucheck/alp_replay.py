"""ALP on the real iterations of a decision log: predict, then learn, in the order measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.predictor.alp import ALPredictor
from ppsched.predictor.evaluate import evaluate_on_iterations
from ppsched.predictor.profile import LinearProfile


def read_records(path: str | Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"decision log {str(path)!r}: cannot read it ({exc.strerror})") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def learned_rows(records: list[dict[str, Any]], rank: int = 0
                 ) -> list[tuple[BatchShape, float]]:
    """(shape, measured ms) of the stage records the controller learned from, in log order."""
    rows = []
    for r in records:
        if r.get("kind") != "stage" or r.get("rank") != rank or not r.get("learned"):
            continue
        if "prefill" not in r:
            raise UserError("decision log stage records carry no batch shape (prefill, "
                            "decode_ctx): expected a log written by this ppsched version")
        shape = BatchShape(prefill=tuple((int(p), int(e)) for p, e in r["prefill"]),
                           decode_count=int(r["decode_count"]),
                           decode_ctx_sum=int(r["decode_ctx"]))
        rows.append((shape, float(r["measured_ms"])))
    return rows


def alp_mape(rows: list[tuple[BatchShape, float]], profile: LinearProfile, warmup: int
             ) -> dict[str, Any]:
    """ALP's error on the rows after ``warmup`` (each row trains after it is scored)."""
    if len(rows) <= warmup:
        raise UserError(f"{len(rows)} learned stage records: expected more than the warm-up "
                        f"of {warmup} (replay more requests)")
    return evaluate_on_iterations(ALPredictor(profile), rows, warmup)


def timing_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Stage records per (rank, timing source), learned counts, and the start records' facts."""
    per: dict[str, int] = {}
    learned = graph = 0
    for r in records:
        if r.get("kind") == "stage":
            key = f"rank{r['rank']}:{r.get('timing')}"
            per[key] = per.get(key, 0) + 1
            learned += bool(r.get("learned"))
            graph += bool(r.get("cuda_graph"))
    starts = [r for r in records if r.get("kind") == "start"]
    return {"stages": per, "learned": learned, "cuda_graph_stages": graph,
            "starts": [{k: s.get(k) for k in ("rank", "device", "timing", "loop_slots",
                                              "cuda_graphs", "ds_boundaries")} for s in starts]}
