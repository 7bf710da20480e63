"""The simulator's hot modules compiled with mypyc, and the gate that decides whether they run.

``make native`` (``scripts/build_native.py``) compiles ``MODULES`` in place: each gets a C
extension beside its ``.py``, and Python imports the extension first. The extensions are the
same source, typed as written, compiled to C (floating point contraction off, so each operation
rounds as Python's does); outputs are bit-identical to the pure-Python modules
(tests/test_native.py) and the simulator runs about twice as fast (bench/simulator.md).

The pure-Python modules stay the reference. ``ppsched`` imports them instead of the extensions
when ``PPSCHED_PURE=1`` (profiling: cProfile does not see into compiled functions) or when any
compiled module's source changed after the build (``BUILD_RECORD`` holds each source's SHA-256
as compiled): an edited file then runs as edited, with one warning to rebuild, never as the
stale extension.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUILD_RECORD = PACKAGE_DIR / "native_build.json"
PURE_ENV = "PPSCHED_PURE"

# The per-microbatch path: engine, cost model, chunk controllers, ALP. Not here: modules mypyc
# cannot compile as written (core/policy.py's runtime-checkable protocols, core/snapshots.py's
# slot-descriptor constructor, dcp/regime.py's enum of tuples, core/paths.py's package path
# from __file__); the frozen records that cross processes by pickle (core/requests.py,
# core/slo.py, core/models.py: a compiled frozen class cannot be unpickled) and errors; the
# SGLang plugin's modules; tools.
MODULES = (
    "ppsched.core.batch", "ppsched.core.cuda_graphs", "ppsched.core.policy_context",
    "ppsched.core.rounds",
    "ppsched.dcp.calibrate", "ppsched.dcp.candidate_costs", "ppsched.dcp.greedy",
    "ppsched.dcp.predictive", "ppsched.dcp.prompt_window", "ppsched.dcp.queue_drain",
    "ppsched.dcp.registry", "ppsched.dcp.rule_base",
    "ppsched.dcp.rule_paper", "ppsched.dcp.rule_slo", "ppsched.dcp.rule_steady",
    "ppsched.dcp.signals", "ppsched.dcp.static",
    "ppsched.predictor.alp", "ppsched.predictor.alp_kernel", "ppsched.predictor.device_fit",
    "ppsched.predictor.linear_term",
    "ppsched.predictor.kernels",
    "ppsched.predictor.rls_kernels",
    "ppsched.sim.cost.attention", "ppsched.sim.cost.gemm_roofline", "ppsched.sim.cost.linear",
    "ppsched.sim.cost.link", "ppsched.sim.cost.model", "ppsched.sim.cost.overhead",
    "ppsched.sim.cost.profiles", "ppsched.sim.cost.scaling", "ppsched.sim.cost.tables",
    "ppsched.sim.engine.batches", "ppsched.sim.engine.feed", "ppsched.sim.engine.gc_pause",
    "ppsched.sim.engine.kv", "ppsched.sim.engine.log", "ppsched.sim.engine.loop",
    "ppsched.sim.engine.prefix_cache", "ppsched.sim.engine.result",
    "ppsched.sim.engine.sched_state", "ppsched.sim.engine.simulate", "ppsched.sim.engine.state",
    "ppsched.sim.engine.timing", "ppsched.sim.engine.views",
)


def source_path(module: str) -> Path:
    return PACKAGE_DIR.parent.joinpath(*module.split(".")).with_suffix(".py")


def source_digests(modules: Sequence[str] = MODULES) -> dict[str, str]:
    return {m: hashlib.sha256(source_path(m).read_bytes()).hexdigest() for m in modules}


def compiled(module: str) -> bool:
    """Whether ``module`` was imported from a C extension (the native build is in use)."""
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def stale_sources(record: Path | None = None) -> list[str]:
    """The modules whose build does not match ``MODULES`` and their sources: changed since,
    not built, or built and no longer listed (all of them when the record is unreadable);
    [] when the build is current."""
    try:
        built = json.loads((record or BUILD_RECORD).read_text())["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return list(MODULES)
    current = source_digests([m for m in MODULES if m in built])
    return [m for m in MODULES if m not in current or built[m] != current[m]] + sorted(
        m for m in built if m not in MODULES)


def built_modules() -> list[str]:
    """The modules of ``MODULES`` that have an extension beside their source."""
    return [m for m in MODULES if any(source_path(m).with_suffix(suffix).exists()
                                      for suffix in importlib.machinery.EXTENSION_SUFFIXES)]


class SourceOnlyFinder(importlib.abc.MetaPathFinder):
    """Finds ``ppsched`` submodules as ``.py`` sources only, so that extensions built beside
    them are not imported."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("ppsched.") or path is None:
            return None
        for entry in path:
            finder = importlib.machinery.FileFinder(
                entry, (importlib.machinery.SourceFileLoader,
                        importlib.machinery.SOURCE_SUFFIXES))
            spec = finder.find_spec(fullname)
            if spec is not None:
                return spec
        return None


def select() -> bool:
    """Called once as ``ppsched`` is imported: True when the extensions run; otherwise the
    pure-Python sources are imported instead (asked for, or a source changed since the build)."""
    if not built_modules():
        return False
    if os.environ.get(PURE_ENV, "") in ("", "0"):
        stale = stale_sources()
        if not stale:
            return True
        warnings.warn(f"ppsched: {len(stale)} compiled module(s) changed since the native build "
                      f"(first: {stale[0]}); running pure Python: `make native` rebuilds",
                      RuntimeWarning, stacklevel=2)
    if not any(isinstance(f, SourceOnlyFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceOnlyFinder())
    return False
