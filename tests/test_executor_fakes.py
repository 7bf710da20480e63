"""Fake engines for the executor tests; they run inside Ray workers, so they share state through
files, not module globals. Each logs one line per call: ``chunk rate pid start end``."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import test_experiments_fakes as fakes

from ppsched.core.errors import UserError


def nominal_rate(workload) -> float:
    """The Poisson rate the workload was generated at (its ``arrival`` names it)."""
    return float(re.search(r"rate=(\S+)", workload.arrival).group(1))


def _log(folder: Path, config, workload, start: float) -> None:
    with open(folder / "calls.log", "a") as log:  # one short append per call: atomic
        log.write(f"{config.chunk} {nominal_rate(workload)} {os.getpid()} {start} "
                  f"{time.time()}\n")


def calls(folder: Path) -> list[tuple[str, float, int, float, float]]:
    path = folder / "calls.log"
    lines = path.read_text().split("\n") if path.exists() else []
    return [(c, float(r), int(p), float(s), float(e))
            for c, r, p, s, e in (line.split() for line in lines if line)]


def logged_simulate(folder: Path, sleep_s: float, config, workload, stop=None):
    start = time.time()
    time.sleep(sleep_s)  # long enough for two workers' runs to overlap
    result = fakes.fake_simulate(config, workload)
    _log(folder, config, workload, start)
    return result


def dying_simulate(folder: Path, victim: tuple[str, float], config, workload, stop=None):
    """The first run of ``victim`` (chunk, rate) SIGKILLs its own worker mid-run."""
    start = time.time()
    if (config.chunk, nominal_rate(workload)) == victim:
        try:
            (folder / "killed").touch(exist_ok=False)
        except FileExistsError:
            pass
        else:
            _log(folder, config, workload, start)
            os.kill(os.getpid(), signal.SIGKILL)
    result = fakes.fake_simulate(config, workload)
    _log(folder, config, workload, start)
    return result


def failing_simulate(victim: tuple[str, float], config, workload, stop=None):
    if (config.chunk, nominal_rate(workload)) == victim:
        raise UserError(f"fake engine: refusing {victim}")
    return fakes.fake_simulate(config, workload)
