"""ppsched: online pipeline-parallel scheduling for LLM serving (DCP, ALP, DS).

The Python API (docs/API.md)::

    import ppsched

    workload = ppsched.load_workload("azure-conv", rate=3.0, num_requests=300)
    result = ppsched.simulate(ppsched.RunConfig(chunk="predictive"), workload)
    result.summary["slo_attainment"], result.requests.head()
    table = ppsched.goodput("azure-conv", ["predictive", "static-512"], [1.0])

Running: ``load_workload``, ``simulate``, ``goodput``. Controllers an engine runs:
``chunk_controller``, ``decode_trimmer``, ``admission_controller``. Their types: ``RunConfig``,
``Slo``, ``Workload``, ``WorkloadSpec``, ``Setup``, ``SearchSettings``, ``Window``,
``PolicyContext``, ``AdmissionConfig``, ``SimResult``, ``ChunkController``, ``DecodeTrimmer``.

Each name loads its module on first use, so ``import ppsched`` stays light (no numpy, pandas or
matplotlib until a name needs them).
"""

from __future__ import annotations

import importlib
from typing import Any

from ppsched import native
from ppsched.version import __version__

NATIVE = native.select()  # the compiled modules run (``make native``), or the pure sources

# public name -> the module that defines it
_EXPORTS = {
    "load_workload": "ppsched.traces",
    "simulate": "ppsched.api",
    "goodput": "ppsched.api",
    "chunk_controller": "ppsched.api",
    "decode_trimmer": "ppsched.api",
    "admission_controller": "ppsched.api",
    "RunConfig": "ppsched.experiments.run_config",
    "Slo": "ppsched.core.slo",
    "Workload": "ppsched.traces",
    "WorkloadSpec": "ppsched.experiments.workload_spec",
    "WORKLOAD_NAMES": "ppsched.traces",
    "Setup": "ppsched.experiments.plan",
    "SearchSettings": "ppsched.experiments.goodput",
    "Window": "ppsched.metrics.steady",
    "PolicyContext": "ppsched.core.policy_context",
    "AdmissionConfig": "ppsched.admission",
    "PolicyConfig": "ppsched.policy_config",
    "load_policy_config": "ppsched.policy_config",
    "SimResult": "ppsched.sim.engine.result",
    "ChunkController": "ppsched.core.policy",
    "DecodeTrimmer": "ppsched.core.policy",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ppsched' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
