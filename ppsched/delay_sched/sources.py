"""Where DS gets its efficient batch sizes: the context, a fitted profile, or the built-in profile.

Never a hard-coded 128: the boundaries are what the predictor detected (``detect_boundaries``)
on the profile in use.
"""

from __future__ import annotations

from ppsched.core.errors import UserError
from ppsched.core.policy_context import PolicyContext
from ppsched.predictor.profile import LinearProfile, default_profile


def resolve_boundaries(ctx: PolicyContext) -> tuple[int, ...]:
    """``ctx.boundaries`` if set, else the profile's (``ctx.profile_path`` or the default)."""
    if ctx.boundaries is not None:
        found = tuple(int(b) for b in ctx.boundaries)
        source = "PolicyContext.boundaries"
    elif ctx.profile_path is not None:
        found = LinearProfile.from_json(ctx.profile_path).boundaries
        source = f"profile {ctx.profile_path!r}"
    else:
        found = default_profile(ctx.model, pp_size=ctx.pp_size, tp=ctx.tp_size,
                                data_dir=ctx.data_dir).boundaries
        source = f"built-in profile for {ctx.model.name}"
    if not found:
        raise UserError(f"{source} has no efficient batch boundaries: expected at least one "
                        "(delay scheduling trims to them)")
    if any(b <= 0 for b in found):
        raise UserError(f"{source} boundaries {found}: expected positive batch sizes")
    return tuple(sorted(set(found)))
