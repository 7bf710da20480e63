"""A run with delay scheduling that DS could not have changed is the same run without DS.

DS (``DelayTrimmer``) holds nobody while every slot's decode set is at most the ladder's first
boundary b0: the pipeline mean is then at most b0 too, whose efficient size is b0 itself, so
``settled_reason`` ends every decode turn before any request is read. On such a turn the engine
runs the slot's decode set in arrival order, where the run without DS runs it in the order the
requests joined; the two orders are the same while every set stays in arrival order. The
engine's other DS-only step (a flush of stage measurements before the decode turn) finds
nothing new: every turn flushed at the same instant already. So when either run of a pair
reports (summary ``decode_sets``) that no slot ever held more than b0 decodes and every set
stayed in arrival order, both follow the same trajectory, request for request, and the Runner
answers the second one submitted with the first one's records (tests/test_ds_twin.py checks
this against simulated pairs, including runs where DS holds and runs with retractions). It
never simulates a run only to answer its twin: a run whose twin is not already running or done
is simulated.
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
    """The same run with ``--ds`` switched (on <-> off); None for a config without DS."""
    config = task.config
    ds = getattr(config, "ds", None)
    if ds not in ("on", "off") or not hasattr(config, "policy_context"):
        return None
    return replace(task, config=replace(config, ds="off" if ds == "on" else "on"))


def same_trajectory(task: RunTask, twin_summary: dict[str, Any]) -> bool:
    """True when the twin's decode sets show that DS could never have acted on the pair."""
    sets = twin_summary.get("decode_sets")
    if not isinstance(sets, dict) or twin_summary.get("ds_holds") != 0:
        return False  # an engine that does not report them (a test's fake, an older entry)
    ds_on = replace(task.config, ds="on")
    return bool(sets.get("in_arrival_order")) and \
        int(sets.get("max_per_slot", 1 << 62)) <= first_boundary(ds_on)


def twin_summary(task: RunTask, twin_key: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The twin's summary as this run's: its own config, and where its figures came from."""
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
