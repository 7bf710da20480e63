"""Launch and stop SGLang's router (``sglang-router``) in front of running SGLang servers.

The router is the registry's ``sglang-router`` wheel (a compiled gateway behind a Python
launcher), installed into the SGLang venv by scripts/setup_sglang_cpu.sh. It runs in its own
process group so ``stop()`` ends it however it hangs; it logs to a file the caller reads (worker
health, circuit-breaker transitions, retries).
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ppsched.sglang_patch.cpu_server import Server

POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "manual")


@dataclass(frozen=True)
class RouterSpec:
    """One router: the workers it fronts, its policy, its ports, extra launcher flags."""

    worker_urls: tuple[str, ...]
    policy: str
    port: int
    prometheus_port: int
    extra: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.worker_urls:
            raise ValueError("RouterSpec.worker_urls is empty; expected at least one worker URL")
        if self.policy not in POLICIES:
            raise ValueError(f"RouterSpec.policy {self.policy!r} is not one of {POLICIES}")
        for name in ("port", "prometheus_port"):
            value = getattr(self, name)
            if not 0 < value < 65536:
                raise ValueError(f"RouterSpec.{name} {value} is not a TCP port (1..65535)")

    def args(self) -> list[str]:
        """``python -m sglang_router.launch_router`` arguments, loopback only."""
        return ["--worker-urls", *self.worker_urls, "--policy", self.policy,
                "--host", "127.0.0.1", "--port", str(self.port),
                "--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.prometheus_port),
                *self.extra]


@dataclass
class Router:
    proc: subprocess.Popen
    spec: RouterSpec
    log_path: Path
    _log_fh: object = field(repr=False, default=None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.spec.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        """The router answers /readiness with 200 (it has a healthy worker to route to).
        Anything else, an answer that is not HTTP included, is "not yet"
        (see ``cpu_server.Server.healthy``)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.spec.port, timeout=5)
        try:
            conn.request("GET", "/readiness")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL what is left after ``grace_s``."""
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    self.proc.wait(wait_s)
                except subprocess.TimeoutExpired:
                    pass
        if self._log_fh is not None:
            self._log_fh.close()


def launch_router(python: Path, spec: RouterSpec, log_path: Path,
                  timeout_s: float = 120.0) -> Router:
    """Start the router and wait until it is ready (or raise with its log's tail)."""
    fh = log_path.open("w")
    proc = subprocess.Popen([str(python), "-m", "sglang_router.launch_router", *spec.args()],
                            cwd="/", stdout=fh, stderr=subprocess.STDOUT,
                            env={**os.environ, "NO_COLOR": "1"}, start_new_session=True)
    router = Router(proc, spec, log_path, fh)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            router.stop()
            raise RuntimeError(f"sglang-router exited with {proc.returncode} before ready; log:\n"
                               + router.log_text()[-4000:])
        if router.ready():
            return router
        time.sleep(0.5)
    router.stop()
    raise RuntimeError(f"sglang-router not ready after {timeout_s:g} s; log:\n"
                       + router.log_text()[-4000:])


def kill_now(server: Server) -> float:
    """SIGKILL every process of a server's group (a box that dies); returns the kill time
    (``time.time()``)."""
    t = time.time()
    try:
        os.killpg(server.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return t
