"""SGLang's decode CUDA graph staircase (ppsched/core/cuda_graphs.py)."""

from __future__ import annotations

import pytest

from ppsched.core.cuda_graphs import DecodeGraphs, sglang_batch_sizes, sglang_default_cap
from ppsched.core.errors import UserError

A100_40G_MIB = 40339.3125
A100_80G_MIB = 81920.0


def test_a100_40g_tp1_captures_up_to_32():
    graphs = DecodeGraphs.sglang_default(A100_40G_MIB, tp_size=1)
    assert graphs.batch_sizes == (1, 2, 4, 8, 12, 16, 24, 32)
    assert graphs.cap == 32


def test_caps_follow_memory_and_tp():
    assert sglang_default_cap(A100_40G_MIB, 4) == 160
    assert sglang_default_cap(A100_80G_MIB, 1) == 256
    assert sglang_default_cap(A100_80G_MIB, 8) == 512
    assert sglang_default_cap(16 * 1024, 1) == 8
    assert sglang_default_cap(200 * 1024, 1) == 512


def test_ladder_above_256_and_odd_cap():
    sizes = sglang_batch_sizes(600)
    assert sizes[-5:] == (496, 512, 544, 576, 600)
    assert 264 not in sizes and 272 in sizes and 288 in sizes
    assert sglang_batch_sizes(20) == (1, 2, 4, 8, 12, 16, 20)


def test_padding_and_eager_above_cap():
    graphs = DecodeGraphs.sglang_default(A100_40G_MIB, tp_size=1)
    assert [graphs.padded(b) for b in (1, 3, 5, 9, 13, 17, 25, 32)] == [1, 4, 8, 12, 16, 24, 32, 32]
    assert graphs.is_graph(32) and not graphs.is_graph(33)
    assert graphs.padded(33) == 33  # eager: no padding
    assert graphs.padded(0) == 0 and not graphs.is_graph(0)


def test_max_running_requests_lowers_the_cap():
    graphs = DecodeGraphs.sglang_default(A100_80G_MIB, tp_size=1, max_running_requests=40)
    assert graphs.cap == 40 and graphs.batch_sizes[-2:] == (32, 40)


def test_disabled_runs_everything_eagerly():
    graphs = DecodeGraphs.disabled()
    assert not graphs.enabled and graphs.cap == 0
    assert graphs.padded(7) == 7 and not graphs.is_graph(1)


@pytest.mark.parametrize("sizes", [(2, 1), (0, 4), (4, 4)])
def test_bad_sizes_rejected(sizes):
    with pytest.raises(UserError):
        DecodeGraphs(sizes)
