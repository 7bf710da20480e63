"""Parse a Mooncake-style JSONL trace: one JSON object per line with ``timestamp`` (ms),
``input_length``, ``output_length`` and ``hash_ids`` (one id per 512-token prompt block).

Every defect is one UserError naming the file, the line (1 = first line) and the value.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ppsched.core.errors import UserError

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
BLOCK_TOKENS = 512  # Mooncake: one hash id per 512-token block of the prompt


def _whole(path: str, line: int, name: str, value: object, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and (not math.isfinite(value) or value != int(value))) \
            or not minimum <= value <= maximum:
        raise UserError(f"{path}, line {line}: {name}={value!r}; expected a whole number in "
                        f"{minimum}..{maximum}")
    return int(value)


def _block_ids(path: str, line: int, value: object, prompt: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise UserError(f"{path}, line {line}: hash_ids={str(value)[:60]!r}; expected a list "
                        "of whole numbers >= 0 (one per 512-token prompt block)")
    blocks = math.ceil(prompt / BLOCK_TOKENS)
    if len(value) != blocks:
        raise UserError(f"{path}, line {line}: {len(value)} hash_ids for input_length={prompt}; "
                        f"expected ceil({prompt}/{BLOCK_TOKENS}) = {blocks}")
    return tuple(value)


def parse_jsonl(path: str, max_tokens: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[tuple[int, ...], ...]]:
    """(arrival seconds from the first line, prompt tokens, output tokens, prefix block ids)."""
    stamps: list[int] = []
    prompts: list[int] = []
    outputs: list[int] = []
    blocks: list[tuple[int, ...]] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line_no, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    row = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}, line {line_no}: not JSON ({exc.msg}); expected one "
                                    f"object with {', '.join(FIELDS)}") from None
                if not isinstance(row, dict) or any(f not in row for f in FIELDS):
                    missing = [f for f in FIELDS if not isinstance(row, dict) or f not in row]
                    raise UserError(f"{path}, line {line_no}: missing {', '.join(missing)}; "
                                    f"expected an object with {', '.join(FIELDS)}")
                stamp = _whole(path, line_no, "timestamp", row["timestamp"], 0, 10**15)
                if stamps and stamp < stamps[-1]:
                    raise UserError(f"{path}, line {line_no}: timestamp={stamp} is earlier than "
                                    f"the previous line's {stamps[-1]}; expected non-decreasing "
                                    "milliseconds")
                prompt = _whole(path, line_no, "input_length", row["input_length"], 1, max_tokens)
                output = _whole(path, line_no, "output_length", row["output_length"], 1,
                                max_tokens)
                blocks.append(_block_ids(path, line_no, row["hash_ids"], prompt))
                stamps.append(stamp)
                prompts.append(prompt)
                outputs.append(output)
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; expected JSON lines") from None
    if not stamps:
        raise UserError(f"{path}: no JSON lines; expected at least one request")
    ms = np.asarray(stamps, dtype=float)
    return ((ms - ms[0]) / 1000.0, np.asarray(prompts, dtype=np.int64),
            np.asarray(outputs, dtype=np.int64), tuple(blocks))
