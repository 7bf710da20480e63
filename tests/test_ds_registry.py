"""``build_decode_trimmer``: on/off, K, and where the boundaries come from."""

from __future__ import annotations

import pytest

from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS
from ppsched.core.policy_context import PolicyContext
from ppsched.core.slo import Slo
from ppsched.delay_sched.registry import build_decode_trimmer
from ppsched.delay_sched.trimmer import DelayTrimmer
from ppsched.predictor.profile import LinearProfile, default_profile


def _ctx(boundaries=None, slo: Slo | None = None) -> PolicyContext:
    return PolicyContext(pp_size=4, slo=slo or Slo(), model=BUILTIN_MODELS["qwen2.5-32b"],
                         boundaries=boundaries)


def test_off_is_none() -> None:
    assert build_decode_trimmer("off", _ctx((128, 256))) is None


def test_on_uses_context_boundaries_slo_and_k() -> None:
    t = build_decode_trimmer("on", _ctx((256, 96, 128), Slo(2000, 150)), max_consecutive_holds=3)
    assert isinstance(t, DelayTrimmer)
    assert t.ladder.boundaries == (96, 128, 256)
    assert t.max_consecutive_holds == 3 and t.tpot_slo_ms == 150


@pytest.mark.parametrize("mode", ["yes", "ON", ""])
def test_bad_mode_is_a_user_error(mode) -> None:
    with pytest.raises(UserError, match="--ds"):
        build_decode_trimmer(mode, _ctx((128,)))


@pytest.mark.parametrize("k", [-1, 1.5, True])
def test_bad_k_is_a_user_error(k) -> None:
    with pytest.raises(UserError, match="--ds-max-consecutive"):
        build_decode_trimmer("on", _ctx((128,)), max_consecutive_holds=k)


def test_empty_context_boundaries_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no efficient batch boundaries"):
        build_decode_trimmer("on", _ctx(()))


def test_without_context_boundaries_the_default_profile_supplies_them() -> None:
    ctx = _ctx()
    expected = default_profile(ctx.model, pp_size=4, tp=1).boundaries
    assert expected  # the A100 profile has a staircase: DS must find it, not assume 128
    assert build_decode_trimmer("on", ctx).ladder.boundaries == tuple(sorted(set(expected)))


def test_a_profile_file_supplies_boundaries(tmp_path) -> None:
    prof = LinearProfile(alpha0=0.05, alpha1=2.0, boundaries=(96, 160, 320), staircase=(),
                         fit_mape=1.0, staircase_mape=1.0, variant="linear", model="test", tp=1,
                         source="test")
    path = tmp_path / "profile.json"
    path.write_text(prof.to_json())
    ctx = PolicyContext(pp_size=4, slo=Slo(), model=BUILTIN_MODELS["qwen2.5-32b"],
                        profile_path=str(path))
    assert build_decode_trimmer("on", ctx).ladder.boundaries == (96, 160, 320)


def test_context_boundaries_override_the_profile_file(tmp_path) -> None:
    ctx = PolicyContext(pp_size=4, slo=Slo(), model=BUILTIN_MODELS["qwen2.5-32b"],
                        profile_path=str(tmp_path / "missing.json"), boundaries=(64, 192))
    assert build_decode_trimmer("on", ctx).ladder.boundaries == (64, 192)


def test_unreadable_profile_is_a_user_error(tmp_path) -> None:
    ctx = PolicyContext(pp_size=4, slo=Slo(), model=BUILTIN_MODELS["qwen2.5-32b"],
                        profile_path=str(tmp_path / "missing.json"))
    with pytest.raises(UserError, match="missing.json"):
        build_decode_trimmer("on", ctx)


def test_non_positive_boundaries_are_a_user_error() -> None:
    with pytest.raises(UserError, match="positive"):
        build_decode_trimmer("on", _ctx((0, 128)))
