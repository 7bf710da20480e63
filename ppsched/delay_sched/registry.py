"""Build a decode trimmer from ``--ds on|off`` (None means: run every decode request)."""

from __future__ import annotations

from ppsched.core.errors import UserError
from ppsched.core.policy import DecodeTrimmer
from ppsched.core.policy_context import PolicyContext
from ppsched.delay_sched.ladder import BoundaryLadder
from ppsched.delay_sched.sources import resolve_boundaries
from ppsched.delay_sched.trimmer import DelayTrimmer, DsConfig

DS_MODES = ("on", "off")


def build_decode_trimmer(mode: str, ctx: PolicyContext, max_consecutive_holds: int = 1,
                         config: DsConfig | None = None) -> DecodeTrimmer | None:
    """``config``: the trimmer's knobs (None: the artifact's)."""
    if mode == "off":
        return None
    if mode != "on":
        raise UserError(f"--ds {mode!r}: expected one of {', '.join(DS_MODES)}")
    if isinstance(max_consecutive_holds, bool) or not isinstance(max_consecutive_holds, int) \
            or max_consecutive_holds < 0:
        raise UserError(f"--ds-max-consecutive {max_consecutive_holds!r}: expected an int >= 0 "
                        "(consecutive decode turns a request may be held)")
    ladder = BoundaryLadder(resolve_boundaries(ctx))
    return DelayTrimmer(ladder, ctx.slo.tpot_ms, max_consecutive_holds, config)
