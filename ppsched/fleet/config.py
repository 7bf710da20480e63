"""One simulated fleet's settings: N identical boxes (one run config) behind one router."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ppsched.core.errors import UserError
from ppsched.fleet.routers import RouterSettings

MAX_BOXES = 256
RESULT_FILES = ("config.py", "prefix_tree.py", "routers.py", "simulate.py")


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """``box`` is a run config (``experiments.run_config.RunConfig``); box i runs it with seed
    ``box.seed + i`` (its own cost-model noise), so box 0 of any fleet is the single-box run.
    The router's random draws use ``box.seed``."""

    box: Any
    boxes: int = 1
    router: RouterSettings = field(default_factory=RouterSettings)

    def __post_init__(self) -> None:
        if not callable(getattr(self.box, "to_dict", None)):
            raise UserError(f"fleet box config {self.box!r}: expected a run configuration")
        if isinstance(self.boxes, bool) or not isinstance(self.boxes, int) \
                or not 1 <= self.boxes <= MAX_BOXES:
            raise UserError(f"fleet boxes={self.boxes!r}: expected an integer in "
                            f"[1, {MAX_BOXES}]")
        if not isinstance(self.router, RouterSettings):
            raise UserError(f"fleet router {self.router!r}: expected RouterSettings")

    @property
    def slo(self) -> Any:
        return self.box.slo

    def box_config(self, index: int) -> Any:
        return replace(self.box, seed=self.box.seed + index)

    def gpus_per_box(self) -> int:
        return self.box.pp_size * self.box.tp_size

    def to_dict(self) -> dict[str, Any]:
        """The box's settings (what the run cache reads: chunk, model, data files) plus the
        fleet's, with a hash of the fleet's code so an edited router model is never reused."""
        return {**self.box.to_dict(),
                "fleet": {"boxes": self.boxes, "router": self.router.policy,
                          "cache_threshold": self.router.cache_threshold,
                          "balance_abs_threshold": self.router.balance_abs_threshold,
                          "balance_rel_threshold": self.router.balance_rel_threshold,
                          "load_poll_s": self.router.load_poll_s,
                          "code": fleet_code_fingerprint()}}


@lru_cache(maxsize=1)
def fleet_code_fingerprint() -> str:
    """Hash of the sources a fleet run's result depends on beyond the simulator's own (which
    the run cache hashes)."""
    digest = hashlib.sha256()
    for name in RESULT_FILES:
        digest.update(name.encode())
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:16]
