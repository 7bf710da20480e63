"""A ``concurrent.futures.Executor`` whose calls run as Ray tasks (``pip install 'ppsched[ray]'``).

Each ``submit`` becomes one Ray task; a driver thread waits on the task refs and resolves the
Futures. A worker that dies (killed, out of memory, node lost) is retried by Ray itself
(``max_retries``) and, once those are spent, resubmitted here ``resubmits`` more times. A Future is
resolved exactly once, so a task retried after its worker died still yields one result.
Exceptions raised by the function itself are not retried: they reach the waiter as they were
raised (a UserError stays a UserError).
"""

from __future__ import annotations

import logging
import sys
import threading
from concurrent.futures import Executor, Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

from ppsched.core.errors import UserError

INSTALL_HINT = "pip install 'ppsched[ray]'  (or: pip install ray)"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(f"--executor ray: Ray is not installed; install it with {INSTALL_HINT}"
                        ) from None
    return ray


def _call(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The Ray task's body (top level, so workers import it rather than unpickle code)."""
    return fn(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class _Call:
    fn: Any
    args: tuple
    kwargs: dict


class RayExecutor(Executor):
    """``address`` None starts a Ray instance here with ``num_cpus``; "auto" or "HOST:PORT" joins a
    running cluster. Ray is started (or joined) at the first submit, so a sweep served wholly
    from the cache never waits for it. If Ray is already initialised in this process (a test, a
    notebook), it is used as it is and left running on shutdown."""

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None,
                 max_retries: int = 3, resubmits: int = 2, poll_s: float = 0.1) -> None:
        ray = import_ray()  # a missing Ray is reported at once, not at the first run
        self._ray = ray
        self._address = address
        self._num_cpus = num_cpus
        self._owns_ray = False
        self._remote: Any = None
        self._retryable = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                           ray.exceptions.ObjectLostError, ray.exceptions.OutOfMemoryError)
        self.max_retries = max_retries
        self.resubmits = resubmits
        self.resubmitted = 0  # driver-side resubmissions (Ray's own retries are not counted)
        self._poll_s = poll_s
        self._pending: dict[Any, tuple[Future, _Call, int]] = {}  # ref -> (future, call, left)
        self._cond = threading.Condition()
        self._closing = False
        self._collector: threading.Thread | None = None

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        future: Future = Future()
        with self._cond:
            if self._closing:
                raise RuntimeError("cannot submit to a RayExecutor after shutdown")
            self._start()
            self._launch(future, _Call(fn, args, kwargs), self.resubmits)
            if self._collector is None:
                self._collector = threading.Thread(target=self._collect, name="ray-collector",
                                                   daemon=True)
                self._collector.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closing = True
            dropped = list(self._pending.items()) if cancel_futures else []
            for ref, _ in dropped:
                del self._pending[ref]
            self._cond.notify_all()
        for ref, (future, _, _) in dropped:
            self._ray.cancel(ref)
            future.cancel()
        if wait and self._collector is not None:
            self._collector.join()
        if self._owns_ray:
            self._ray.shutdown()

    def _start(self) -> None:
        if self._remote is not None:
            return
        if not self._ray.is_initialized():
            _init(self._ray, self._address, self._num_cpus)
            self._owns_ray = True
        self._remote = self._ray.remote(_call).options(max_retries=self.max_retries,
                                                       retry_exceptions=False)

    def _launch(self, future: Future, call: _Call, resubmits_left: int) -> None:
        ref = self._remote.remote(call.fn, call.args, call.kwargs)
        with self._cond:
            self._pending[ref] = (future, call, resubmits_left)
            self._cond.notify_all()

    def _collect(self) -> None:
        try:
            self._collect_until_closed()
        except BaseException as exc:  # noqa: BLE001 - Ray itself failed: fail every waiter
            with self._cond:
                lost = list(self._pending.values())
                self._pending.clear()
                self._collector = None  # the next submit starts a new one (or fails itself)
            for future, _, _ in lost:
                _resolve(future, exception=exc)

    def _collect_until_closed(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return  # closing and nothing left
                refs = list(self._pending)
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=self._poll_s)
            for ref in ready:
                self._settle(ref)

    def _settle(self, ref: Any) -> None:
        with self._cond:
            entry = self._pending.pop(ref, None)
        if entry is None:
            return  # cancelled by shutdown meanwhile
        future, call, left = entry
        ray_exceptions = self._ray.exceptions
        try:
            value = self._ray.get(ref)
        except ray_exceptions.RayTaskError as exc:  # the function raised: not retried
            _resolve(future, exception=_original(exc))
        except self._retryable as exc:
            if left > 0:
                self.resubmitted += 1
                print(f"ray: a worker was lost ({type(exc).__name__}); resubmitting the run "
                      f"({left} resubmission(s) left)", file=sys.stderr)
                self._launch(future, call, left - 1)
            else:
                _resolve(future, exception=exc)
        except ray_exceptions.RayError as exc:
            _resolve(future, exception=exc)
        else:
            _resolve(future, value=value)


def _init(ray: Any, address: str | None, num_cpus: int | None) -> None:
    try:
        if address is None:  # "local": never join another user's cluster by accident
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                     logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    except ConnectionError as exc:
        raise UserError(f"--ray-address {address!r}: no Ray cluster reachable ({exc}); start "
                        "one with `ray start --head`, or leave out --ray-address to start a "
                        "local Ray") from None


def _original(exc: Any) -> BaseException:
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _resolve(future: Future, *, value: Any = None, exception: BaseException | None = None
             ) -> None:
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass  # cancelled by its waiter meanwhile
