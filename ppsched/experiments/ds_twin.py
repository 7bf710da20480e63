"""A run with delay scheduling that DS could not have changed is its run without DS.

DS (``DelayTrimmer``) holds nobody while every slot's decode set is at most the ladder's first
boundary b0: the pipeline mean is then at most b0 too, whose efficient size is b0 itself, so
``settled_reason`` ends every decode turn before any request is read. On such a turn the engine
runs the slot's decode set in arrival order, where the run without DS runs it in the order the
requests joined; the two orders are the same while every set stays in arrival order. The
engine's other DS-only step (a flush of stage measurements before the decode turn) finds
nothing new: every turn flushed at the same instant already. So when the run without DS reports
(summary ``decode_sets``) that no slot ever held more than b0 decodes and every set stayed in
arrival order, the run with DS follows the same trajectory, request for request: the Runner takes
its records instead of simulating it again (tests/test_ds_twin.py checks this against simulated
pairs, including runs where DS holds and runs with retractions). Once a twin could not answer a
run of some kind (``twin_family``), the Runner simulates that kind's runs with DS directly.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Protocol, TypeVar


class RunTask(Protocol):
    """What this reads of ``runner.RunTask`` (which imports this module)."""

    config: Any
    workload: Any


Task = TypeVar("Task", bound=RunTask)


def twin_task(task: Task) -> Task | None:
    """The same run without DS, for a run with ``--ds on``; None for any other run."""
    config = task.config
    if getattr(config, "ds", "off") != "on" or not hasattr(config, "policy_context"):
        return None
    return replace(task, config=replace(config, ds="off"))


def twin_family(task: RunTask) -> tuple:
    """Runs alike but for rate, seed and SLO. Where DS acted on one of them (it will again at
    similar loads) the Runner stops asking twins: a twin that cannot answer costs a run."""
    c, w = task.config, task.workload
    return (c.model, c.hardware, c.parallel, c.chunk, w.name, w.trace_file, w.replay)


def same_trajectory(task: RunTask, twin_summary: dict[str, Any]) -> bool:
    """True when the twin's decode sets show that DS could never have acted on ``task``."""
    sets = twin_summary.get("decode_sets")
    if not isinstance(sets, dict):
        return False  # an engine that does not report them (a test's fake, an older entry)
    return bool(sets.get("in_arrival_order")) and \
        int(sets.get("max_per_slot", 1 << 62)) <= first_boundary(task.config)


def twin_summary(task: RunTask, twin_key: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The twin's summary as the run with DS: its own config, and where its figures came from."""
    out = dict(summary)
    out["config"] = task.config.to_dict()
    out["ds_same_as_run"] = twin_key
    return out


def first_boundary(config: Any) -> int:
    return _first_boundary(config.policy_context())


@lru_cache(maxsize=32)
def _first_boundary(ctx: Any) -> int:
    from ppsched.delay_sched.sources import resolve_boundaries

    return resolve_boundaries(ctx)[0]
