"""A run with DS is taken from its run without DS only where DS could not have acted."""

from dataclasses import replace

import pytest
import test_experiments_fakes as fakes

from ppsched.experiments.ds_twin import first_boundary, same_trajectory, twin_task
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.runner import Runner, RunTask, compute
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.sim import simulate
from ppsched.sim.digest import run_digest

ON = RunConfig(model="qwen2.5-14b", chunk="predictive", ds="on", mixed_chunk=True, seed=3)


def _pair(config: RunConfig, workload: WorkloadSpec):
    task = RunTask(config, workload)
    with_ds = compute(task)
    without = compute(twin_task(task))
    return task, with_ds, without


def _records(result) -> list:
    return [r for r in result.records]


@pytest.mark.parametrize("config, workload, same", [
    # azure-conv at a moderate rate: slots stay well under the first boundary (128)
    (ON, WorkloadSpec("azure-conv", rate=4.0, num_requests=300, seed=3), True),
    # decode-heavy, fast arrivals: slots pass 128 decodes and DS holds requests
    (ON, WorkloadSpec("synthetic-decode", rate=40.0, num_requests=1200, seed=3), False),
    # little KV: retracted requests rejoin a decode set out of arrival order
    (replace(ON, mem_fraction_static=0.40), WorkloadSpec("sharegpt", rate=15.0,
                                                          num_requests=600, seed=3), False),
])
def test_a_certified_twin_has_the_same_records_and_only_then(config, workload, same):
    task, with_ds, without = _pair(config, workload)
    assert same_trajectory(task, without.summary) is same
    if same:
        assert _records(with_ds) == _records(without)
        assert with_ds.summary["ds_holds"] == 0
    else:
        sets = without.summary["decode_sets"]
        assert not sets["in_arrival_order"] or sets["max_per_slot"] > first_boundary(config)


def test_the_runner_answers_a_certified_run_with_ds_from_its_twin(tmp_path):
    task = RunTask(ON, WorkloadSpec("azure-conv", rate=4.0, num_requests=300, seed=3))
    with Runner(tmp_path, jobs=1) as runner:
        outcome = runner.submit(task).result()
        twin = runner.submit(twin_task(task)).result()
    assert (runner.computed, runner.same_as_twin) == (1, 1)
    assert outcome.records == twin.records
    assert outcome.summary["config"]["ds"] == "on"
    assert outcome.summary["ds_same_as_run"] == twin.key
    # records, summary figures, decisions and iterations: the same simulation
    simulated = [simulate(t.config, load(t.workload)) for t in (task, twin_task(task))]
    assert run_digest(simulated[0]) == run_digest(simulated[1])


def test_an_engine_without_the_certificate_simulates_the_run_with_ds(tmp_path):
    task = RunTask(ON, WorkloadSpec("azure-conv", rate=4.0, num_requests=50, seed=3))
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        runner.submit(task).result()
    assert (runner.computed, runner.same_as_twin) == (2, 0)


def test_only_runs_with_ds_have_a_twin():
    workload = WorkloadSpec("azure-conv", rate=4.0, num_requests=50, seed=3)
    assert twin_task(RunTask(replace(ON, ds="off"), workload)) is None
    assert twin_task(RunTask(ON, workload)).config == replace(ON, ds="off")


def test_after_ds_acts_runs_of_that_kind_are_simulated_without_asking_a_twin(tmp_path):
    busy = WorkloadSpec("synthetic-decode", rate=40.0, num_requests=1200, seed=3)
    with Runner(tmp_path, jobs=1) as runner:
        runner.submit(RunTask(ON, busy)).result()
        assert (runner.computed, runner.same_as_twin) == (2, 0)  # the twin, then its own
        runner.submit(RunTask(replace(ON, seed=4), replace(busy, rate=38.0))).result()
    assert (runner.computed, runner.same_as_twin) == (3, 0)
