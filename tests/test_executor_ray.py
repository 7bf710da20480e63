"""--executor ray: same CSVs as the local pool, killed workers retried, interrupted sweeps resume.

One local Ray (2 CPUs) serves the whole module. Skipped only when the ``ray`` extra is missing.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from functools import partial
from pathlib import Path

import pytest
import test_executor_fakes as xfakes

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.experiments.cache import RunCache
from ppsched.experiments.goodput import SearchSettings, goodput_table
from ppsched.experiments.plan import Setup
from ppsched.experiments.ray_executor import RayExecutor
from ppsched.experiments.runner import Runner
from ppsched.experiments.sweep import sweep
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.metrics.steady import Window

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed (pip install 'ppsched[ray]'; make setup does)")

TESTS = Path(__file__).resolve().parent
WINDOW = ["--warmup-s", "5", "--measure-s", "20", "--cooldown-s", "5"]  # tiny: speed, not truth
SWEEP = ["sweep", "--policies", "static-2048,predictive", "--rates", "0.5,1.5", *WINDOW,
         "--no-progress"]
GOODPUT = ["goodput", "--policies", "static-2048,predictive", "--slo-scales", "1.0,0.4",
           *WINDOW, "--start", "1.0", "--max-steps", "5", "--quick", "--no-progress"]
FAKE_SPEC = WorkloadSpec("azure-conv", rate=1.0, num_requests=60, seed=0)
POLICIES = ("static-1024", "static-2048", "greedy")
RATES = (0.5, 1.0, 1.5)
# The simulator's own speed, measured on the host: two local runs differ here too.
HOST_TIMING_COLUMNS = ("sim_wall_s", "sim_speed", "sim_cpu_s", "sim_speed_cpu")


def _cli(argv: list[str], out: Path, *extra: str) -> Path:
    assert main([*argv, "--cache", str(out / "cache"), "--out", str(out), *extra]) == 0
    return out


@pytest.fixture(scope="module")
def local_csvs(tmp_path_factory):
    """The local pool's outputs, made before Ray starts (no fork of a process running Ray)."""
    root = tmp_path_factory.mktemp("local")
    return {"sweep": _cli(SWEEP, root / "sweep", "--jobs", "2") / "sweep.csv",
            "goodput": _cli(GOODPUT, root / "goodput", "--jobs", "2") / "goodput.csv"}


@pytest.fixture(scope="module")
def ray_session(local_csvs):
    # Workers inherit this environment: they import ppsched and the fake engines from here.
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(TESTS), str(TESTS.parent)] + ([old] if old else []))
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             object_store_memory=100 * 2**20, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()
    if old is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = old


def _without_host_timing(path: Path) -> str:
    """The CSV's text, field for field as written, less the host-timing columns."""
    rows = list(csv.reader(io.StringIO(path.read_text(), newline="")))
    drop = {i for i, name in enumerate(rows[0]) if name in HOST_TIMING_COLUMNS}
    assert len(drop) == len(HOST_TIMING_COLUMNS), rows[0]
    return "\n".join(",".join(f for i, f in enumerate(row) if i not in drop) for row in rows)


def _ray_runner(cache: Path, simulate, **executor_options) -> Runner:
    return Runner(cache, simulate_ref=simulate, executor=RayExecutor(**executor_options))


def _fake_sweep(runner: Runner):
    return sweep(runner, Setup(), [FAKE_SPEC], POLICIES, RATES)


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir())  # temporaries (".key.*") would show too


def test_sweep_csv_equals_local_pool_byte_for_byte(ray_session, local_csvs, tmp_path):
    out = _cli(SWEEP, tmp_path, "--executor", "ray")
    assert _without_host_timing(out / "sweep.csv") == _without_host_timing(local_csvs["sweep"])


def test_goodput_csv_equals_local_pool_byte_for_byte(ray_session, local_csvs, tmp_path):
    out = _cli(GOODPUT, tmp_path, "--executor", "ray")
    assert (out / "goodput.csv").read_bytes() == local_csvs["goodput"].read_bytes()


