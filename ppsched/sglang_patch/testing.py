"""Policy factories for exercising the plugin (PPSCHED_CHUNK=py:ppsched.sglang_patch.testing:...).

``fault_switch_chunk`` wraps a real controller (spec in PPSCHED_TEST_INNER_CHUNK, default
``static:64``) and raises from ``decide`` once the file named by PPSCHED_TEST_FAULT_FILE exists:
a live test flips it at run time to check fault isolation on a running server.
"""

from __future__ import annotations

import os

from ppsched.core.policy import ChunkController, ChunkDecision
from ppsched.core.policy_context import PolicyContext
from ppsched.core.snapshots import ChunkSnapshot, StageMeasurement


class InjectedFault(RuntimeError):
    """Raised on purpose by FaultSwitchChunk."""


class FaultSwitchChunk:
    def __init__(self, inner: ChunkController, fault_file: str | None) -> None:
        self.inner = inner
        self.fault_file = fault_file
        self.name = f"fault-switch({inner.name})"

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        if self.fault_file and os.path.exists(self.fault_file):
            raise InjectedFault(f"injected controller fault ({self.fault_file} exists)")
        return self.inner.decide(snap)

    def observe(self, measurement: StageMeasurement) -> None:
        self.inner.observe(measurement)


def fault_switch_chunk(ctx: PolicyContext) -> FaultSwitchChunk:
    from ppsched.dcp.registry import build_chunk_controller

    inner = build_chunk_controller(os.environ.get("PPSCHED_TEST_INNER_CHUNK", "static:64"), ctx)
    return FaultSwitchChunk(inner, os.environ.get("PPSCHED_TEST_FAULT_FILE"))


def fail_on_rank_chunk(ctx: PolicyContext) -> ChunkController:
    """``static:64``, except on the PP rank named by PPSCHED_TEST_FAIL_RANK, where building it
    raises: a plugin that cannot enable on one rank only (a file missing on one node)."""
    from sglang.srt.runtime_context import get_parallel

    from ppsched.dcp.registry import build_chunk_controller

    rank = int(get_parallel().pp_rank)
    if str(rank) == os.environ.get("PPSCHED_TEST_FAIL_RANK", ""):
        raise InjectedFault(f"injected start-up failure on PP rank {rank}")
    return build_chunk_controller("static:64", ctx)
