"""A run with DS is taken from its run without DS only where DS could not have acted."""

from dataclasses import replace

import pytest
import test_experiments_fakes as fakes
from record_compare import same_records

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
    (replace(ON, mem_fraction_static=0.35), WorkloadSpec("sharegpt", rate=15.0,
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


@pytest.mark.parametrize("first_ds", ["on", "off"])
def test_the_runner_answers_the_second_of_a_certified_pair_with_the_first(tmp_path, first_ds):
    workload = WorkloadSpec("azure-conv", rate=4.0, num_requests=300, seed=3)
    first = RunTask(replace(ON, ds=first_ds), workload)
    with Runner(tmp_path, jobs=1) as runner:
        simulated = runner.submit(first).result()
        taken = runner.submit(twin_task(first)).result()
    assert (runner.computed, runner.same_as_twin) == (1, 1)
    assert same_records(taken.records, simulated.records)
    assert taken.summary["config"]["ds"] != first_ds
    assert taken.summary["ds_same_as_run"] == simulated.key
    # records, summary figures, decisions and iterations: the same simulation
    pair = [simulate(t.config, load(t.workload)) for t in (first, twin_task(first))]
    assert run_digest(pair[0]) == run_digest(pair[1])


def test_a_pair_where_ds_acts_is_simulated_twice(tmp_path):
    busy = RunTask(ON, WorkloadSpec("synthetic-decode", rate=40.0, num_requests=1200, seed=3))
    with Runner(tmp_path, jobs=1) as runner:
        with_ds = runner.submit(busy).result()
        runner.submit(twin_task(busy)).result()
    assert (runner.computed, runner.same_as_twin) == (2, 0)
    assert with_ds.summary["ds_holds"] > 0


def test_an_engine_without_the_certificate_simulates_both(tmp_path):
    task = RunTask(ON, WorkloadSpec("azure-conv", rate=4.0, num_requests=50, seed=3))
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        runner.submit(task).result()
        runner.submit(twin_task(task)).result()
    assert (runner.computed, runner.same_as_twin) == (2, 0)


def test_a_run_is_never_simulated_only_to_answer_its_twin(tmp_path):
    task = RunTask(ON, WorkloadSpec("azure-conv", rate=4.0, num_requests=50, seed=3))
    with Runner(tmp_path, jobs=1) as runner:
        runner.submit(task).result()
    assert (runner.computed, runner.same_as_twin) == (1, 0)


def test_the_twin_switches_ds_and_nothing_else():
    workload = WorkloadSpec("azure-conv", rate=4.0, num_requests=50, seed=3)
    assert twin_task(RunTask(ON, workload)).config == replace(ON, ds="off")
    assert twin_task(RunTask(replace(ON, ds="off"), workload)).config == ON
