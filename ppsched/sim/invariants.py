"""Invariants every simulated run must satisfy; cheap (vectorised), so they run on every run.

Checked: request conservation (completed + rejected = arrived; a run stopped early once its
verdict failed also leaves unfinished ones, none with all its tokens), exact output token counts,
monotone request times, KV never above capacity, every held request resumed (and no hold streak
above the configured bound), no empty microbatch, FIFO stages, and a decision log consistent
with the iterations. Any violation raises ``SimInvariantError`` naming what broke.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import pandas as pd

from ppsched.core.requests import RequestRecord, RequestSpec

_EPS = 1e-9


class SimInvariantError(AssertionError):
    """The simulator broke one of its own guarantees (a bug, never a user error)."""


@dataclass(frozen=True, slots=True)
class RunStats:
    """Engine-internal facts the invariants need beyond the public records."""

    kv_capacity: int
    kv_peak: int
    generated: tuple[int, ...]  # output tokens produced, by request id
    held_left: int  # requests still held when the run ended
    max_held_streak: int
    ds_max_consecutive: int | None  # the bound on consecutive holds; None without a trimmer
    stopped_early: bool = False  # the run stopped once its verdict failed (metrics.early_stop)


def _fail(what: str, ids: np.ndarray | Sequence[int]) -> None:
    shown = list(ids[:5])
    raise SimInvariantError(f"{what}: {len(ids)} case(s), e.g. {shown}")


_RECORD_FIELDS = attrgetter("req_id", "rejected", "arrival_s", "first_token_s", "finish_s",
                            "output_tokens")


def check_requests(specs: Sequence[RequestSpec], records: Sequence[RequestRecord],
                   stats: RunStats) -> None:
    if len(records) != len(specs):
        raise SimInvariantError(f"conservation: {len(specs)} arrived, {len(records)} recorded")
    # the records' fields as columns: one C-level pass (attrgetter), then a transpose
    columns = list(zip(*map(_RECORD_FIELDS, records), strict=True)) or [()] * 6
    ids = np.array(columns[0], dtype=np.int64)
    if not np.array_equal(np.sort(ids), np.sort([s.req_id for s in specs])):
        raise SimInvariantError("conservation: recorded request ids differ from arrived ids")
    rejected = np.array(columns[1], dtype=bool)
    arrival = np.array(columns[2], dtype=float)
    first = np.array(columns[3], dtype=float)
    finish = np.array(columns[4], dtype=float)
    output = np.array(columns[5], dtype=np.int64)
    generated = np.asarray(stats.generated, dtype=np.int64)[ids]
    done = ~rejected
    if stats.stopped_early:  # what it did not finish is unfinished, and only partly generated
        bad = done & ~np.isfinite(finish) & (generated >= output)
        if bad.any():
            _fail("unfinished request of a stopped run has all its tokens", ids[bad])
        done &= np.isfinite(finish)
    if not np.all(np.isfinite(finish[done])):
        _fail("conservation: admitted request never finished", ids[done & ~np.isfinite(finish)])
    bad = done & (generated != output)
    if bad.any():
        _fail("output tokens differ from the request's output_tokens", ids[bad])
    bad = rejected & ((generated != 0) | np.isfinite(first))
    if bad.any():
        _fail("rejected request produced tokens", ids[bad])
    no_reason = [r.req_id for r in records if r.rejected and not r.reject_reason]
    if no_reason:
        _fail("rejected without a reason", no_reason)
    bad = done & ~((arrival <= first + _EPS) & (first <= finish + _EPS))
    if bad.any():
        _fail("request times not monotone (arrival <= first token <= finish)", ids[bad])


def check_engine(stats: RunStats) -> None:
    if stats.kv_peak > stats.kv_capacity:
        raise SimInvariantError(f"KV peak {stats.kv_peak} > capacity {stats.kv_capacity}")
    if stats.held_left and not stats.stopped_early:
        raise SimInvariantError(f"{stats.held_left} held request(s) never resumed")
    bound = stats.ds_max_consecutive
    if bound is not None and stats.max_held_streak > bound:
        raise SimInvariantError(f"a request was held {stats.max_held_streak} consecutive turns "
                                f"> bound {bound}")


def _mb_major(it: pd.DataFrame) -> tuple[int, int] | None:
    """(microbatches, stages) when the rows are microbatch 0..n-1 each over stages 0..s-1 in
    that order (the engine's log frame), so per-stage and per-microbatch views are reshapes;
    None otherwise (the checks then sort)."""
    mb, stage = it["mb"].to_numpy(), it["stage"].to_numpy()
    if not mb.size:
        return None
    stages = int(stage.max()) + 1
    n = mb.size // stages
    if n * stages != mb.size or not (
            np.array_equal(stage, np.tile(np.arange(stages), n))
            and np.array_equal(mb, np.repeat(np.arange(n), stages))):
        return None
    return n, stages


def check_iterations(it: pd.DataFrame) -> None:
    if it.empty:
        return
    empty = (it["prefill_tokens"].to_numpy() <= 0) & (it["decode_reqs"].to_numpy() <= 0)
    if empty.any():
        _fail("empty microbatch launched", it["mb"].to_numpy()[empty])
    start, end = it["start_s"].to_numpy(), it["end_s"].to_numpy()
    if np.any(end < start):
        _fail("stage run ends before it starts", it["mb"].to_numpy()[end < start])
    order = _mb_major(it)
    if order is not None:  # the same checks on reshaped columns, no sort
        n, stages = order
        starts, ends = start.reshape(n, stages), end.reshape(n, stages)
        for stage in range(stages):  # each stage serves microbatches FIFO
            overlap = starts[1:, stage] < ends[:-1, stage] - _EPS
            if overlap.any():
                _fail("a stage ran two microbatches at once or out of order",
                      np.arange(1, n)[overlap])
        mb = it["mb"].to_numpy()
        same = mb[1:] == mb[:-1]
        early = same & (start[1:] < end[:-1] - _EPS)
        if early.any():
            _fail("a microbatch entered a stage before the previous stage finished it",
                  mb[1:][early])
        return
    for _, rows in it.groupby("stage", sort=False):  # each stage serves microbatches FIFO
        rows = rows.sort_values("mb")
        s, e = rows["start_s"].to_numpy(), rows["end_s"].to_numpy()
        overlap = s[1:] < e[:-1] - _EPS
        if overlap.any():
            _fail("a stage ran two microbatches at once or out of order",
                  rows["mb"].to_numpy()[1:][overlap])
    by_mb = it.sort_values(["mb", "stage"])
    same = by_mb["mb"].to_numpy()[1:] == by_mb["mb"].to_numpy()[:-1]
    early = same & (by_mb["start_s"].to_numpy()[1:] < by_mb["end_s"].to_numpy()[:-1] - _EPS)
    if early.any():
        _fail("a microbatch entered a stage before the previous stage finished it",
              by_mb["mb"].to_numpy()[1:][early])


def check_decisions(it: pd.DataFrame, decisions: Sequence[dict]) -> None:
    order = _mb_major(it)
    if order is not None:  # stage 0's rows, in microbatch order: every stages-th row
        step = order[1]
        stage0 = {col: it[col].to_numpy()[::step]
                  for col in ("mb", "chunk", "prefill_tokens", "decode_reqs")}
    else:
        rows = it[it["stage"] == 0].sort_values("mb")
        stage0 = {col: rows[col].to_numpy()
                  for col in ("mb", "chunk", "prefill_tokens", "decode_reqs")}
    mbs = stage0["mb"]
    if mbs.size and not np.array_equal(mbs, np.arange(mbs.size)):
        raise SimInvariantError("microbatch ids are not 0..n-1 on stage 0")
    chunk_col = stage0["chunk"]
    used = stage0["prefill_tokens"] + stage0["decode_reqs"]
    prefill = stage0["prefill_tokens"]
    decode_reqs = stage0["decode_reqs"]
    # one pass over the log (one decision per prefill microbatch, thousands per run)
    chunk_mbs: list[int] = []
    chunk_values: list[int] = []
    trim_mbs: list[int] = []
    trim_runs: list[int] = []
    for d in decisions:
        kind = d["type"]
        if kind == "chunk" and d["mb"] >= 0:
            chunk_mbs.append(d["mb"])
            chunk_values.append(d["chunk"])
        elif kind == "trim" and d["mb"] >= 0:
            trim_mbs.append(d["mb"])
            trim_runs.append(d["run"])
    c_mb = np.array(chunk_mbs, dtype=np.int64)
    c_val = np.array(chunk_values, dtype=np.int64)
    if np.unique(c_mb).size != c_mb.size:
        raise SimInvariantError("two chunk decisions claim the same microbatch")
    if np.any(c_mb >= mbs.size):
        _fail("chunk decision names a microbatch that never ran", c_mb[c_mb >= mbs.size])
    has_decision = np.zeros(mbs.size, bool)
    has_decision[c_mb] = True
    mismatch = has_decision != (prefill > 0)
    if mismatch.any():
        _fail("prefill microbatches and chunk decisions do not match one-to-one",
              np.flatnonzero(mismatch))
    bad = (chunk_col[c_mb] != c_val) | (used[c_mb] > c_val)
    if bad.any():
        _fail("microbatch does not fit the chunk its decision chose", c_mb[bad])
    t_mb = np.array(trim_mbs, dtype=np.int64)
    t_run = np.array(trim_runs, dtype=np.int64)
    if np.any(t_mb >= mbs.size):
        _fail("trim decision names a microbatch that never ran", t_mb[t_mb >= mbs.size])
    bad = (decode_reqs[t_mb] > t_run) | (prefill[t_mb] > 0)
    if bad.any():
        _fail("trimmed decode batch larger than its run set", t_mb[bad])


def check_all(specs: Sequence[RequestSpec], records: Sequence[RequestRecord],
              iterations: pd.DataFrame, decisions: Sequence[dict], stats: RunStats) -> None:
    check_requests(specs, records, stats)
    check_engine(stats)
    check_iterations(iterations)
    check_decisions(iterations, decisions)
