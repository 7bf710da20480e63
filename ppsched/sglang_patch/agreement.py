"""Start-up agreement: the plugin acts only if every rank of the server enabled it, alike.

Every rank reports ``ok:<config fingerprint>`` or ``fail:<reason>`` under its world rank in the
key-value store torch.distributed already runs for the server (the one behind
``--dist-init-addr``, so it spans nodes). The deciding rank (PP 0 / TP 0) polls, without
blocking, at most every ``poll_every_s``; it decides "on" once every rank reported ok with the
same fingerprint, "off" as soon as one failed or differs, or when ``timeout_s`` passes with a
rank silent (no plugin there). It publishes the verdict; the other ranks read it. Until "on",
the deciding rank sends no decision, so no rank is ever sent one it cannot apply.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Protocol

READY = "ppsched/ready/{rank}"
VERDICT = "ppsched/verdict"
DEFAULT_TIMEOUT_S = 60.0


class Store(Protocol):
    def set(self, key: str, value: str) -> None: ...
    def get(self, key: str) -> bytes: ...
    def check(self, keys: list[str]) -> bool: ...


def fingerprint(config: dict) -> str:
    """Settings that must match on every rank (the log path may differ per node)."""
    shared = {k: v for k, v in config.items() if k != "decision_log"}
    return hashlib.sha1(json.dumps(shared, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass
class Agreement:
    store: Store | None
    world_rank: int
    world_size: int
    decider: bool
    timeout_s: float = DEFAULT_TIMEOUT_S
    poll_every_s: float = 0.5
    clock: object = time.monotonic
    verdict: bool | None = None  # None: not known yet
    reason: str = ""
    _started: float = field(default=0.0)
    _next_poll: float = field(default=0.0)

    def report(self, ok: bool, detail: str) -> None:
        """This rank's outcome; ``detail`` is the config fingerprint or the failure."""
        self._started = self.clock()
        if self.store is None:
            if self.world_size == 1:
                self.verdict, self.reason = ok, "" if ok else detail
            else:
                self.verdict, self.reason = False, "no store shared by the ranks to agree on"
            return
        self.store.set(READY.format(rank=self.world_rank), ("ok:" if ok else "fail:") + detail)

    def poll(self) -> bool | None:
        """The verdict if known (cheap when known; one store round trip per poll otherwise)."""
        if self.verdict is not None or self.store is None:
            return self.verdict
        now = self.clock()
        if now < self._next_poll:
            return None
        self._next_poll = now + self.poll_every_s
        if self.decider:
            self._decide(now)
        elif self.store.check([VERDICT]):
            text = self.store.get(VERDICT).decode()
            self.verdict = text == "on"
            self.reason = "" if self.verdict else text.removeprefix("off:")
        return self.verdict

    def _decide(self, now: float) -> None:
        keys = [READY.format(rank=r) for r in range(self.world_size)]
        present = [k for k in keys if self.store.check([k])]
        values = {k: self.store.get(k).decode() for k in present}
        failed = [f"rank {k.rsplit('/', 1)[1]}: {v[5:]}" for k, v in values.items()
                  if v.startswith("fail:")]
        prints = {v for v in values.values() if v.startswith("ok:")}
        if failed:
            self._publish(False, "; ".join(failed))
        elif len(prints) > 1:
            self._publish(False, "ranks run different plugin settings")
        elif len(present) == len(keys):
            self._publish(True, "")
        elif now - self._started >= self.timeout_s:
            silent = [k.rsplit("/", 1)[1] for k in keys if k not in values]
            self._publish(False, f"rank(s) {', '.join(silent)} never reported within "
                                 f"{self.timeout_s:g} s (ppsched missing, unconfigured or off "
                                 "there)")

    def _publish(self, on: bool, reason: str) -> None:
        self.verdict, self.reason = on, reason
        self.store.set(VERDICT, "on" if on else "off:" + reason)


def over_torch_store() -> Agreement:
    """The agreement over torch.distributed's store (spans nodes); no store: off unless alone.
    Timeout: PPSCHED_AGREE_TIMEOUT_S, else DEFAULT_TIMEOUT_S."""
    timeout = float(os.environ.get("PPSCHED_AGREE_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    try:
        import torch.distributed as dist

        if not dist.is_initialized():
            return Agreement(None, 0, 1, True, timeout)
        from torch.distributed.distributed_c10d import _get_default_store

        rank, size = dist.get_rank(), dist.get_world_size()
        try:
            store = _get_default_store()
        except Exception:  # noqa: BLE001
            store = None
        return Agreement(store, rank, size, rank == 0, timeout)
    except Exception:  # noqa: BLE001
        return Agreement(None, 0, 2, True, timeout)  # unknown layout: never act alone
