"""Discrete-event simulator of an SGLang-style PP (and TP) engine on a measured cost model.

``simulate`` is imported lazily so that ``ppsched.sim.cost`` can be used on its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SimInvariantError", "SimResult", "simulate"]


def __getattr__(name: str) -> Any:
    if name == "simulate":
        from ppsched.sim.engine.simulate import simulate

        return simulate
    if name == "SimResult":
        from ppsched.sim.engine.result import SimResult

        return SimResult
    if name == "SimInvariantError":
        from ppsched.sim.invariants import SimInvariantError

        return SimInvariantError
    raise AttributeError(f"module 'ppsched.sim' has no attribute {name!r}")
