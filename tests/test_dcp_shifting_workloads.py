"""Shifting-load workloads (``ppsched.traces.shifting``): the mix or the rate really shifts."""

from __future__ import annotations

import numpy as np
import pytest

from ppsched.core.errors import UserError
from ppsched.traces.shifting import (
    alternating,
    chat_batch,
    code_conv,
    decoding_output_p50,
    diurnal,
    phase_of,
    shifting_workload,
)


def test_alternating_phases_swap_the_mix():
    w = alternating(4.0, 480.0, seed=3, period_s=120.0)
    arrival, prompt, output = w.arrays()
    phase = (arrival // 120.0).astype(int) % 2
    assert np.all((prompt[phase == 0] >= 512) & (output[phase == 0] <= 64))
    assert np.all((prompt[phase == 1] <= 64) & (output[phase == 1] >= 512))
    assert 0.8 < len(w) / (4.0 * 480.0) < 1.2  # Poisson at the asked rate
    again = alternating(4.0, 480.0, seed=3, period_s=120.0)
    assert again.requests == w.requests  # seeded


def test_diurnal_rate_swings_around_its_mean():
    w = diurnal(5.0, 1200.0, seed=1, period_s=300.0, depth=0.8)
    arrival, _, _ = w.arrays()
    phase = (arrival % 300.0) / 300.0
    high = np.sum(phase < 0.5)  # sin > 0: rate above the mean
    low = np.sum(phase >= 0.5)
    assert high > 2 * low
    assert 0.85 < len(w) / (5.0 * 1200.0) < 1.15
    assert [r.req_id for r in w.requests] == list(range(len(w)))


def test_code_conv_phases_draw_from_their_own_trace():
    w = code_conv(3.0, 600.0, seed=2, period_s=150.0)
    arrival, prompt, output = w.arrays()
    code = (arrival // 150.0).astype(int) % 2 == 0
    # azure-code: output p50 13, prompt p50 1469; azure-conv: output p50 129, prompt p50 1020
    assert np.median(output[code]) < 30 < 80 < np.median(output[~code])
    assert np.median(prompt[code]) > 1.2 * np.median(prompt[~code])
    assert 0.8 < len(w) / (3.0 * 600.0) < 1.2  # one Poisson stream at the asked rate
    assert code_conv(3.0, 600.0, seed=2, period_s=150.0).requests == w.requests  # seeded
    assert code_conv(3.0, 600.0, seed=3, period_s=150.0).requests != w.requests
    only = code_conv(3.0, 600.0, seed=2, only="conv").arrays()
    assert np.array_equal(only[0], arrival)  # same arrivals, every one with conv lengths
    assert np.array_equal(only[2][~code], output[~code])
    assert np.median(only[2][code]) > 80
    assert [phase_of("code-conv", t) == "code" for t in arrival] == list(code)


def test_chat_batch_alternates_chat_and_prefill_only_batches():
    w = chat_batch(3.0, 600.0, seed=2, period_s=150.0)
    arrival, prompt, output = w.arrays()
    chat = (arrival // 150.0).astype(int) % 2 == 0
    assert chat[0] and chat.sum() > 0 and (~chat).sum() > 0  # starts with chat, both phases
    assert np.all(output[~chat] == 1)  # batch: prefill-only, one token back
    assert np.median(output[chat]) > 80  # azure-conv outputs, p50 129
    # batch prompts are azure-code's (p50 1469) against azure-conv's (p50 1020)
    assert np.median(prompt[~chat]) > 1.2 * np.median(prompt[chat])
    assert 0.8 < len(w) / (3.0 * 600.0) < 1.2  # one Poisson stream at the asked rate
    assert chat_batch(3.0, 600.0, seed=2, period_s=150.0).requests == w.requests  # seeded
    assert chat_batch(3.0, 600.0, seed=3, period_s=150.0).requests != w.requests
    assert [phase_of("chat-batch", t) == "chat" for t in arrival] == list(chat)
    only = chat_batch(3.0, 600.0, seed=2, only="batch").arrays()
    assert np.array_equal(only[0], arrival)  # same arrivals, every one a batch job
    assert np.all(only[2] == 1) and np.array_equal(only[1][~chat], prompt[~chat])
    alone = shifting_workload("chat-batch", 3.0, 600.0, seed=2, only="chat").arrays()
    assert np.array_equal(alone[2][chat], output[chat]) and np.all(alone[2][~chat] > 0)
    assert np.median(alone[2][~chat]) > 80


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError):
        shifting_workload("sawtooth", 1.0, 10.0)
    with pytest.raises(UserError):
        alternating(0.0, 10.0)
    with pytest.raises(UserError):
        diurnal(1.0, 10.0, depth=1.0)
    with pytest.raises(UserError, match="only='chat'"):
        code_conv(1.0, 10.0, only="chat")
    with pytest.raises(UserError, match="only='code'"):
        chat_batch(1.0, 10.0, only="code")
    with pytest.raises(UserError, match="period_s=-1"):
        chat_batch(1.0, 10.0, period_s=-1.0)
    with pytest.raises(UserError, match="only code-conv and chat-batch"):
        shifting_workload("alternating", 1.0, 10.0, only="code")
    with pytest.raises(UserError):
        code_conv(1.0, 10.0, period_s=0.0)
    with pytest.raises(UserError, match="sawtooth"):
        phase_of("sawtooth", 1.0)


def test_window_is_sized_by_the_requests_that_decode():
    w = chat_batch(3.0, 600.0, seed=0)
    _, _, output = w.arrays()
    # about half the mix is prefill-only, so the whole mix's median sits far below the chat's
    assert decoding_output_p50(w) == np.median(output[output >= 2]) > 80 > np.median(output)
    with pytest.raises(UserError, match="chat-batch"):
        decoding_output_p50(chat_batch(3.0, 60.0, seed=0, only="batch"))
