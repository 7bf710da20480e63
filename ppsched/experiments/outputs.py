"""Run outputs on disk: summary.json, requests.csv, iterations.csv, decisions.jsonl; an
experiment's config.json."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.metrics.frame import REQUEST_COLUMNS, requests_frame
from ppsched.metrics.jsonable import jsonable


def _write_json(path: Path, payload: dict) -> None:
    text = json.dumps(jsonable(payload), indent=2, sort_keys=False, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def write_experiment_config(out_dir: str | os.PathLike[str], **parts: object) -> Path:
    """config.json beside an experiment's table: what made it (setup with every policy knob,
    workload, search settings, ...), each part a dataclass or plain value."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.json"
    _write_json(path, {name: asdict(part) if is_dataclass(part) and not isinstance(part, type)
                       else part for name, part in parts.items()})
    return path


def write_run_outputs(out_dir: str | os.PathLike[str], records: Sequence[RequestRecord],
                      summary: dict, config: dict, iterations: pd.DataFrame | None = None,
                      decisions: list[dict] | None = None) -> dict[str, Path]:
    """Write one run's files into out_dir (created); returns {kind: path} of what was written.

    summary.json holds summary plus "config": config (NaN/inf written as null). requests.csv has
    REQUEST_COLUMNS; empty cells are NaN. iterations.csv and decisions.jsonl only when given.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"output directory {str(out)!r}: cannot create it ({exc.strerror})") \
            from None
    written: dict[str, Path] = {}
    written["summary"] = out / "summary.json"
    _write_json(written["summary"], {**summary, "config": config})
    written["requests"] = out / "requests.csv"
    requests_frame(records).to_csv(written["requests"], index=False)
    if iterations is not None:
        written["iterations"] = out / "iterations.csv"
        iterations.to_csv(written["iterations"], index=False)
    if decisions is not None:
        written["decisions"] = out / "decisions.jsonl"
        with written["decisions"].open("w", encoding="utf-8") as fh:
            for decision in decisions:
                fh.write(json.dumps(jsonable(decision), allow_nan=False) + "\n")
    return written


def _float(value: object) -> float:
    return math.nan if value is None or (isinstance(value, float) and math.isnan(value)) \
        else float(value)  # type: ignore[arg-type]


def read_requests_csv(path: str | os.PathLike[str]) -> list[RequestRecord]:
    """Read a requests.csv written by write_run_outputs back into RequestRecords."""
    src = Path(path)
    if not src.is_file():
        raise UserError(f"requests file {str(src)!r} does not exist")
    try:
        frame = pd.read_csv(src, keep_default_na=True, dtype={"reject_reason": str})
    except pd.errors.EmptyDataError:
        raise UserError(f"{src}: file is empty; expected columns {list(REQUEST_COLUMNS)}") \
            from None
    needed = ("id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens",
              "rejected")
    for column in needed:
        if column not in frame.columns:
            raise UserError(f"{src}: missing column {column!r}; expected {list(REQUEST_COLUMNS)}")
    records = []
    for row, rec in enumerate(frame.to_dict("records")):
        try:
            records.append(RequestRecord(
                req_id=int(rec["id"]), arrival_s=float(rec["arrival_s"]),
                prompt_tokens=int(rec["prompt_tokens"]), output_tokens=int(rec["output_tokens"]),
                first_token_s=_float(rec["first_token_s"]), finish_s=_float(rec["finish_s"]),
                rejected=_bool(rec["rejected"]),
                reject_reason=_text(rec.get("reject_reason", "")),
                slot=int(rec.get("slot", -1)), retractions=int(rec.get("retractions", 0))))
        except (TypeError, ValueError) as exc:
            raise UserError(f"{src}, line {row + 2}: {exc}") from None
    return records


def _bool(value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ValueError(f"rejected={value!r}; expected True or False")


def _text(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
