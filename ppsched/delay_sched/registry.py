"""Build a decode trimmer from ``--ds on|off`` (None means: run every decode request)."""

from __future__ import annotations

from ppsched.core.errors import UserError
from ppsched.core.policy import DecodeTrimmer
from ppsched.core.policy_context import PolicyContext


def build_decode_trimmer(mode: str, ctx: PolicyContext, max_consecutive_holds: int = 1
                         ) -> DecodeTrimmer | None:
    if mode == "off":
        return None
    raise UserError(f"--ds {mode!r}: expected 'off' (delay scheduling not built yet)")
