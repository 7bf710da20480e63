"""Stage timing that is true on the device the stage runs on (no sglang imports).

On CPU a forward is synchronous. With one intra-op thread (torch.get_num_threads() == 1, the CPU
recipe's OMP_NUM_THREADS=1 per rank) the whole forward runs on the scheduler thread, and that
thread's CPU time is the stage's compute (``cpu-thread``); the wall time beside it also counts
whatever else the OS ran on that core meanwhile -- the other rank, the tokenizer, the client, other
users of a shared box -- and is logged as ``wall_ms``. (Live: identical batches repeated
to 25-35% by wall time on the shared 2-core box, to 10-13% by thread time.) With more intra-op
threads the forward's work is spread over threads the scheduler's clock does not see: wall time
(``cpu-wall``).
On CUDA nothing inside ``run_batch`` waits for the GPU (a non-last PP rank returns right after
launching; SGLang's first wait is a later ``d2h_event.synchronize()``), so wall time there is
launch time (``launch-wall``): it is logged but never learned from. ``cuda-event`` records an
event pair on the stream the forward is launched on (SGLang runs ``run_batch`` inside
``forward_stream_ctx``) and reads ``elapsed_time`` only once ``end.query()`` says the GPU got
there — polled on later turns, never a synchronize, so the scheduler is never blocked.

A timer hands back *finished* stages: ``(payload, ms)`` in launch order, possibly several turns
after the launch. ``payload`` is whatever the caller captured at launch (the batch's shape,
iteration, slot), because the batch object is mutated by then.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

CPU_WALL = "cpu-wall"
CPU_THREAD = "cpu-thread"
CUDA_EVENT = "cuda-event"
LAUNCH_WALL = "launch-wall"
# source -> device types on which it is the stage's compute time. Anything else is refused.
LEARNABLE_ON = {CPU_WALL: frozenset({"cpu"}), CPU_THREAD: frozenset({"cpu"}),
                CUDA_EVENT: frozenset({"cuda"})}
MAX_PENDING = 4096  # event pairs awaiting the GPU; more means query() never turns true


def learnable(source: str, device_type: str) -> bool:
    """Whether a latency measured by ``source`` on ``device_type`` is the stage's compute time."""
    return device_type in LEARNABLE_ON.get(source, frozenset())


@dataclass(frozen=True, slots=True)
class FinishedStage:
    payload: Any
    ms: float
    source: str
    wall_ms: float | None = None  # cpu-thread: the wall time beside the thread's CPU time


class WallTimer:
    """Synchronous wall time: ``cpu-wall`` on CPU; ``launch-wall`` on an asynchronous device."""

    def __init__(self, source: str = CPU_WALL) -> None:
        self.source = source
        self._ready: list[FinishedStage] = []

    def begin(self) -> float:
        return time.perf_counter()

    def end(self, token: float, payload: Any) -> None:
        ms = 1000.0 * (time.perf_counter() - token)
        self._ready.append(FinishedStage(payload, ms, self.source))

    def poll(self) -> list[FinishedStage]:
        ready, self._ready = self._ready, []
        return ready

    @property
    def pending(self) -> int:
        return 0


class ThreadTimer(WallTimer):
    """The scheduler thread's CPU time (``cpu-thread``), with the wall time beside it."""

    def __init__(self) -> None:
        super().__init__(CPU_THREAD)

    def begin(self) -> tuple[float, float]:  # type: ignore[override]
        return time.thread_time(), time.perf_counter()

    def end(self, token: tuple[float, float], payload: Any) -> None:  # type: ignore[override]
        cpu = 1000.0 * (time.thread_time() - token[0])
        wall = 1000.0 * (time.perf_counter() - token[1])
        self._ready.append(FinishedStage(payload, cpu, self.source, wall))


class EventTimer:
    """CUDA events around the forward, read when the GPU has passed the end event.

    ``device_module`` is ``torch.cuda`` (SGLang's ``Scheduler.device_module``) or a fake with
    ``Event(enable_timing=True)`` and ``current_stream()``. Events record on ``stream`` when
    given (the overlap scheduler launches the forward on its own ``forward_stream`` inside
    ``run_batch``), else on the stream current at the call (PP: ``forward_stream_ctx`` is active).
    """

    source = CUDA_EVENT

    def __init__(self, device_module, stream=None) -> None:
        self._dm = device_module
        self._stream = stream
        self._pending: deque = deque()  # (start, end, payload), launch order = stream order
        self.dropped = 0  # pairs dropped because the queue overflowed (counted, logged)

    def begin(self):
        start = self._dm.Event(enable_timing=True)
        start.record(self._stream if self._stream is not None else self._dm.current_stream())
        return start

    def end(self, token, payload: Any) -> None:
        end = self._dm.Event(enable_timing=True)
        end.record(self._stream if self._stream is not None else self._dm.current_stream())
        self._pending.append((token, end, payload))
        if len(self._pending) > MAX_PENDING:
            self._pending.popleft()
            self.dropped += 1

    def poll(self) -> list[FinishedStage]:
        """Stages whose end event has completed, oldest first; never waits for the GPU."""
        ready: list[FinishedStage] = []
        while self._pending and self._pending[0][1].query():
            start, end, payload = self._pending.popleft()
            ready.append(FinishedStage(payload, float(start.elapsed_time(end)), self.source))
        return ready

    @property
    def pending(self) -> int:
        return len(self._pending)


def device_type_of(sched) -> str:
    """``cpu``, ``cuda``, ... of the scheduler's forward (SGLang's ``Scheduler.device``)."""
    device = getattr(sched, "device", None) or getattr(
        getattr(sched, "server_args", None), "device", None) or "cpu"
    return str(device).split(":", 1)[0]


def intra_op_threads() -> int | None:
    """torch's intra-op thread count in this process (None: torch not importable)."""
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def forward_stream_of(sched):
    """The stream ``run_batch`` launches on when it is not the current one: the overlap
    scheduler's ``forward_stream`` (PP runs without overlap, inside ``forward_stream_ctx``)."""
    return getattr(sched, "forward_stream", None) if getattr(sched, "enable_overlap", False) \
        else None


def timer_for(device_type: str, device_module=None, stream=None, *,
              intra_op_threads: int | None = None):
    """The timer that measures compute time on ``device_type``.

    CPU: the scheduler thread's CPU time with one intra-op thread, else wall time. CUDA: events
    (needs ``device_module``). Any other device: wall time under the ``launch-wall`` name, which
    the feeding path refuses (logged, never learned).
    """
    if device_type == "cpu":
        return ThreadTimer() if intra_op_threads == 1 else WallTimer(CPU_WALL)
    if device_type == "cuda" and device_module is not None and hasattr(device_module, "Event"):
        return EventTimer(device_module, stream)
    return WallTimer(LAUNCH_WALL)
