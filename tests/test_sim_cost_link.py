"""The link model: NCCL's ring on PCIe, priced per message size, for each --hardware variant."""

from __future__ import annotations

import pytest

from ppsched.core.errors import UserError
from ppsched.experiments.run_config import RunConfig
from ppsched.sim.cost.link import (
    LL,
    MEASURED_8GPU_ALLREDUCE_US,
    SIMPLE,
    LinkModel,
    Protocol,
    link_model,
)
from ppsched.sim.hardware import LinkSpec, get_hardware, known_hardware

HIDDEN_BYTES = 5120 * 2  # qwen2.5-32b, bf16
P2P = LinkModel(get_hardware("a100-40g-pcie-p2p").link)
NOP2P = LinkModel(get_hardware("a100-40g-pcie-nop2p").link)
SIZES = [1, 8, 64, 2048, 65536, 1 << 20, 21 << 20, 1 << 28]


def test_variants_are_named_and_the_plain_name_keeps_the_published_link() -> None:
    names = known_hardware()
    assert {"a100-40g-pcie", "a100-40g-pcie-p2p", "a100-40g-pcie-nop2p"} <= set(names)
    plain = get_hardware("a100-40g-pcie").link
    assert plain.model == "latency-bandwidth" and plain.latency_us == 42.0
    assert plain.bus_gbps == 22.5
    assert get_hardware("a100-40g-pcie-p2p").link.model == "nccl-ring"
    assert get_hardware("a100-40g-pcie-nop2p").link.model == "nccl-ring"
    assert get_hardware("a100-40g-pcie-p2p").link.p2p is True
    assert get_hardware("a100-40g-pcie-nop2p").link.p2p is False
    for name in names:
        link = get_hardware(name).link
        assert dict(link.sources)["bus_gbps"], name


def test_large_all_reduce_is_simple_ring_at_bus_bandwidth() -> None:
    nbytes = 2048 * HIDDEN_BYTES  # one prefill chunk's hidden state
    for model in (P2P, NOP2P):
        latency_ms = (SIMPLE.base_us + 6 * SIMPLE.hop_us) / 1000
        expected = latency_ms + 1.5 * nbytes / (model.link.bus_gbps * 1e6)
        assert model.all_reduce_ms(nbytes, 4) == pytest.approx(expected)


def test_small_all_reduce_is_ll_at_its_measured_latency() -> None:
    # 8 bytes over 8 GPUs: the measured figure the LL hop latency comes from
    assert P2P.all_reduce_ms(8, 8) * 1000 == pytest.approx(MEASURED_8GPU_ALLREDUCE_US, abs=0.1)
    one_token = P2P.all_reduce_ms(HIDDEN_BYTES, 4)
    ll = (LL.base_us + 6 * LL.hop_us) / 1000 + 1.5 * HIDDEN_BYTES / (22.5e6 * 0.25)
    assert one_token == pytest.approx(ll)
    assert one_token < (SIMPLE.base_us + 6 * SIMPLE.hop_us) / 1000


@pytest.mark.parametrize("model", [P2P, NOP2P], ids=["p2p", "nop2p"])
def test_time_grows_with_bytes_and_ranks(model: LinkModel) -> None:
    for collective in (model.all_reduce_ms, model.all_gather_ms):
        times = [collective(s, 4) for s in SIZES]
        assert times == sorted(times) and times[0] > 0
        assert collective(1 << 20, 2) < collective(1 << 20, 4) < collective(1 << 20, 8)
    sends = [model.p2p_ms(s) for s in SIZES]
    assert sends == sorted(sends)


def test_host_staging_is_never_faster_and_doubles_large_transfers() -> None:
    for size in SIZES:
        assert NOP2P.all_reduce_ms(size, 4) >= P2P.all_reduce_ms(size, 4)
        assert NOP2P.p2p_ms(size) >= P2P.p2p_ms(size)
    big = 1 << 28
    assert NOP2P.all_reduce_ms(big, 4) / P2P.all_reduce_ms(big, 4) == pytest.approx(
        P2P.link.bus_gbps / NOP2P.link.bus_gbps, rel=0.01)


def test_nothing_to_move_costs_nothing() -> None:
    assert P2P.all_reduce_ms(0, 4) == 0.0
    assert P2P.all_reduce_ms(1 << 20, 1) == 0.0
    assert P2P.all_gather_ms(1 << 20, 1) == 0.0
    assert P2P.p2p_ms(0) == 0.0


def test_bad_link_and_protocol_values_are_named() -> None:
    with pytest.raises(UserError, match=r"bus_gbps=0.*expected > 0"):
        LinkSpec("x", p2p=True, bus_gbps=0)
    with pytest.raises(UserError, match=r"p2p='yes'"):
        LinkSpec("x", p2p="yes", bus_gbps=1.0)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"bandwidth_share=1.5"):
        Protocol("x", base_us=1.0, hop_us=1.0, bandwidth_share=1.5)


def test_unknown_hardware_names_the_known_variants() -> None:
    with pytest.raises(UserError, match=r"unknown hardware 'a100-pcie'.*a100-40g-pcie-nop2p"):
        get_hardware("a100-pcie")
    with pytest.raises(UserError, match=r"--hardware 'h100'.*a100-40g-pcie-p2p"):
        RunConfig(hardware="h100")


def test_latency_bandwidth_link_is_one_latency_plus_bytes_over_bandwidth() -> None:
    link = link_model(get_hardware("a100-40g-pcie").link)
    nbytes = 2048 * HIDDEN_BYTES
    assert link.p2p_ms(nbytes) == pytest.approx(0.042 + nbytes / 22.5e6)
    assert link.all_reduce_ms(nbytes, 4) == pytest.approx(0.042 + 1.5 * nbytes / 22.5e6)
    assert link.all_gather_ms(nbytes, 4) == pytest.approx(0.042 + 0.75 * nbytes / 22.5e6)
    assert link.all_reduce_ms(nbytes, 1) == 0.0 and link.p2p_ms(0) == 0.0
    # the host-staged ring prices a prefill chunk's all-reduce above the published link
    assert NOP2P.all_reduce_ms(nbytes, 4) > link.all_reduce_ms(nbytes, 4)


def test_unknown_link_model_is_one_clear_error() -> None:
    with pytest.raises(UserError, match="model='fluid'.*nccl-ring, latency-bandwidth"):
        LinkSpec(name="x", p2p=True, bus_gbps=10.0, model="fluid")
