"""Hardware specs and the 80 GB -> 40 GB PCIe roofline correction."""

from __future__ import annotations

import numpy as np
import pytest

from ppsched.core.errors import UserError
from ppsched.sim.cost.linear import extrapolate, roofline_factor
from ppsched.sim.hardware import get_hardware, known_hardware


def test_known_hardware_and_unknown_name() -> None:
    assert known_hardware() == ("a100-40g-pcie", "a100-40g-pcie-nop2p", "a100-40g-pcie-p2p",
                                "a100-80g")
    pcie = get_hardware("A100-40G-PCIE")
    assert pcie.hbm_gbps == 1555.0 and pcie.bf16_tflops == 312.0
    assert 42.0 < pcie.gpu_mem_gb < 42.6
    assert dict(pcie.sources)["hbm_gbps"]
    with pytest.raises(UserError, match=r"unknown hardware 'v100'.*a100-40g-pcie"):
        get_hardware("v100")


def test_roofline_factor_memory_vs_compute_bound() -> None:
    p80, p40 = get_hardware("a100-80g"), get_hardware("a100-40g-pcie")
    ratio = 2039.0 / 1555.0
    tokens = np.array([1, 16, 4096])
    # elementwise ops only move bytes
    assert np.allclose(roofline_factor((5120,), tokens, p80, p40), ratio)
    gemm = roofline_factor((5120, 27648), tokens, p80, p40)
    assert gemm[0] == pytest.approx(ratio)  # decode GEMV: weight streaming
    assert gemm[2] == pytest.approx(1.0)  # 4096-token GEMM: compute-bound on both


def test_extrapolate_uses_last_band_secant() -> None:
    curve = [float(i) * 2 for i in range(4097)]
    assert extrapolate(curve, 100) == 200.0
    assert extrapolate(curve, 5000) == pytest.approx(10000.0)
