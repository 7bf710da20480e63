"""Run simulator jobs in parallel with a cache; identical jobs in flight are computed once.

``Runner.submit`` returns a Future of ``RunOutcome``. Callers may block on futures from many
threads (the goodput searches do), while the simulations themselves run on an executor's workers
(local processes or Ray tasks, ``executors.py``). Workers only simulate (``compute``); this
process writes each result to the cache (``store``) as it arrives, so the cache folder need only
be visible here, every executor fills it the same way, and a run retried after its worker died
is still stored once.
"""

from __future__ import annotations

import importlib
import os
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.experiments.cache import RunCache, code_fingerprint, run_key
from ppsched.experiments.ds_twin import same_trajectory, twin_summary, twin_task
from ppsched.experiments.executors import LOCAL, ExecutorChoice, default_jobs, open_executor
from ppsched.experiments.progress import Progress
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.metrics.early_stop import StopRule

DEFAULT_SIMULATE = "ppsched.sim:simulate"


@dataclass(frozen=True, slots=True)
class RunTask:
    """One simulator run: a RunConfig (anything with ``to_dict()``) on one workload; with
    ``stop``, simulated only until its goodput verdict has certainly failed."""

    config: Any
    workload: WorkloadSpec
    keep_iterations: bool = False
    stop: StopRule | None = None

    @property
    def key(self) -> str:
        return run_key(self.config.to_dict(), self.workload.to_dict(),
                       stop=self.stop.to_dict() if self.stop is not None else None)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    key: str
    task: RunTask
    records: tuple[RequestRecord, ...]
    summary: dict[str, Any]
    cached: bool
    path: str

    def iterations(self) -> pd.DataFrame | None:
        path = Path(self.path) / "iterations.csv.gz"
        return pd.read_csv(path) if path.is_file() else None


def resolve(ref: str) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a worker sends back: the simulation's output, before it is cached."""

    records: tuple[RequestRecord, ...]
    summary: dict[str, Any]
    iterations: pd.DataFrame | None
    code: str  # the worker's code fingerprint: a cluster node on other code must not fill keys
    host: str


def compute(task: RunTask, simulate_ref: str | Callable[..., Any] = DEFAULT_SIMULATE
            ) -> RunResult:
    """Worker body: simulate one task (top-level: picklable).

    ``simulate_ref`` is "module:function" or a top-level function (tests pass a fake engine)."""
    simulate = resolve(simulate_ref) if isinstance(simulate_ref, str) else simulate_ref
    extra = {"stop": task.stop} if task.stop is not None else {}
    result = simulate(task.config, load(task.workload), **extra)
    iterations = result.iterations if task.keep_iterations else None
    return RunResult(tuple(result.records), result.summary, iterations, code_fingerprint(),
                     socket.gethostname())


def store(cache_root: str | os.PathLike[str], key: str, task: RunTask, result: RunResult
          ) -> RunOutcome:
    """Driver side: write a computed run to the cache under the submitter's key (source edits
    mid-sweep must not re-key runs)."""
    if result.code != code_fingerprint():
        raise UserError(f"a run was simulated on {result.host} by ppsched code {result.code}, "
                        f"but this driver's code is {code_fingerprint()}: install the same "
                        "ppsched commit on every Ray node")
    meta = {"config": task.config.to_dict(), "workload": task.workload.to_dict(),
            "stop": task.stop.to_dict() if task.stop is not None else None}
    entry = RunCache(cache_root).put(key, result.records, result.summary, meta, result.iterations)
    return RunOutcome(key, task, result.records, result.summary, False, str(entry.path))


class Runner:
    def __init__(self, cache_root: str | os.PathLike[str], *, jobs: int | None = None,
                 simulate_ref: str | Callable[..., Any] = DEFAULT_SIMULATE,
                 progress: Progress | None = None,
                 executor: ExecutorChoice | Executor = LOCAL) -> None:
        """``executor``: a choice (local pool of ``jobs`` or Ray) or a ready Executor (tests)."""
        self.cache = RunCache(cache_root)
        self.jobs = default_jobs(jobs)
        self.simulate_ref = simulate_ref
        self.progress = progress or Progress("runs", enabled=False)
        self._executor = (executor if isinstance(executor, Executor)
                          else open_executor(executor, self.jobs))
        self._futures: dict[str, tuple[Future, bool]] = {}  # key -> (future, has iterations)
        self._lock = threading.Lock()
        self.computed = 0
        self.reused = 0
        self.same_as_twin = 0  # runs answered by the same run with DS switched (``ds_twin``)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self.progress.close()

    def submit(self, task: RunTask) -> Future:
        key = task.key
        with self._lock:
            known = self._futures.get(key)
            if known is not None and (known[1] or not task.keep_iterations):
                return known[0]
            cached = self.cache.get(key, need_iterations=task.keep_iterations)
            future: Future = Future()
            twin = self._twin_future(task) if cached is None else None
            if cached is not None:
                future.set_result(RunOutcome(key, task, cached.records, cached.summary, True,
                                             str(cached.path)))
                self.reused += 1
                self.progress.add()
                self.progress.finish_one(cached=True)
            elif twin is None:
                self._compute(task, key, future)
            self._futures[key] = (future, task.keep_iterations)
        if twin is not None:  # outside the lock: a finished twin calls back at once
            twin.add_done_callback(partial(self._from_twin, task, key, future))
        return future

    def _twin_future(self, task: RunTask) -> Future | None:
        """The same run with DS switched, if this Runner already has it (running or done)."""
        other = twin_task(task)
        if other is None:
            return None
        known = self._futures.get(other.key)
        if known is None or (task.keep_iterations and not known[1]):
            return None
        return known[0]

    def _compute(self, task: RunTask, key: str, future: Future) -> None:
        # Submitted before it is counted: an executor that cannot start (no Ray cluster at
        # --ray-address) leaves no half-drawn progress line above its error.
        remote = self._executor.submit(compute, task, self.simulate_ref)
        self.computed += 1
        self.progress.add()
        remote.add_done_callback(partial(self._store, task, key, future))

    def _from_twin(self, task: RunTask, key: str, future: Future, twin: Future) -> None:
        """The twin's records when DS could not have acted on the pair (``ds_twin``), else the
        run simulated on its own."""
        try:
            outcome: RunOutcome = twin.result()
            same = same_trajectory(task, outcome.summary)
        except BaseException:  # noqa: BLE001 - the run's own simulation reports its error
            same = False
        if not same:
            with self._lock:
                self._compute(task, key, future)
            return
        try:
            summary = twin_summary(task, outcome.key, outcome.summary)
            result = RunResult(outcome.records, summary, outcome.iterations(),
                               code_fingerprint(), socket.gethostname())
            outcome = store(self.cache.root, key, task, result)
            with self._lock:  # callbacks of different runs may finish at once
                self.same_as_twin += 1
            future.set_result(outcome)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            future.set_exception(exc)

    def _store(self, task: RunTask, key: str, future: Future, remote: Future) -> None:
        if remote.cancelled():  # shut down before it ran (Ctrl-C): not a finished run
            future.cancel()
            return
        try:
            outcome = store(self.cache.root, key, task, remote.result())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            future.set_exception(exc)
        else:
            future.set_result(outcome)
        finally:
            self.progress.finish_one(cached=False)

    def run_all(self, tasks: Iterable[RunTask]) -> list[RunOutcome]:
        futures = [self.submit(t) for t in tasks]
        return [f.result() for f in futures]