def test_goodput_searches_run_in_parallel_on_ray(ray_session, tmp_path):
    simulate = partial(xfakes.logged_simulate, tmp_path, 0.2)
    settings = SearchSettings(start=1.0, max_steps=4, window=Window(5.0, 20.0, 5.0))
    with _ray_runner(tmp_path / "cache", simulate) as runner:
        goodput_table(runner, Setup(), FAKE_SPEC, ("static-2048", "predictive"), (1.0, 0.4),
                      settings)
    runs = xfakes.calls(tmp_path)
    assert len(runs) == runner.computed > 2
    overlapping = [(a, b) for a in runs for b in runs
                   if a[2] != b[2] and a[3] < b[3] < a[4]]  # b starts while a runs elsewhere
    assert overlapping, runs


@pytest.mark.parametrize("retry_by", ["ray", "driver"])
def test_killed_worker_loses_and_duplicates_no_run(ray_session, tmp_path, retry_by):
    victim = ("greedy", 1.0)
    options = {} if retry_by == "ray" else {"max_retries": 0, "resubmits": 1}
    simulate = partial(xfakes.dying_simulate, tmp_path, victim)
    executor = RayExecutor(**options)
    with Runner(tmp_path / "ray", simulate_ref=simulate, executor=executor) as runner:
        table = _fake_sweep(runner)
    with Runner(tmp_path / "local", jobs=1, simulate_ref=simulate) as local:
        expected = _fake_sweep(local)

    assert (tmp_path / "killed").exists()  # the victim's worker really died
    assert executor.resubmitted == (0 if retry_by == "ray" else 1)
    runs = [(chunk, rate) for chunk, rate, *_ in xfakes.calls(tmp_path)]
    tasks = [(p.removeprefix("static-") if p.startswith("static") else p, r)
             for p in POLICIES for r in RATES]
    tasks = [(f"static:{c}" if c.isdigit() else c, r) for c, r in tasks]
    # Ray: the victim twice (killed, then retried), every other run once; then local: all once.
    assert sorted(runs) == sorted(tasks + [victim] + tasks)
    assert len(table) == len(tasks) and table["run_key"].is_unique
    assert table.drop(columns="cached").equals(expected.drop(columns="cached"))
    assert _entries(tmp_path / "ray") == sorted(table["run_key"])


def test_interrupted_sweep_resumes_from_the_cache(ray_session, tmp_path):
    cache = tmp_path / "cache"
    last = (POLICIES[-1], RATES[-1])  # the sweep waits in order: every other run is done first
    with pytest.raises(UserError, match="refusing"):
        with _ray_runner(cache, partial(xfakes.failing_simulate, last)) as runner:
            _fake_sweep(runner)
    assert len(_entries(cache)) == len(POLICIES) * len(RATES) - 1

    simulate = partial(xfakes.logged_simulate, tmp_path, 0.0)
    with _ray_runner(cache, simulate) as runner:
        table = _fake_sweep(runner)
    assert (runner.computed, runner.reused) == (1, len(table) - 1)
    assert [(c, r) for c, r, *_ in xfakes.calls(tmp_path)] == [last]
    assert all(RunCache(cache).has(key) for key in table["run_key"])


class _WaitFails:
    """Ray as seen by the executor, except that waiting on tasks fails (Ray itself broke)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def wait(self, *args, **kwargs):
        raise RuntimeError("raylet gone")


def test_a_failure_of_ray_itself_fails_the_waiters_instead_of_hanging(ray_session):
    executor = RayExecutor()
    executor._ray = _WaitFails(ray_session)
    with pytest.raises(RuntimeError, match="raylet gone"):
        executor.submit(pow, 2, 3).result(timeout=60)
    executor._ray = ray_session  # Ray is back: the next submit gets a new collector
    assert executor.submit(pow, 2, 4).result(timeout=60) == 16
    executor.shutdown()
