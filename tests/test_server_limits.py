"""The request limits read from a live server's info page (SGLang 0.5.23's rules)."""

import pytest

from ppsched.core.errors import UserError
from ppsched.experiments.server_limits import ServerLimits, limits_from_info


def test_published_input_limit_and_context_of_the_cpu_recipe():
    # /server_info of `--context-length 1024 --max-total-tokens 8192` on SGLang 0.5.23
    limits = limits_from_info({"context_length": 1024, "max_req_input_len": 1018,
                               "max_total_num_tokens": 8192})
    assert (limits.max_total_tokens, limits.max_prompt_tokens) == (1022, 1017)
    assert "max_req_input_len=1018" in limits.source and "context_length=1024" in limits.source


def test_a_small_kv_pool_lowers_the_published_input_limit_and_so_the_total():
    # max_req_len = min(context - 1, kv - 1) = 511: max_req_input_len = 506
    limits = limits_from_info({"context_length": 1024, "max_req_input_len": 506})
    assert (limits.max_total_tokens, limits.max_prompt_tokens) == (510, 505)


def test_context_only_falls_back_to_the_0_5_23_rule():
    limits = limits_from_info({"context_length": 300})
    assert (limits.max_total_tokens, limits.max_prompt_tokens) == (298, 293)
    assert limits_from_info({"context_len": 300}) == ServerLimits(298, 293, "context_len=300")


@pytest.mark.parametrize("info", [{}, {"context_length": None}, {"context_length": True},
                                  {"context_length": -5, "max_req_input_len": "1018"}])
def test_nothing_usable_published_gives_none(info):
    assert limits_from_info(info) is None


def test_limits_that_serve_nothing_are_an_error():
    with pytest.raises(UserError, match="expected 1 <= prompt limit < total limit"):
        limits_from_info({"context_length": 6})

