"""Where simulator runs execute: this machine's processes (default) or a Ray cluster.

Every executor is a ``concurrent.futures.Executor`` whose ``submit(fn, *args)`` runs ``fn`` on a
worker and returns a Future; the Runner keys, caches and counts runs itself, so the choice of
executor changes where runs compute, never what they return.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass

from ppsched.core.errors import UserError

EXECUTOR_KINDS = ("local", "ray")


@dataclass(frozen=True, slots=True)
class ExecutorChoice:
    """``kind`` is "local" or "ray"; ``ray_address`` is None (start a local Ray), "auto" (join
    the running cluster) or a cluster address ("HOST:PORT")."""

    kind: str = "local"
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTOR_KINDS:
            raise UserError(f"--executor {self.kind!r}: expected one of "
                            f"{', '.join(EXECUTOR_KINDS)}")
        if self.ray_address is not None and self.kind != "ray":
            raise UserError(f"--ray-address {self.ray_address!r}: only used with --executor ray")
        if self.ray_address is not None and not self.ray_address.strip():
            raise UserError(f"--ray-address {self.ray_address!r}: expected 'auto' or a cluster "
                            "address HOST:PORT")


LOCAL = ExecutorChoice()


class InlineExecutor(Executor):
    """jobs=1 on the local executor: run in the calling thread (no pickling, easy to debug)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            future.set_exception(exc)
        return future


def default_jobs(jobs: int | None) -> int:
    return max(1, jobs or os.cpu_count() or 1)


def open_executor(choice: ExecutorChoice, jobs: int) -> Executor:
    """``jobs`` is the local pool's size, or the CPUs of a Ray instance started here."""
    if choice.kind == "ray":
        from ppsched.experiments.ray_executor import RayExecutor

        return RayExecutor(choice.ray_address, num_cpus=jobs)
    return InlineExecutor() if jobs == 1 else ProcessPoolExecutor(max_workers=jobs)
