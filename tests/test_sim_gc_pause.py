"""A run pauses the cyclic collector and leaves it as it found it, also when the run fails."""

from __future__ import annotations

import gc

import pytest

from ppsched.sim.engine.gc_pause import collector_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_inside_and_restored_after(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("a failing run")
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_simulate_leaves_the_collector_on():
    from ppsched.experiments.run_config import RunConfig
    from ppsched.experiments.workload_spec import WorkloadSpec, load
    from ppsched.sim import simulate

    assert gc.isenabled()
    result = simulate(RunConfig(model="qwen2.5-32b", chunk="static:512", seed=0),
                      load(WorkloadSpec("azure-conv", rate=1.0, duration_s=5.0, seed=0)))
    assert gc.isenabled() and result.summary["microbatches"] > 0
