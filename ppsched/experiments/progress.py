"""A one-line progress bar on stderr (no dependency); thread-safe, silent when disabled."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    """On a terminal the line redraws in place; into a file or pipe, one line every few seconds."""

    PIPE_INTERVAL_S = 10.0

    def __init__(self, label: str, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0
        self.cached = 0
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_line = -self.PIPE_INTERVAL_S

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.total += n
            self._draw()

    def finish_one(self, *, cached: bool) -> None:
        with self._lock:
            self.done += 1
            self.cached += int(cached)
            self._draw()

    def close(self) -> None:
        if self.enabled and self.total:
            if self._tty:
                self.stream.write("\n")
            else:
                self._last_line = -self.PIPE_INTERVAL_S  # always report the final count
                self._draw()
            self.stream.flush()

    def _draw(self) -> None:
        if not self.enabled:
            return
        width = 24
        filled = int(width * self.done / self.total) if self.total else 0
        elapsed = time.monotonic() - self._start
        if not self._tty:
            if elapsed - self._last_line < self.PIPE_INTERVAL_S:
                return
            self._last_line = elapsed
        line = (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                f"{self.done}/{self.total} runs ({self.cached} cached) {elapsed:5.0f}s")
        self.stream.write(f"\r{line}" if self._tty else f"{line}\n")
        self.stream.flush()
