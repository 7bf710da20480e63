"""Parse trace files (Azure-style timestamped CSV, length-only CSV, Mooncake JSONL) into arrays.

Every defect is a UserError naming the file, the line (1 = header) and the offending value. Parsed
files are cached per process, keyed by path, mtime and size, so repeated sweeps read each file once.
"""

from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.core.errors import UserError
from ppsched.traces.reader_jsonl import parse_jsonl

# Column names per format: (timestamp column or None, prompt column, output column).
FORMATS: dict[str, tuple[str | None, str, str]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "lengths": (None, "num_prefill_tokens", "num_decode_tokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),  # JSONL, see reader_jsonl
}
MAX_TOKENS = 10**8  # far above any context length; keeps int64 sums exact


@dataclass(frozen=True)
class TraceTable:
    """A parsed trace: token counts and, if timestamped, arrival seconds from the first row."""

    path: str
    fmt: str
    prompt_tokens: np.ndarray  # int64, all > 0
    output_tokens: np.ndarray  # int64, all > 0
    arrival_s: np.ndarray | None  # float64, non-decreasing, starts at 0; None for length-only sets
    # Per row: its prompt's block ids (Mooncake hash_ids); None when the format has none.
    prefix_block_ids: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.prompt_tokens)
        if n == 0 or len(self.output_tokens) != n:
            raise ValueError(f"{self.path}: {n} prompts vs {len(self.output_tokens)} outputs")
        if self.arrival_s is not None and len(self.arrival_s) != n:
            raise ValueError(f"{self.path}: {len(self.arrival_s)} timestamps for {n} rows")
        if self.prefix_block_ids is not None and len(self.prefix_block_ids) != n:
            raise ValueError(f"{self.path}: {len(self.prefix_block_ids)} block-id rows for {n}")

    def __len__(self) -> int:
        return len(self.prompt_tokens)


def _line(row: int) -> int:
    """File line of data row `row` (0-based): line 1 is the header."""
    return row + 2


def _token_column(path: str, frame: pd.DataFrame, column: str) -> np.ndarray:
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values) | (values <= 0) | (values != np.floor(values)) \
        | (values > MAX_TOKENS)
    if bad.any():
        row = int(np.argmax(bad))
        raise UserError(f"{path}, line {_line(row)}: {column}={raw.iloc[row]!r}; "
                        f"expected a whole number of tokens in 1..{MAX_TOKENS}")
    return values.astype(np.int64)


def _timestamp_column(path: str, frame: pd.DataFrame, column: str) -> np.ndarray:
    raw = frame[column]
    numeric = pd.to_numeric(raw, errors="coerce")
    if pd.notna(numeric.iloc[0]):  # user traces may give plain seconds (the first row decides)
        seconds = numeric.to_numpy(dtype=float)
        bad = ~np.isfinite(seconds) | (seconds < 0)
        if bad.any():
            row = int(np.argmax(bad))
            raise UserError(f"{path}, line {_line(row)}: {column}={raw.iloc[row]!r}; "
                            f"expected seconds >= 0 or a date-time")
    else:
        stamps = pd.to_datetime(raw, format="ISO8601", errors="coerce")
        if stamps.isna().any():
            row = int(np.argmax(stamps.isna().to_numpy()))
            raise UserError(f"{path}, line {_line(row)}: {column}={raw.iloc[row]!r}; "
                            f"expected a date-time like '2023-11-16 18:15:46.68' or seconds")
        seconds = (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy(dtype=float)
    gaps = np.diff(seconds)
    if (gaps < 0).any():
        row = int(np.argmax(gaps < 0)) + 1
        raise UserError(f"{path}, line {_line(row)}: {column}={raw.iloc[row]!r} is earlier than "
                        f"the previous row's {raw.iloc[row - 1]!r}; expected non-decreasing times")
    return seconds - seconds[0]


def _check_field_counts(path: str, expected: int) -> None:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        for line_no, fields in enumerate(csv.reader(handle), start=1):
            if fields and len(fields) != expected:
                raise UserError(f"{path}, line {line_no}: {len(fields)} fields "
                                f"{','.join(fields)!r}; expected {expected} like the header")


def _parse_mooncake(path: str) -> TraceTable:
    arrival, prompt, output, blocks = parse_jsonl(path, MAX_TOKENS)
    for array in (arrival, prompt, output):
        array.flags.writeable = False
    return TraceTable(path=path, fmt="mooncake", prompt_tokens=prompt, output_tokens=output,
                      arrival_s=arrival, prefix_block_ids=blocks)


def _parse(path: str, fmt: str) -> TraceTable:
    if fmt == "mooncake":
        return _parse_mooncake(path)
    ts_col, prompt_col, output_col = FORMATS[fmt]
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True,
                            encoding="utf-8-sig")
    except pd.errors.EmptyDataError:
        raise UserError(f"{path}: file is empty; expected a CSV header and at least one row") \
            from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: not a readable CSV ({first})") from None
    if not isinstance(frame.index, pd.RangeIndex):
        # pandas turns a row with more fields than the header into an index: find it and refuse.
        _check_field_counts(path, len(frame.columns))
    frame.columns = [str(c).strip() for c in frame.columns]
    wanted = [c for c in (ts_col, prompt_col, output_col) if c is not None]
    for column in wanted:
        if column not in frame.columns:
            raise UserError(f"{path}: missing column {column!r} (found {list(frame.columns)}); "
                            f"--format {fmt} expects columns {wanted}")
    if len(frame) == 0:
        raise UserError(f"{path}: header but no rows; expected at least one request")
    prompt = _token_column(path, frame, prompt_col)
    output = _token_column(path, frame, output_col)
    arrival = _timestamp_column(path, frame, ts_col) if ts_col else None
    # Arrays are shared through the cache: read-only so no caller can corrupt them.
    for array in (prompt, output, arrival):
        if array is not None:
            array.flags.writeable = False
    return TraceTable(path=path, fmt=fmt, prompt_tokens=prompt, output_tokens=output,
                      arrival_s=arrival)


@functools.lru_cache(maxsize=32)
def _parse_cached(path: str, fmt: str, mtime_ns: int, size: int) -> TraceTable:
    del mtime_ns, size  # part of the cache key only: an edited file is parsed again
    return _parse(path, fmt)


def read_trace(path: str | os.PathLike[str], fmt: str) -> TraceTable:
    """Read and validate one trace file of format 'azure', 'lengths' or 'mooncake' (cached per
    process)."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: expected one of {sorted(FORMATS)}")
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise UserError(f"trace file {str(resolved)!r} does not exist or is not a file")
    stat = resolved.stat()
    return _parse_cached(str(resolved), fmt, stat.st_mtime_ns, stat.st_size)
