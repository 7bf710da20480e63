"""Launch and stop a real SGLang server on CPU (the live tests' harness; also handy by hand).

Needs the venv built by scripts/setup_sglang_cpu.sh (``sglang_python()`` finds it). The server
runs in its own process group so ``stop()`` kills every stage even if SGLang hangs.
"""

from __future__ import annotations

import http.client
import os
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ppsched.sglang_patch.http_client import Endpoint, get_json

DEFAULT_VENV = Path.home() / ".cache" / "ppsched" / "sglang-venv"
REPO = Path(__file__).resolve().parents[2]


def sglang_python() -> Path | None:
    """The python that runs SGLang: PPSCHED_SGLANG_PYTHON (e.g. a GPU install), else the CPU
    venv built by scripts/setup_sglang_cpu.sh (PPSCHED_SGLANG_VENV or the default place)."""
    explicit = os.environ.get("PPSCHED_SGLANG_PYTHON")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    venv = Path(os.environ.get("PPSCHED_SGLANG_VENV") or DEFAULT_VENV)
    py = venv / "bin" / "python"
    return py if py.is_file() and (venv / ".ppsched-recipe").is_file() else None


def free_port(lo: int | None = None, hi: int | None = None) -> int:
    """A free loopback port: the first free one in [lo, hi] when given, else inside
    ``PPSCHED_PORT_RANGE`` (``LO-HI``, shared test machines) when set, else any (the OS picks)."""
    if lo is None or hi is None:
        lo_hi = os.environ.get("PPSCHED_PORT_RANGE", "").strip()
        if not lo_hi:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]
        first, _, last = lo_hi.partition("-")
        lo, hi = int(first), int(last)
    for port in range(lo, hi + 1, 7):  # spaced: SGLang also takes port+1..
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {lo}..{hi}")


def make_tiny_model(python: Path, out: Path, dtype: str = "float32") -> Path:
    subprocess.run([str(python), str(REPO / "scripts" / "make_tiny_qwen2.py"), str(out),
                    "--dtype", dtype], check=True, capture_output=True, timeout=300)
    return out


def cpu_args(model: Path, port: int, *, pp_size: int = 2, chunk: int = 128,
             max_running: int = 16, max_total_tokens: int = 8192, context: int = 1024,
             extra: tuple[str, ...] = (), tokenizer: Path | None = None) -> list[str]:
    """The CPU recipe of docs/SGLANG_PLUGIN.md (torch_native attention, no CUDA graphs).

    ``tokenizer``: a folder from scripts/make_offline_tokenizer.py; the server then streams text
    (for text clients such as bench_serving) instead of running with --skip-tokenizer-init.

    With PPSCHED_LIVE_GPU=1 the CPU-only flags are left out and PPSCHED_LIVE_EXTRA_ARGS (shell
    words) are appended: the live tests then run on a GPU install against a real model.
    """
    if os.environ.get("PPSCHED_LIVE_GPU") == "1":
        return ["--model-path", str(model), "--skip-tokenizer-init", "--pp-size", str(pp_size),
                "--max-running-requests", str(max_running), "--context-length", str(context),
                "--chunked-prefill-size", str(chunk), "--host", "127.0.0.1", "--port", str(port),
                *shlex.split(os.environ.get("PPSCHED_LIVE_EXTRA_ARGS", "")), *extra]
    text = ("--tokenizer-path", str(tokenizer)) if tokenizer else ("--skip-tokenizer-init",)
    return ["--model-path", str(model), "--device", "cpu", *text,
            "--pp-size", str(pp_size), "--attention-backend", "torch_native",
            "--sampling-backend", "pytorch", "--max-total-tokens", str(max_total_tokens),
            "--context-length", str(context), "--max-running-requests", str(max_running),
            "--chunked-prefill-size", str(chunk), "--cuda-graph-backend-decode", "disabled",
            "--cuda-graph-backend-prefill", "disabled", "--sleep-on-idle",
            "--host", "127.0.0.1", "--port", str(port), *extra]


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    log_path: Path
    _log_fh: object = field(repr=False, default=None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        """/health answers 200. Anything else is "not yet", an answer that is not HTTP included:
        polling a loopback port inside the OS's ephemeral range before the server binds it can
        connect the client's socket to itself (TCP self-connect), which reads its own request
        back ("GET /health HTTP/1.1" as the status line; seen in CI, 2026-12)."""
        try:
            get_json(Endpoint("127.0.0.1", self.port), "/health", timeout_s=5)
            return True
        except (OSError, ValueError, http.client.HTTPException):
            return False

    def stop(self, grace_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:  # stages left behind by a hung parent
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if self._log_fh is not None:
            self._log_fh.close()


def start(python: Path, args: list[str], log_path: Path, env: dict[str, str] | None = None
          ) -> Server:
    """Start ``python -m sglang.launch_server args`` without waiting (e.g. a second node)."""
    port = int(args[args.index("--port") + 1])
    cpu = {} if os.environ.get("PPSCHED_LIVE_GPU") == "1" else \
        {"SGLANG_USE_CPU_ENGINE": "1", "SGLANG_CPU_OMP_THREADS_BIND": "0|1", "OMP_NUM_THREADS": "1"}
    full_env = {**os.environ, **cpu, **(env or {})}
    fh = log_path.open("w")
    proc = subprocess.Popen([str(python), "-m", "sglang.launch_server", *args], cwd="/",
                            stdout=fh, stderr=subprocess.STDOUT, env=full_env,
                            start_new_session=True)
    return Server(proc, port, log_path, fh)


def launch(python: Path, args: list[str], log_path: Path, env: dict[str, str] | None = None,
           timeout_s: float = 240.0) -> Server:
    """Start ``python -m sglang.launch_server args`` and wait for /health (or raise)."""
    server = start(python, args, log_path, env)
    proc = server.proc
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"SGLang exited with {proc.returncode} before /health; log:\n"
                               + server.log_text()[-4000:])
        if server.healthy():
            return server
        time.sleep(1.0)
    server.stop()
    raise RuntimeError(f"SGLang not healthy after {timeout_s:g} s; log:\n"
                       + server.log_text()[-4000:])
