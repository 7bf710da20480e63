"""Where DS gets its efficient batch sizes: the context, a fitted profile, or the built-in profile.

Never a hard-coded 128: the boundaries are what the predictor detected on the profile in use.
"""

from __future__ import annotations

from ppsched.core.errors import UserError
from ppsched.core.policy_context import PolicyContext


def resolve_boundaries(ctx: PolicyContext) -> tuple[int, ...]:
    """``ctx.boundaries`` if set, else the profile's (``ctx.profile_path`` or the default)."""
    if ctx.boundaries is not None:
        found = tuple(int(b) for b in ctx.boundaries)
        source = "PolicyContext.boundaries"
    else:
        try:  # the predictor package is built by another engineer; import lazily
            from ppsched.predictor import profile as predictor_profile
        except ImportError as exc:
            raise UserError("delay scheduling needs efficient batch boundaries: expected "
                            "ppsched.predictor.profile (not importable: "
                            f"{exc}) or explicit PolicyContext.boundaries") from exc
        if ctx.profile_path is not None:
            prof = predictor_profile.LinearProfile.from_json(ctx.profile_path)
            source = f"profile {ctx.profile_path!r}"
        else:
            prof = predictor_profile.default_profile(ctx.model, pp_size=ctx.pp_size,
                                                     tp=ctx.tp_size, data_dir=ctx.data_dir)
            source = f"built-in profile for {ctx.model.name}"
        found = tuple(int(b) for b in prof.boundaries)
    if not found:
        raise UserError(f"{source} has no efficient batch boundaries: expected at least one "
                        "(delay scheduling trims to them)")
    return tuple(sorted(set(found)))
