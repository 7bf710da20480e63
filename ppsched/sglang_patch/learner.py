"""ALP's learning off the scheduler's turn (no sglang imports).

Learning one stage (ALP's prediction of it for the log, then ``controller.observe``: an RLS step
and its anchors) costs ~25 us of pure Python, a third of a whole plugin turn. Nothing on the turn
needs it at once: the next decision may as well see the stage a few milliseconds later. So the
turn only queues the finished stage (a deque append); a thread learns queued stages every
``LEARN_EVERY_S`` and hands the ``stage`` record to the decision log. On a GPU the scheduler
thread spends much of each turn waiting for the device, which is when this thread runs; on a CPU
server the forward's torch ops release the GIL. The controller is only touched under ``lock``,
which ``decide`` holds too, so a decision never sees half an update; the thread releases the GIL
after every stage so it never holds the scheduler up for more than one update.

``busy_s``: the thread's CPU seconds (the benchmark prints them beside the turn).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from ppsched.core.snapshots import StageMeasurement

logger = logging.getLogger("ppsched.sglang_patch")


class StageLearner:
    LEARN_EVERY_S = 0.01

    def __init__(self, controller, on_learned: Callable, on_error: Callable[[BaseException], None],
                 *, background: bool = True) -> None:
        """``on_learned(alp_ms, *record)`` writes the stage record once ALP predicted the stage;
        ``on_error(exc)`` is told once if learning fails (learning then stops). Not
        ``background``: every stage is learned at once, on the caller's thread."""
        self.controller = controller
        self.lock = threading.Lock()
        self._on_learned = on_learned
        self._on_error = on_error
        self._queue: deque = deque()
        self._drain_lock = threading.Lock()  # one drainer at a time (thread or caller)
        self.busy_s = 0.0
        self.broken = False
        self.background = background
        if background:
            threading.Thread(target=self._loop, name="ppsched-learner", daemon=True).start()
            atexit.register(self.drain)

    def submit(self, shape, measurement: StageMeasurement | None, record: tuple) -> None:
        """Queue one finished stage (``shape``: its BatchShape; ``measurement`` None = log it,
        do not learn from it; ``record``: ``on_learned``'s other arguments)."""
        self._queue.append((shape, measurement, record))
        if not self.background:
            self.drain()

    def _loop(self) -> None:
        while True:
            time.sleep(self.LEARN_EVERY_S)
            if self._queue:
                self.drain()

    def drain(self) -> None:
        """Learn every queued stage now, in order."""
        start = time.thread_time()
        with self._drain_lock:
            while self._queue:
                self._learn(*self._queue.popleft())
                if self.background:
                    time.sleep(0)  # the scheduler thread may take the GIL between stages
        self.busy_s += time.thread_time() - start

    def _learn(self, shape, measurement: StageMeasurement | None, record: tuple) -> None:
        alp_ms = None  # ALP's prediction of this very batch before it learns from it
        if not self.broken:
            try:
                with self.lock:
                    predictor = getattr(self.controller, "predictor", None)
                    if predictor is not None and shape.kind != "empty":
                        alp_ms = round(predictor.predict(shape), 3)
                    if measurement is not None:
                        self.controller.observe(measurement)
            except Exception as exc:  # noqa: BLE001 - learning must never stop serving
                self.broken = True
                self._on_error(exc)
        self._on_learned(alp_ms, *record)
