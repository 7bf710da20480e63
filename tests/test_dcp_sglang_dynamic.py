from __future__ import annotations

import math

import pytest
from test_dcp_support import make_snap, waiting

from ppsched.dcp.sglang_dynamic import (
    SglangDynamicChunk,
    fit_quadratic,
    profile_lengths,
    sample_prefill_times,
)

A, B, C = 2e-6, 0.03, 5.0  # T(L) = A L^2 + B L + C  (ms)


def quad(n: int) -> float:
    return A * n * n + B * n + C


def controller(base: int = 2048, context: int = 32768) -> SglangDynamicChunk:
    samples = sample_prefill_times(quad, base, context)
    samples[0] = (samples[0][0], 500.0)  # warm-up outlier: SGLang skips the first sample
    return SglangDynamicChunk(base, samples, context)


def test_profile_lengths_follow_sglang():
    assert profile_lengths(2048, 32768)[:3] == [2560, 2432, 2304]
    assert profile_lengths(2048, 32768)[-1] == 128 and len(profile_lengths(2048, 32768)) == 20
    assert profile_lengths(2048, 1000)[0] == 1000


def test_fit_recovers_quadratic_and_skips_first_sample():
    a, b, c = controller().coeffs
    assert (a, b, c) == pytest.approx((A, B, C), rel=1e-6)


def test_first_chunk_uses_base():
    ctl = controller()
    assert ctl.decide(make_snap()).chunk_tokens == 2048
    d = ctl.decide(make_snap(chunked=waiting(1, 0.0, 9000)))  # nothing prefilled yet
    assert (d.chunk_tokens, d.reason) == (2048, "first-chunk:base")


def test_continuation_chunk_matches_the_stated_formula():
    ctl = controller()
    prefix = 4096
    target = A * 2048**2 + B * 2048
    lin = 2 * A * prefix + B
    x = (-lin + math.sqrt(lin * lin + 4 * A * target)) / (2 * A)
    expected = int(2048 + 0.75 * (x - 2048)) // 64 * 64
    d = ctl.decide(make_snap(chunked=waiting(1, 0.0, 20000, remaining=20000 - prefix)))
    assert (d.chunk_tokens, d.reason) == (expected, "continuation:quadratic")
    assert d.chunk_tokens % 64 == 0 and d.chunk_tokens < 2048


def test_chunks_shrink_with_prefix_to_the_floor():
    ctl = controller()
    sizes = [ctl.chunk_for_prefix(p) for p in (0, 2048, 8192, 30000)]
    assert sizes == sorted(sizes, reverse=True)
    # prefix 0 solves to x = base exactly; float rounding can drop it one 64-step (as in SGLang)
    assert ctl.chunk_for_prefix(0) in (1984, 2048)
    long_ctx = controller(context=10**6)
    assert long_ctx.chunk_for_prefix(500_000) == 512  # floor base // 4, never below


def test_cap_near_context_end():
    ctl = controller(context=8192)
    assert ctl.chunk_for_prefix(8000) == 92  # min(context - L - 100, ...) wins over the floor


def test_non_convex_fit_disables():
    samples = [(n, 0.05 * n + 3.0 - 1e-7 * n * n) for n in profile_lengths(2048, 32768)]
    assert fit_quadratic(samples) is None
    ctl = SglangDynamicChunk(2048, samples, 32768)
    d = ctl.decide(make_snap(chunked=waiting(1, 0.0, 9000, remaining=4000)))
    assert (d.chunk_tokens, d.reason) == (2048, "disabled:fit-rejected")


def test_too_few_samples_disable():
    samples = [(n, quad(n)) for n in (1024, 896, 768, 640, 512, 384, 256, 128)]  # 7 after skip
    assert fit_quadratic(samples) is None
    assert fit_quadratic(samples + [(64, quad(64))]) is not None


def test_negative_linear_term_clamped():
    samples = [(n, 1e-5 * n * n - 0.01 * n + 50) for n in profile_lengths(2048, 32768)]
    a, b, _ = fit_quadratic(samples)
    assert a == pytest.approx(1e-5) and b == 0.0
