from __future__ import annotations

import pytest
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS
from ppsched.core.policy import ChunkController
from ppsched.core.policy_context import PolicyContext
from ppsched.core.slo import Slo
from ppsched.dcp.registry import build_chunk_controller

CTX = PolicyContext(pp_size=4, slo=Slo(), model=BUILTIN_MODELS["qwen2.5-32b"])


@pytest.mark.parametrize("spec", ["static:512", "greedy", "predictive", "predictive-paper"])
def test_specs_build_controllers(spec):
    ctl = build_chunk_controller(spec, CTX, predictor=LinearFake())
    assert isinstance(ctl, ChunkController) and ctl.name == spec
    d = ctl.decide(make_snap())
    assert d.chunk_tokens > 0 and d.reason


def test_sglang_dynamic_profiles_through_the_engine_timer():
    lengths: list[int] = []

    def timer(n: int) -> float:
        lengths.append(n)
        return 1e-6 * n * n + 0.03 * n + 4.0

    ctl = build_chunk_controller("sglang-dynamic", CTX, prefill_timer=timer)
    assert lengths[0] == 2560 and ctl.name == "sglang-dynamic"
    d = ctl.decide(make_snap(chunked=waiting(0, 0.0, 10_000, remaining=6_000)))
    assert d.reason == "continuation:quadratic" and d.chunk_tokens < 2048


def test_sglang_dynamic_without_timer_is_a_user_error():
    with pytest.raises(UserError, match="prefill timer"):
        build_chunk_controller("sglang-dynamic", CTX)


@pytest.mark.parametrize("spec", ["greedy2", "static:x", "static:-4", ""])
def test_bad_specs(spec):
    with pytest.raises(UserError):
        build_chunk_controller(spec, CTX)
