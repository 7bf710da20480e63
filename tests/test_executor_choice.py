"""--executor / --ray-address: bad values and a missing Ray are one clear error (exit 2)."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest
import test_experiments_fakes as fakes

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.experiments.executors import ExecutorChoice, InlineExecutor
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.runner import Runner, RunTask, compute
from ppsched.experiments.workload_spec import WorkloadSpec

SWEEP = ["sweep", "--policies", "greedy", "--rates", "1", "--measure-s", "10", "--warmup-s", "0",
         "--cooldown-s", "0"]


def _run(capsys, tmp_path, *extra: str) -> tuple[int, str]:
    code = main([*SWEEP, "--cache", str(tmp_path / "c"), "--out", str(tmp_path), *extra])
    return code, capsys.readouterr().err


def test_unknown_executor_is_named(capsys, tmp_path):
    code, err = _run(capsys, tmp_path, "--executor", "dask")
    assert code == 2 and "--executor 'dask'" in err and "local, ray" in err


def test_ray_address_without_ray_executor_is_refused(capsys, tmp_path):
    code, err = _run(capsys, tmp_path, "--ray-address", "auto")
    assert code == 2 and "--ray-address 'auto'" in err and "--executor ray" in err


def test_missing_ray_says_how_to_install(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    code, err = _run(capsys, tmp_path, "--executor", "ray")
    assert code == 2 and "pip install 'ppsched[ray]'" in err
    assert err.count("\n") == 1  # one line, no traceback
    assert not (tmp_path / "sweep.csv").exists()


def test_blank_ray_address_is_refused():
    with pytest.raises(UserError, match="--ray-address ' '"):
        ExecutorChoice("ray", " ")


def test_runner_accepts_a_ready_executor(tmp_path):
    task = RunTask(RunConfig(chunk="static:512"), WorkloadSpec("azure-conv", rate=1.0,
                                                                num_requests=20))
    with Runner(tmp_path, simulate_ref=fakes.fake_simulate, executor=InlineExecutor()) as runner:
        outcome = runner.submit(task).result()
    assert not outcome.cached and runner.cache.has(task.key)
    assert len(outcome.records) == 20


def test_run_from_other_code_is_refused_not_cached(tmp_path, monkeypatch):
    """A cluster node on another ppsched commit must not fill this commit's cache keys."""
    import ppsched.experiments.runner as runner_module

    task = RunTask(RunConfig(chunk="static:512"), WorkloadSpec("azure-conv", rate=1.0,
                                                                num_requests=20))
    real = runner_module.code_fingerprint()
    monkeypatch.setattr(runner_module, "compute", _compute_on_other_code)
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        with pytest.raises(UserError, match=f"this driver's code is {real}"):
            runner.submit(task).result()
    assert not runner.cache.has(task.key)


def _compute_on_other_code(task, simulate_ref):
    return replace(compute(task, simulate_ref), code="0" * 16, host="node-7")
