"""load_workload: a named or user-supplied trace, with arrivals, sampling and context capping."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.paths import data_dir as resolve_data_dir
from ppsched.core.requests import RequestSpec
from ppsched.traces.arrivals import (
    check_rate,
    check_speedup,
    check_window,
    poisson_arrivals,
    replay_arrivals,
)
from ppsched.traces.catalog import SYNTHETIC_DEFAULT_REQUESTS, Entry, lookup
from ppsched.traces.reader_jsonl import BLOCK_TOKENS
from ppsched.traces.readers import FORMATS, TraceTable, read_trace
from ppsched.traces.workload import Workload


def _positive_int(flag: str, value: int | None, minimum: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UserError(f"{flag} {value!r}: expected a whole number >= {minimum}")
    return int(value)


def _duration(value: float | None) -> float | None:
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise UserError(f"--duration {value!r}: expected a finite number of seconds > 0")
    return float(value)


def cap_context(prompt: np.ndarray, output: np.ndarray, max_context: int,
                max_prompt: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Cap prompt+output at max_context by scaling both down proportionally, then (when given)
    the prompt alone at max_prompt.

    Proportional (not prompt-first) so a capped request keeps its prefill/decode character. Each
    side keeps >= 1 token and never grows. Returns (prompt, output, number of capped requests).
    """
    total = prompt + output
    over = total > max_context
    new_prompt = prompt.copy()
    new_output = output.copy()
    scaled = np.maximum(1, (prompt[over] * max_context) // total[over])
    new_prompt[over] = scaled
    new_output[over] = max_context - scaled
    if max_prompt is not None:
        long_prompt = new_prompt > max_prompt
        new_prompt[long_prompt] = max_prompt
        over |= long_prompt
    return new_prompt, new_output, int(over.sum())


def _block_ids(table: TraceTable | None, index: np.ndarray, prompt: np.ndarray, *,
               swapped: bool) -> list[tuple[int, ...]]:
    """Each request's prefix block ids, taken with its row (so resampling keeps them together);
    a capped prompt keeps only the blocks it still covers. None for traces without ids, and for
    swapped lengths (the ids described the original prompt)."""
    if table is None or table.prefix_block_ids is None or swapped:
        return [()] * len(index)
    rows = table.prefix_block_ids
    return [rows[i][:-(-int(p) // BLOCK_TOKENS)] for i, p in zip(index, prompt, strict=True)]


def _prompts_up_to(table: TraceTable, limit: int) -> TraceTable:
    """The rows of ``table`` whose prompt has at most ``limit`` tokens, in file order."""
    keep = table.prompt_tokens <= limit
    if not keep.any():
        raise UserError(f"{table.path}: no row has a prompt of at most {limit} tokens")
    ids = table.prefix_block_ids
    return replace(table, prompt_tokens=table.prompt_tokens[keep],
                   output_tokens=table.output_tokens[keep],
                   arrival_s=None if table.arrival_s is None else table.arrival_s[keep],
                   prefix_block_ids=None if ids is None else
                   tuple(b for b, k in zip(ids, keep, strict=True) if k))


def _source(name: str | None, trace_file: str | None, trace_format: str | None,
            data_dir: str | None) -> tuple[str, str, Entry]:
    """(workload name, source description, catalog-like entry) for a name or a user file."""
    if (name is None) == (trace_file is None):
        raise UserError("give exactly one of a workload NAME or --trace-file PATH "
                        f"(got name={name!r}, trace file={trace_file!r})")
    if trace_file is not None:
        if trace_format is None:
            raise UserError(f"--trace-file {trace_file!r} needs --format, one of {sorted(FORMATS)}")
        if trace_format not in FORMATS:
            raise UserError(f"--format {trace_format!r}: expected one of {sorted(FORMATS)}")
        path = str(Path(trace_file).expanduser().resolve())
        entry = Entry(Path(trace_file).stem, path, trace_format, notes=(f"user trace {path}",))
        return entry.name, path, entry
    if trace_format is not None:
        raise UserError(f"--format {trace_format!r} applies only with --trace-file")
    assert name is not None
    entry = lookup(name)
    if entry.file is None:
        return name, "synthetic", entry
    path = str(resolve_data_dir(data_dir) / entry.file)
    return name, path, entry


def load_workload(name: str | None = None, *, trace_file: str | None = None,
                  trace_format: str | None = None, rate: float | None = None,
                  replay: bool = False, window_min: float | None = None, speedup: float = 1.0,
                  num_requests: int | None = None, duration_s: float | None = None,
                  seed: int = 0, max_context: int | None = None,
                  data_dir: str | None = None, resample: bool = False,
                  max_prompt: int | None = None) -> Workload:
    """Build a workload from a catalog name or a user trace file (exactly one).

    Arrivals: `rate` gives seeded Poisson arrivals; otherwise a timestamped (azure) trace is
    replayed, its first `window_min` minutes, with times divided by `speedup` (0.9 = 10% slower).
    Length-only sets and synthetic generators need `rate`. Lengths: the file's rows in order
    (replay keeps each row's own lengths); when more requests are asked than the file has, every
    request's lengths are sampled with replacement (seeded). Bounds: `num_requests` (default: the
    whole file, 1000 for synthetic) and/or `duration_s` (arrivals strictly before it).
    `resample` (Poisson only) draws every request's lengths i.i.d. from all rows (seeded) even
    when the file has enough rows, so a short run represents the whole trace and each seed sees
    its own sample (the goodput method uses it). `max_context` caps prompt+output and
    `max_prompt` the prompt alone (a live server's limits), counted in `truncated` and stated in
    `notes`.
    Arrival and length draws use separate seeded streams, so lengths do not change with rate.
    """
    num_requests = _positive_int("--num-requests", num_requests)
    max_context = _positive_int("--max-context", max_context, minimum=2)
    max_prompt = _positive_int("max_prompt", max_prompt)
    if max_prompt is not None and max_context is None:
        raise UserError(f"max_prompt={max_prompt} without max_context: expected both (a prompt "
                        "cap applies with a prompt + output cap)")
    seed = _positive_int("--seed", seed, minimum=0) or 0
    duration_s = _duration(duration_s)
    check_speedup(speedup)
    if window_min is not None:
        check_window(window_min)
    if resample and rate is None:
        raise UserError("resampling lengths applies to Poisson arrivals (--rate) only")
    if rate is not None:
        check_rate(rate)
        if replay:
            raise UserError(f"--rate {rate} and --replay exclude each other; choose Poisson "
                            "arrivals at a rate or the trace's own timestamps")
        if window_min is not None or speedup != 1.0:
            raise UserError("--window-min and --speedup apply to --replay only, not to --rate")
    wl_name, source, entry = _source(name, trace_file, trace_format, data_dir)
    table: TraceTable | None = read_trace(source, entry.fmt) if entry.fmt else None
    notes = list(entry.notes)
    if table is not None and entry.max_prompt_tokens is not None:
        rows = len(table)
        table = _prompts_up_to(table, entry.max_prompt_tokens)
        notes.append(f"{len(table)} of the file's {rows} rows (prompts of at most "
                     f"{entry.max_prompt_tokens} tokens)")
    timestamped = table is not None and table.arrival_s is not None
    if rate is None:
        if not timestamped:
            what = "is synthetic" if table is None else "has lengths only (no timestamps)"
            raise UserError(f"workload {wl_name!r} {what}; give --rate R for Poisson arrivals"
                            + (" (--replay needs a timestamped trace)" if replay else ""))
        replay = True

    arr_seq, len_seq = np.random.SeedSequence(seed).spawn(2)
    len_rng = np.random.default_rng(len_seq)
    if replay:
        assert table is not None and table.arrival_s is not None
        times = replay_arrivals(table.arrival_s, window_min=window_min, speedup=speedup)
        if duration_s is not None:
            times = times[times < duration_s]
        if num_requests is not None:
            if num_requests > len(times):
                raise UserError(f"--num-requests {num_requests}: the replay has only {len(times)} "
                                "requests in its window/duration; ask for fewer or use --rate")
            times = times[:num_requests]
        index = np.arange(len(times))  # replay keeps each timestamp with its own lengths
        arrival = (f"replay window_min={window_min} speedup={speedup}"
                   f"{f' duration_s={duration_s}' if duration_s is not None else ''}")
    else:
        assert rate is not None
        count = num_requests
        if count is None and duration_s is None:
            count = len(table) if table is not None else SYNTHETIC_DEFAULT_REQUESTS
        times = poisson_arrivals(np.random.default_rng(arr_seq), rate, count=count,
                                 duration_s=duration_s)
        arrival = f"poisson rate={rate} seed={seed}"
        index = np.arange(len(times))
        if table is not None and (resample or len(times) > len(table)):
            index = len_rng.integers(0, len(table), size=len(times))
            notes.append(f"{len(times)} requests sampled with replacement from {len(table)} "
                         f"rows (seed {seed})")
    if len(times) == 0:
        raise UserError(f"workload {wl_name!r}: no request arrives within --duration "
                        f"{duration_s} s; expected a longer duration or a higher rate")

    if table is None:
        assert entry.prompt_range is not None and entry.output_range is not None
        prompt = len_rng.integers(entry.prompt_range[0], entry.prompt_range[1] + 1, len(times))
        output = len_rng.integers(entry.output_range[0], entry.output_range[1] + 1, len(times))
    else:
        prompt, output = table.prompt_tokens[index], table.output_tokens[index]
        if entry.swap:
            prompt, output = output, prompt
    truncated = 0
    if max_context is not None:
        prompt, output, truncated = cap_context(prompt, output, max_context, max_prompt)
        if truncated:
            prompt_cap = f", prompt at {max_prompt}" if max_prompt is not None else ""
            notes.append(f"{truncated} requests capped at max_context={max_context}"
                         f"{prompt_cap} (prompt and output scaled down proportionally)")
    blocks = _block_ids(table, index, prompt, swapped=entry.swap)
    requests = tuple(RequestSpec(i, float(t), int(p), int(o), b) for i, (t, p, o, b)
                     in enumerate(zip(times, prompt, output, blocks, strict=True)))
    return Workload(name=wl_name, requests=requests, source=source, truncated=truncated,
                    notes=tuple(notes), arrival=arrival)
