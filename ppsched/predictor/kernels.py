"""ALP's and the device fit's learning steps, unrolled, and the covariances they update
(generated: do not edit).

Written by ``python scripts/gen_kernels.py`` from ``kernels_source.py``; see ``rls_kernels`` and
``alp_kernel`` for what each step computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isfinite


class Matrix4:
    """A 4x4 matrix, one float field per entry (generated)."""

    e0_0: float
    e0_1: float
    e0_2: float
    e0_3: float
    e1_0: float
    e1_1: float
    e1_2: float
    e1_3: float
    e2_0: float
    e2_1: float
    e2_2: float
    e2_3: float
    e3_0: float
    e3_1: float
    e3_2: float
    e3_3: float

    def __init__(self, rows: Sequence[Sequence[float]]) -> None:
        if len(rows) != 4 or any(len(row) != 4 for row in rows):
            raise ValueError(f"expected 4 rows of 4, got {len(rows)} rows")
        self.e0_0 = float(rows[0][0])
        self.e0_1 = float(rows[0][1])
        self.e0_2 = float(rows[0][2])
        self.e0_3 = float(rows[0][3])
        self.e1_0 = float(rows[1][0])
        self.e1_1 = float(rows[1][1])
        self.e1_2 = float(rows[1][2])
        self.e1_3 = float(rows[1][3])
        self.e2_0 = float(rows[2][0])
        self.e2_1 = float(rows[2][1])
        self.e2_2 = float(rows[2][2])
        self.e2_3 = float(rows[2][3])
        self.e3_0 = float(rows[3][0])
        self.e3_1 = float(rows[3][1])
        self.e3_2 = float(rows[3][2])
        self.e3_3 = float(rows[3][3])

    def rows(self) -> list[list[float]]:
        return [[self.e0_0, self.e0_1, self.e0_2, self.e0_3], [self.e1_0, self.e1_1, self.e1_2, self.e1_3], [self.e2_0, self.e2_1, self.e2_2, self.e2_3], [self.e3_0, self.e3_1, self.e3_2, self.e3_3]]


class Matrix5:
    """A 5x5 matrix, one float field per entry (generated)."""

    e0_0: float
    e0_1: float
    e0_2: float
    e0_3: float
    e0_4: float
    e1_0: float
    e1_1: float
    e1_2: float
    e1_3: float
    e1_4: float
    e2_0: float
    e2_1: float
    e2_2: float
    e2_3: float
    e2_4: float
    e3_0: float
    e3_1: float
    e3_2: float
    e3_3: float
    e3_4: float
    e4_0: float
    e4_1: float
    e4_2: float
    e4_3: float
    e4_4: float

    def __init__(self, rows: Sequence[Sequence[float]]) -> None:
        if len(rows) != 5 or any(len(row) != 5 for row in rows):
            raise ValueError(f"expected 5 rows of 5, got {len(rows)} rows")
        self.e0_0 = float(rows[0][0])
        self.e0_1 = float(rows[0][1])
        self.e0_2 = float(rows[0][2])
        self.e0_3 = float(rows[0][3])
        self.e0_4 = float(rows[0][4])
        self.e1_0 = float(rows[1][0])
        self.e1_1 = float(rows[1][1])
        self.e1_2 = float(rows[1][2])
        self.e1_3 = float(rows[1][3])
        self.e1_4 = float(rows[1][4])
        self.e2_0 = float(rows[2][0])
        self.e2_1 = float(rows[2][1])
        self.e2_2 = float(rows[2][2])
        self.e2_3 = float(rows[2][3])
        self.e2_4 = float(rows[2][4])
        self.e3_0 = float(rows[3][0])
        self.e3_1 = float(rows[3][1])
        self.e3_2 = float(rows[3][2])
        self.e3_3 = float(rows[3][3])
        self.e3_4 = float(rows[3][4])
        self.e4_0 = float(rows[4][0])
        self.e4_1 = float(rows[4][1])
        self.e4_2 = float(rows[4][2])
        self.e4_3 = float(rows[4][3])
        self.e4_4 = float(rows[4][4])

    def rows(self) -> list[list[float]]:
        return [[self.e0_0, self.e0_1, self.e0_2, self.e0_3, self.e0_4], [self.e1_0, self.e1_1, self.e1_2, self.e1_3, self.e1_4], [self.e2_0, self.e2_1, self.e2_2, self.e2_3, self.e2_4], [self.e3_0, self.e3_1, self.e3_2, self.e3_3, self.e3_4], [self.e4_0, self.e4_1, self.e4_2, self.e4_3, self.e4_4]]


class Matrix7:
    """A 7x7 matrix, one float field per entry (generated)."""

    e0_0: float
    e0_1: float
    e0_2: float
    e0_3: float
    e0_4: float
    e0_5: float
    e0_6: float
    e1_0: float
    e1_1: float
    e1_2: float
    e1_3: float
    e1_4: float
    e1_5: float
    e1_6: float
    e2_0: float
    e2_1: float
    e2_2: float
    e2_3: float
    e2_4: float
    e2_5: float
    e2_6: float
    e3_0: float
    e3_1: float
    e3_2: float
    e3_3: float
    e3_4: float
    e3_5: float
    e3_6: float
    e4_0: float
    e4_1: float
    e4_2: float
    e4_3: float
    e4_4: float
    e4_5: float
    e4_6: float
    e5_0: float
    e5_1: float
    e5_2: float
    e5_3: float
    e5_4: float
    e5_5: float
    e5_6: float
    e6_0: float
    e6_1: float
    e6_2: float
    e6_3: float
    e6_4: float
    e6_5: float
    e6_6: float

    def __init__(self, rows: Sequence[Sequence[float]]) -> None:
        if len(rows) != 7 or any(len(row) != 7 for row in rows):
            raise ValueError(f"expected 7 rows of 7, got {len(rows)} rows")
        self.e0_0 = float(rows[0][0])
        self.e0_1 = float(rows[0][1])
        self.e0_2 = float(rows[0][2])
        self.e0_3 = float(rows[0][3])
        self.e0_4 = float(rows[0][4])
        self.e0_5 = float(rows[0][5])
        self.e0_6 = float(rows[0][6])
        self.e1_0 = float(rows[1][0])
        self.e1_1 = float(rows[1][1])
        self.e1_2 = float(rows[1][2])
        self.e1_3 = float(rows[1][3])
        self.e1_4 = float(rows[1][4])
        self.e1_5 = float(rows[1][5])
        self.e1_6 = float(rows[1][6])
        self.e2_0 = float(rows[2][0])
        self.e2_1 = float(rows[2][1])
        self.e2_2 = float(rows[2][2])
        self.e2_3 = float(rows[2][3])
        self.e2_4 = float(rows[2][4])
        self.e2_5 = float(rows[2][5])
        self.e2_6 = float(rows[2][6])
        self.e3_0 = float(rows[3][0])
        self.e3_1 = float(rows[3][1])
        self.e3_2 = float(rows[3][2])
        self.e3_3 = float(rows[3][3])
        self.e3_4 = float(rows[3][4])
        self.e3_5 = float(rows[3][5])
        self.e3_6 = float(rows[3][6])
        self.e4_0 = float(rows[4][0])
        self.e4_1 = float(rows[4][1])
        self.e4_2 = float(rows[4][2])
        self.e4_3 = float(rows[4][3])
        self.e4_4 = float(rows[4][4])
        self.e4_5 = float(rows[4][5])
        self.e4_6 = float(rows[4][6])
        self.e5_0 = float(rows[5][0])
        self.e5_1 = float(rows[5][1])
        self.e5_2 = float(rows[5][2])
        self.e5_3 = float(rows[5][3])
        self.e5_4 = float(rows[5][4])
        self.e5_5 = float(rows[5][5])
        self.e5_6 = float(rows[5][6])
        self.e6_0 = float(rows[6][0])
        self.e6_1 = float(rows[6][1])
        self.e6_2 = float(rows[6][2])
        self.e6_3 = float(rows[6][3])
        self.e6_4 = float(rows[6][4])
        self.e6_5 = float(rows[6][5])
        self.e6_6 = float(rows[6][6])

    def rows(self) -> list[list[float]]:
        return [[self.e0_0, self.e0_1, self.e0_2, self.e0_3, self.e0_4, self.e0_5, self.e0_6], [self.e1_0, self.e1_1, self.e1_2, self.e1_3, self.e1_4, self.e1_5, self.e1_6], [self.e2_0, self.e2_1, self.e2_2, self.e2_3, self.e2_4, self.e2_5, self.e2_6], [self.e3_0, self.e3_1, self.e3_2, self.e3_3, self.e3_4, self.e3_5, self.e3_6], [self.e4_0, self.e4_1, self.e4_2, self.e4_3, self.e4_4, self.e4_5, self.e4_6], [self.e5_0, self.e5_1, self.e5_2, self.e5_3, self.e5_4, self.e5_5, self.e5_6], [self.e6_0, self.e6_1, self.e6_2, self.e6_3, self.e6_4, self.e6_5, self.e6_6]]


def alp_step_4(p: Matrix4, w: list[float], x: list[float], err: float, forgetting: float, precisions: tuple[float, ...], scale: float) -> int:
    x0, x1, x2, x3 = x
    w0, w1, w2, w3 = w
    r0_0 = p.e0_0
    r0_1 = p.e0_1
    r0_2 = p.e0_2
    r0_3 = p.e0_3
    r1_0 = p.e1_0
    r1_1 = p.e1_1
    r1_2 = p.e1_2
    r1_3 = p.e1_3
    r2_0 = p.e2_0
    r2_1 = p.e2_1
    r2_2 = p.e2_2
    r2_3 = p.e2_3
    r3_0 = p.e3_0
    r3_1 = p.e3_1
    r3_2 = p.e3_2
    r3_3 = p.e3_3
    px0 = 0.0 + r0_0 * x0 + r0_1 * x1 + r0_2 * x2 + r0_3 * x3
    px1 = 0.0 + r1_0 * x0 + r1_1 * x1 + r1_2 * x2 + r1_3 * x3
    px2 = 0.0 + r2_0 * x0 + r2_1 * x1 + r2_2 * x2 + r2_3 * x3
    px3 = 0.0 + r3_0 * x0 + r3_1 * x1 + r3_2 * x2 + r3_3 * x3
    denom = forgetting + (0.0 + x0 * px0 + x1 * px1 + x2 * px2 + x3 * px3)
    if not (denom > 0 and isfinite(denom)):
        return -1
    inv_lambda = 1.0 / forgetting
    k0 = px0 / denom
    w0 += k0 * err
    v0_0 = (r0_0 - k0 * px0) * inv_lambda
    v0_1 = (r0_1 - k0 * px1) * inv_lambda
    v0_2 = (r0_2 - k0 * px2) * inv_lambda
    v0_3 = (r0_3 - k0 * px3) * inv_lambda
    k1 = px1 / denom
    w1 += k1 * err
    v1_1 = (r1_1 - k1 * px1) * inv_lambda
    v1_2 = (r1_2 - k1 * px2) * inv_lambda
    v1_3 = (r1_3 - k1 * px3) * inv_lambda
    k2 = px2 / denom
    w2 += k2 * err
    v2_2 = (r2_2 - k2 * px2) * inv_lambda
    v2_3 = (r2_3 - k2 * px3) * inv_lambda
    k3 = px3 / denom
    w3 += k3 * err
    v3_3 = (r3_3 - k3 * px3) * inv_lambda
    forgotten = 1.0 - forgetting
    if forgotten > 0.0:
        a0, a1, a2, a3 = v0_0, v0_1, v0_2, v0_3
        precision = precisions[0]
        prior = 0.0
        denom = 1.0 / (forgotten * precision) + a0
        gain = (prior - w0) / denom
        w0 += a0 * gain
        k0 = a0 / denom
        v0_0 = v0_0 - k0 * a0
        v0_1 = v0_1 - k0 * a1
        v0_2 = v0_2 - k0 * a2
        v0_3 = v0_3 - k0 * a3
        w1 += a1 * gain
        k1 = a1 / denom
        v1_1 = v1_1 - k1 * a1
        v1_2 = v1_2 - k1 * a2
        v1_3 = v1_3 - k1 * a3
        w2 += a2 * gain
        k2 = a2 / denom
        v2_2 = v2_2 - k2 * a2
        v2_3 = v2_3 - k2 * a3
        w3 += a3 * gain
        k3 = a3 / denom
        v3_3 = v3_3 - k3 * a3
        a0, a1, a2, a3 = v0_1, v1_1, v1_2, v1_3
        precision = precisions[1]
        prior = 0.0
        denom = 1.0 / (forgotten * precision) + a1
        gain = (prior - w1) / denom
        w0 += a0 * gain
        k0 = a0 / denom
        v0_0 = v0_0 - k0 * a0
        v0_1 = v0_1 - k0 * a1
        v0_2 = v0_2 - k0 * a2
        v0_3 = v0_3 - k0 * a3
        w1 += a1 * gain
        k1 = a1 / denom
        v1_1 = v1_1 - k1 * a1
        v1_2 = v1_2 - k1 * a2
        v1_3 = v1_3 - k1 * a3
        w2 += a2 * gain
        k2 = a2 / denom
        v2_2 = v2_2 - k2 * a2
        v2_3 = v2_3 - k2 * a3
        w3 += a3 * gain
        k3 = a3 / denom
        v3_3 = v3_3 - k3 * a3
    p.e0_0 = v0_0
    p.e0_1 = v0_1
    p.e0_2 = v0_2
    p.e0_3 = v0_3
    p.e1_0 = v0_1
    p.e1_1 = v1_1
    p.e1_2 = v1_2
    p.e1_3 = v1_3
    p.e2_0 = v0_2
    p.e2_1 = v1_2
    p.e2_2 = v2_2
    p.e2_3 = v2_3
    p.e3_0 = v0_3
    p.e3_1 = v1_3
    p.e3_2 = v2_3
    p.e3_3 = v3_3
    w[:] = [w0, w1, w2, w3]
    healthy = (0.0 < v0_0 < 100000000.0 and 0.0 < v1_1 < 100000000.0 and 0.0 < v2_2 < 100000000.0 and 0.0 < v3_3 < 100000000.0 and isfinite(w0) and isfinite(w1) and isfinite(w2) and isfinite(w3))
    return 1 if healthy else 0


def alp_step_5(p: Matrix5, w: list[float], x: list[float], err: float, forgetting: float, precisions: tuple[float, ...], scale: float) -> int:
    x0, x1, x2, x3, x4 = x
    w0, w1, w2, w3, w4 = w
    r0_0 = p.e0_0
    r0_1 = p.e0_1
    r0_2 = p.e0_2
    r0_3 = p.e0_3
    r0_4 = p.e0_4
    r1_0 = p.e1_0
    r1_1 = p.e1_1
    r1_2 = p.e1_2
    r1_3 = p.e1_3
    r1_4 = p.e1_4
    r2_0 = p.e2_0
    r2_1 = p.e2_1
    r2_2 = p.e2_2
    r2_3 = p.e2_3
    r2_4 = p.e2_4
    r3_0 = p.e3_0
    r3_1 = p.e3_1
    r3_2 = p.e3_2
    r3_3 = p.e3_3
    r3_4 = p.e3_4
    r4_0 = p.e4_0
    r4_1 = p.e4_1
    r4_2 = p.e4_2
    r4_3 = p.e4_3
    r4_4 = p.e4_4
    px0 = 0.0 + r0_0 * x0 + r0_1 * x1 + r0_2 * x2 + r0_3 * x3 + r0_4 * x4
    px1 = 0.0 + r1_0 * x0 + r1_1 * x1 + r1_2 * x2 + r1_3 * x3 + r1_4 * x4
    px2 = 0.0 + r2_0 * x0 + r2_1 * x1 + r2_2 * x2 + r2_3 * x3 + r2_4 * x4
    px3 = 0.0 + r3_0 * x0 + r3_1 * x1 + r3_2 * x2 + r3_3 * x3 + r3_4 * x4
    px4 = 0.0 + r4_0 * x0 + r4_1 * x1 + r4_2 * x2 + r4_3 * x3 + r4_4 * x4
    denom = forgetting + (0.0 + x0 * px0 + x1 * px1 + x2 * px2 + x3 * px3 + x4 * px4)
    if not (denom > 0 and isfinite(denom)):
        return -1
    inv_lambda = 1.0 / forgetting
    k0 = px0 / denom
    w0 += k0 * err
    v0_0 = (r0_0 - k0 * px0) * inv_lambda
    v0_1 = (r0_1 - k0 * px1) * inv_lambda
    v0_2 = (r0_2 - k0 * px2) * inv_lambda
    v0_3 = (r0_3 - k0 * px3) * inv_lambda
    v0_4 = (r0_4 - k0 * px4) * inv_lambda
    k1 = px1 / denom
    w1 += k1 * err
    v1_1 = (r1_1 - k1 * px1) * inv_lambda
    v1_2 = (r1_2 - k1 * px2) * inv_lambda
    v1_3 = (r1_3 - k1 * px3) * inv_lambda
    v1_4 = (r1_4 - k1 * px4) * inv_lambda
    k2 = px2 / denom
    w2 += k2 * err
    v2_2 = (r2_2 - k2 * px2) * inv_lambda
    v2_3 = (r2_3 - k2 * px3) * inv_lambda
    v2_4 = (r2_4 - k2 * px4) * inv_lambda
    k3 = px3 / denom
    w3 += k3 * err
    v3_3 = (r3_3 - k3 * px3) * inv_lambda
    v3_4 = (r3_4 - k3 * px4) * inv_lambda
    k4 = px4 / denom
    w4 += k4 * err
    v4_4 = (r4_4 - k4 * px4) * inv_lambda
    forgotten = 1.0 - forgetting
    if forgotten > 0.0:
        a0, a1, a2, a3, a4 = v0_0, v0_1, v0_2, v0_3, v0_4
        precision = precisions[0]
        prior = 0.0
        denom = 1.0 / (forgotten * precision) + a0
        gain = (prior - w0) / denom
        w0 += a0 * gain
        k0 = a0 / denom
        v0_0 = v0_0 - k0 * a0
        v0_1 = v0_1 - k0 * a1
        v0_2 = v0_2 - k0 * a2
        v0_3 = v0_3 - k0 * a3
        v0_4 = v0_4 - k0 * a4
        w1 += a1 * gain
        k1 = a1 / denom
        v1_1 = v1_1 - k1 * a1
        v1_2 = v1_2 - k1 * a2
        v1_3 = v1_3 - k1 * a3
        v1_4 = v1_4 - k1 * a4
        w2 += a2 * gain
        k2 = a2 / denom
        v2_2 = v2_2 - k2 * a2
        v2_3 = v2_3 - k2 * a3
        v2_4 = v2_4 - k2 * a4
        w3 += a3 * gain
        k3 = a3 / denom
        v3_3 = v3_3 - k3 * a3
        v3_4 = v3_4 - k3 * a4
        w4 += a4 * gain
        k4 = a4 / denom
        v4_4 = v4_4 - k4 * a4
        a0, a1, a2, a3, a4 = v0_1, v1_1, v1_2, v1_3, v1_4
        precision = precisions[1]
        prior = 0.0
        denom = 1.0 / (forgotten * precision) + a1
        gain = (prior - w1) / denom
        w0 += a0 * gain
        k0 = a0 / denom
        v0_0 = v0_0 - k0 * a0
        v0_1 = v0_1 - k0 * a1
        v0_2 = v0_2 - k0 * a2
        v0_3 = v0_3 - k0 * a3
        v0_4 = v0_4 - k0 * a4
        w1 += a1 * gain
        k1 = a1 / denom
        v1_1 = v1_1 - k1 * a1
        v1_2 = v1_2 - k1 * a2
        v1_3 = v1_3 - k1 * a3
        v1_4 = v1_4 - k1 * a4
        w2 += a2 * gain
        k2 = a2 / denom
        v2_2 = v2_2 - k2 * a2
        v2_3 = v2_3 - k2 * a3
        v2_4 = v2_4 - k2 * a4
        w3 += a3 * gain
        k3 = a3 / denom
        v3_3 = v3_3 - k3 * a3
        v3_4 = v3_4 - k3 * a4
        w4 += a4 * gain
        k4 = a4 / denom
        v4_4 = v4_4 - k4 * a4
        a0, a1, a2, a3, a4 = v0_4, v1_4, v2_4, v3_4, v4_4
        precision = precisions[2]
        prior = 0.0
        prior = (1.0 / scale - 1.0) * 100.0
        precision /= scale * scale
        z2 = (w4 - prior) ** 2 * precision
        precision *= (4.0 + 1.0) / (4.0 + z2)
        denom = 1.0 / (forgotten * precision) + a4
        gain = (prior - w4) / denom
        w0 += a0 * gain
        k0 = a0 / denom
        v0_0 = v0_0 - k0 * a0
        v0_1 = v0_1 - k0 * a1
        v0_2 = v0_2 - k0 * a2
        v0_3 = v0_3 - k0 * a3
        v0_4 = v0_4 - k0 * a4
        w1 += a1 * gain
        k1 = a1 / denom
        v1_1 = v1_1 - k1 * a1
        v1_2 = v1_2 - k1 * a2
        v1_3 = v1_3 - k1 * a3
        v1_4 = v1_4 - k1 * a4
        w2 += a2 * gain
        k2 = a2 / denom
        v2_2 = v2_2 - k2 * a2
        v2_3 = v2_3 - k2 * a3
        v2_4 = v2_4 - k2 * a4
        w3 += a3 * gain
        k3 = a3 / denom
        v3_3 = v3_3 - k3 * a3
        v3_4 = v3_4 - k3 * a4
        w4 += a4 * gain
        k4 = a4 / denom
        v4_4 = v4_4 - k4 * a4
        if not w3 >= 0.0:
            a0, a1, a2, a3, a4 = v0_3, v1_3, v2_3, v3_3, v3_4
            precision = precisions[3]
            prior = 0.0
            denom = 1.0 / (forgotten * precision) + a3
            gain = (prior - w3) / denom
            w0 += a0 * gain
            k0 = a0 / denom
            v0_0 = v0_0 - k0 * a0
            v0_1 = v0_1 - k0 * a1
            v0_2 = v0_2 - k0 * a2
            v0_3 = v0_3 - k0 * a3
            v0_4 = v0_4 - k0 * a4
            w1 += a1 * gain
            k1 = a1 / denom
            v1_1 = v1_1 - k1 * a1
            v1_2 = v1_2 - k1 * a2
            v1_3 = v1_3 - k1 * a3
            v1_4 = v1_4 - k1 * a4
            w2 += a2 * gain
            k2 = a2 / denom
            v2_2 = v2_2 - k2 * a2
            v2_3 = v2_3 - k2 * a3
            v2_4 = v2_4 - k2 * a4
            w3 += a3 * gain
            k3 = a3 / denom
            v3_3 = v3_3 - k3 * a3
            v3_4 = v3_4 - k3 * a4
            w4 += a4 * gain
            k4 = a4 / denom
            v4_4 = v4_4 - k4 * a4
        a0, a1, a2, a3, a4 = v0_3, v1_3, v2_3, v3_3, v3_4
        precision = precisions[4]
        prior = 0.0
        denom = 1.0 / (forgotten * precision) + a3
        gain = (prior - w3) / denom
        w0 += a0 * gain
        k0 = a0 / denom
        v0_0 = v0_0 - k0 * a0
        v0_1 = v0_1 - k0 * a1
        v0_2 = v0_2 - k0 * a2
        v0_3 = v0_3 - k0 * a3
        v0_4 = v0_4 - k0 * a4
        w1 += a1 * gain
        k1 = a1 / denom
        v1_1 = v1_1 - k1 * a1
        v1_2 = v1_2 - k1 * a2
        v1_3 = v1_3 - k1 * a3
        v1_4 = v1_4 - k1 * a4
        w2 += a2 * gain
        k2 = a2 / denom
        v2_2 = v2_2 - k2 * a2
        v2_3 = v2_3 - k2 * a3
        v2_4 = v2_4 - k2 * a4
        w3 += a3 * gain
        k3 = a3 / denom
        v3_3 = v3_3 - k3 * a3
        v3_4 = v3_4 - k3 * a4
        w4 += a4 * gain
        k4 = a4 / denom
        v4_4 = v4_4 - k4 * a4
    p.e0_0 = v0_0
    p.e0_1 = v0_1
    p.e0_2 = v0_2
    p.e0_3 = v0_3
    p.e0_4 = v0_4
    p.e1_0 = v0_1
    p.e1_1 = v1_1
    p.e1_2 = v1_2
    p.e1_3 = v1_3
    p.e1_4 = v1_4
    p.e2_0 = v0_2
    p.e2_1 = v1_2
    p.e2_2 = v2_2
    p.e2_3 = v2_3
    p.e2_4 = v2_4
    p.e3_0 = v0_3
    p.e3_1 = v1_3
    p.e3_2 = v2_3
    p.e3_3 = v3_3
    p.e3_4 = v3_4
    p.e4_0 = v0_4
    p.e4_1 = v1_4
    p.e4_2 = v2_4
    p.e4_3 = v3_4
    p.e4_4 = v4_4
    w[:] = [w0, w1, w2, w3, w4]
    healthy = (0.0 < v0_0 < 100000000.0 and 0.0 < v1_1 < 100000000.0 and 0.0 < v2_2 < 100000000.0 and 0.0 < v3_3 < 100000000.0 and 0.0 < v4_4 < 100000000.0 and isfinite(w0) and isfinite(w1) and isfinite(w2) and isfinite(w3) and isfinite(w4))
    return 1 if healthy else 0


def anchor_step_4(p: Matrix4, w: list[float], pa: list[float], gain: float, denom: float) -> None:
    a0, a1, a2, a3 = pa
    r0_0 = p.e0_0
    r0_1 = p.e0_1
    r0_2 = p.e0_2
    r0_3 = p.e0_3
    r1_1 = p.e1_1
    r1_2 = p.e1_2
    r1_3 = p.e1_3
    r2_2 = p.e2_2
    r2_3 = p.e2_3
    r3_3 = p.e3_3
    w[0] += a0 * gain
    k0 = a0 / denom
    v0_0 = r0_0 - k0 * a0
    v0_1 = r0_1 - k0 * a1
    v0_2 = r0_2 - k0 * a2
    v0_3 = r0_3 - k0 * a3
    w[1] += a1 * gain
    k1 = a1 / denom
    v1_1 = r1_1 - k1 * a1
    v1_2 = r1_2 - k1 * a2
    v1_3 = r1_3 - k1 * a3
    w[2] += a2 * gain
    k2 = a2 / denom
    v2_2 = r2_2 - k2 * a2
    v2_3 = r2_3 - k2 * a3
    w[3] += a3 * gain
    k3 = a3 / denom
    v3_3 = r3_3 - k3 * a3
    p.e0_0 = v0_0
    p.e0_1 = v0_1
    p.e0_2 = v0_2
    p.e0_3 = v0_3
    p.e1_0 = v0_1
    p.e1_1 = v1_1
    p.e1_2 = v1_2
    p.e1_3 = v1_3
    p.e2_0 = v0_2
    p.e2_1 = v1_2
    p.e2_2 = v2_2
    p.e2_3 = v2_3
    p.e3_0 = v0_3
    p.e3_1 = v1_3
    p.e3_2 = v2_3
    p.e3_3 = v3_3


def anchor_step_5(p: Matrix5, w: list[float], pa: list[float], gain: float, denom: float) -> None:
    a0, a1, a2, a3, a4 = pa
    r0_0 = p.e0_0
    r0_1 = p.e0_1
    r0_2 = p.e0_2
    r0_3 = p.e0_3
    r0_4 = p.e0_4
    r1_1 = p.e1_1
    r1_2 = p.e1_2
    r1_3 = p.e1_3
    r1_4 = p.e1_4
    r2_2 = p.e2_2
    r2_3 = p.e2_3
    r2_4 = p.e2_4
    r3_3 = p.e3_3
    r3_4 = p.e3_4
    r4_4 = p.e4_4
    w[0] += a0 * gain
    k0 = a0 / denom
    v0_0 = r0_0 - k0 * a0
    v0_1 = r0_1 - k0 * a1
    v0_2 = r0_2 - k0 * a2
    v0_3 = r0_3 - k0 * a3
    v0_4 = r0_4 - k0 * a4
    w[1] += a1 * gain
    k1 = a1 / denom
    v1_1 = r1_1 - k1 * a1
    v1_2 = r1_2 - k1 * a2
    v1_3 = r1_3 - k1 * a3
    v1_4 = r1_4 - k1 * a4
    w[2] += a2 * gain
    k2 = a2 / denom
    v2_2 = r2_2 - k2 * a2
    v2_3 = r2_3 - k2 * a3
    v2_4 = r2_4 - k2 * a4
    w[3] += a3 * gain
    k3 = a3 / denom
    v3_3 = r3_3 - k3 * a3
    v3_4 = r3_4 - k3 * a4
    w[4] += a4 * gain
    k4 = a4 / denom
    v4_4 = r4_4 - k4 * a4
    p.e0_0 = v0_0
    p.e0_1 = v0_1
    p.e0_2 = v0_2
    p.e0_3 = v0_3
    p.e0_4 = v0_4
    p.e1_0 = v0_1
    p.e1_1 = v1_1
    p.e1_2 = v1_2
    p.e1_3 = v1_3
    p.e1_4 = v1_4
    p.e2_0 = v0_2
    p.e2_1 = v1_2
    p.e2_2 = v2_2
    p.e2_3 = v2_3
    p.e2_4 = v2_4
    p.e3_0 = v0_3
    p.e3_1 = v1_3
    p.e3_2 = v2_3
    p.e3_3 = v3_3
    p.e3_4 = v3_4
    p.e4_0 = v0_4
    p.e4_1 = v1_4
    p.e4_2 = v2_4
    p.e4_3 = v3_4
    p.e4_4 = v4_4


def relative_rls_step_7(p: Matrix7, w: list[float], x: list[float], inv_y: float, target: float, forgetting: float) -> bool:
    y0, y1, y2, y3, y4, y5, y6 = x
    x0 = y0 * inv_y
    x1 = y1 * inv_y
    x2 = y2 * inv_y
    x3 = y3 * inv_y
    x4 = y4 * inv_y
    x5 = y5 * inv_y
    x6 = y6 * inv_y
    err = target - (0.0 + w[0] * x0 + w[1] * x1 + w[2] * x2 + w[3] * x3 + w[4] * x4 + w[5] * x5 + w[6] * x6)
    r0_0 = p.e0_0
    r0_1 = p.e0_1
    r0_2 = p.e0_2
    r0_3 = p.e0_3
    r0_4 = p.e0_4
    r0_5 = p.e0_5
    r0_6 = p.e0_6
    r1_0 = p.e1_0
    r1_1 = p.e1_1
    r1_2 = p.e1_2
    r1_3 = p.e1_3
    r1_4 = p.e1_4
    r1_5 = p.e1_5
    r1_6 = p.e1_6
    r2_0 = p.e2_0
    r2_1 = p.e2_1
    r2_2 = p.e2_2
    r2_3 = p.e2_3
    r2_4 = p.e2_4
    r2_5 = p.e2_5
    r2_6 = p.e2_6
    r3_0 = p.e3_0
    r3_1 = p.e3_1
    r3_2 = p.e3_2
    r3_3 = p.e3_3
    r3_4 = p.e3_4
    r3_5 = p.e3_5
    r3_6 = p.e3_6
    r4_0 = p.e4_0
    r4_1 = p.e4_1
    r4_2 = p.e4_2
    r4_3 = p.e4_3
    r4_4 = p.e4_4
    r4_5 = p.e4_5
    r4_6 = p.e4_6
    r5_0 = p.e5_0
    r5_1 = p.e5_1
    r5_2 = p.e5_2
    r5_3 = p.e5_3
    r5_4 = p.e5_4
    r5_5 = p.e5_5
    r5_6 = p.e5_6
    r6_0 = p.e6_0
    r6_1 = p.e6_1
    r6_2 = p.e6_2
    r6_3 = p.e6_3
    r6_4 = p.e6_4
    r6_5 = p.e6_5
    r6_6 = p.e6_6
    px0 = 0.0 + r0_0 * x0 + r0_1 * x1 + r0_2 * x2 + r0_3 * x3 + r0_4 * x4 + r0_5 * x5 + r0_6 * x6
    px1 = 0.0 + r1_0 * x0 + r1_1 * x1 + r1_2 * x2 + r1_3 * x3 + r1_4 * x4 + r1_5 * x5 + r1_6 * x6
    px2 = 0.0 + r2_0 * x0 + r2_1 * x1 + r2_2 * x2 + r2_3 * x3 + r2_4 * x4 + r2_5 * x5 + r2_6 * x6
    px3 = 0.0 + r3_0 * x0 + r3_1 * x1 + r3_2 * x2 + r3_3 * x3 + r3_4 * x4 + r3_5 * x5 + r3_6 * x6
    px4 = 0.0 + r4_0 * x0 + r4_1 * x1 + r4_2 * x2 + r4_3 * x3 + r4_4 * x4 + r4_5 * x5 + r4_6 * x6
    px5 = 0.0 + r5_0 * x0 + r5_1 * x1 + r5_2 * x2 + r5_3 * x3 + r5_4 * x4 + r5_5 * x5 + r5_6 * x6
    px6 = 0.0 + r6_0 * x0 + r6_1 * x1 + r6_2 * x2 + r6_3 * x3 + r6_4 * x4 + r6_5 * x5 + r6_6 * x6
    denom = forgetting + (0.0 + x0 * px0 + x1 * px1 + x2 * px2 + x3 * px3 + x4 * px4 + x5 * px5 + x6 * px6)
    inv_lambda = 1.0 / forgetting
    k0 = px0 / denom
    w[0] += k0 * err
    v0_0 = (r0_0 - k0 * px0) * inv_lambda
    v0_1 = (r0_1 - k0 * px1) * inv_lambda
    v0_2 = (r0_2 - k0 * px2) * inv_lambda
    v0_3 = (r0_3 - k0 * px3) * inv_lambda
    v0_4 = (r0_4 - k0 * px4) * inv_lambda
    v0_5 = (r0_5 - k0 * px5) * inv_lambda
    v0_6 = (r0_6 - k0 * px6) * inv_lambda
    k1 = px1 / denom
    w[1] += k1 * err
    v1_1 = (r1_1 - k1 * px1) * inv_lambda
    v1_2 = (r1_2 - k1 * px2) * inv_lambda
    v1_3 = (r1_3 - k1 * px3) * inv_lambda
    v1_4 = (r1_4 - k1 * px4) * inv_lambda
    v1_5 = (r1_5 - k1 * px5) * inv_lambda
    v1_6 = (r1_6 - k1 * px6) * inv_lambda
    k2 = px2 / denom
    w[2] += k2 * err
    v2_2 = (r2_2 - k2 * px2) * inv_lambda
    v2_3 = (r2_3 - k2 * px3) * inv_lambda
    v2_4 = (r2_4 - k2 * px4) * inv_lambda
    v2_5 = (r2_5 - k2 * px5) * inv_lambda
    v2_6 = (r2_6 - k2 * px6) * inv_lambda
    k3 = px3 / denom
    w[3] += k3 * err
    v3_3 = (r3_3 - k3 * px3) * inv_lambda
    v3_4 = (r3_4 - k3 * px4) * inv_lambda
    v3_5 = (r3_5 - k3 * px5) * inv_lambda
    v3_6 = (r3_6 - k3 * px6) * inv_lambda
    k4 = px4 / denom
    w[4] += k4 * err
    v4_4 = (r4_4 - k4 * px4) * inv_lambda
    v4_5 = (r4_5 - k4 * px5) * inv_lambda
    v4_6 = (r4_6 - k4 * px6) * inv_lambda
    k5 = px5 / denom
    w[5] += k5 * err
    v5_5 = (r5_5 - k5 * px5) * inv_lambda
    v5_6 = (r5_6 - k5 * px6) * inv_lambda
    k6 = px6 / denom
    w[6] += k6 * err
    v6_6 = (r6_6 - k6 * px6) * inv_lambda
    p.e0_0 = v0_0
    p.e0_1 = v0_1
    p.e0_2 = v0_2
    p.e0_3 = v0_3
    p.e0_4 = v0_4
    p.e0_5 = v0_5
    p.e0_6 = v0_6
    p.e1_0 = v0_1
    p.e1_1 = v1_1
    p.e1_2 = v1_2
    p.e1_3 = v1_3
    p.e1_4 = v1_4
    p.e1_5 = v1_5
    p.e1_6 = v1_6
    p.e2_0 = v0_2
    p.e2_1 = v1_2
    p.e2_2 = v2_2
    p.e2_3 = v2_3
    p.e2_4 = v2_4
    p.e2_5 = v2_5
    p.e2_6 = v2_6
    p.e3_0 = v0_3
    p.e3_1 = v1_3
    p.e3_2 = v2_3
    p.e3_3 = v3_3
    p.e3_4 = v3_4
    p.e3_5 = v3_5
    p.e3_6 = v3_6
    p.e4_0 = v0_4
    p.e4_1 = v1_4
    p.e4_2 = v2_4
    p.e4_3 = v3_4
    p.e4_4 = v4_4
    p.e4_5 = v4_5
    p.e4_6 = v4_6
    p.e5_0 = v0_5
    p.e5_1 = v1_5
    p.e5_2 = v2_5
    p.e5_3 = v3_5
    p.e5_4 = v4_5
    p.e5_5 = v5_5
    p.e5_6 = v5_6
    p.e6_0 = v0_6
    p.e6_1 = v1_6
    p.e6_2 = v2_6
    p.e6_3 = v3_6
    p.e6_4 = v4_6
    p.e6_5 = v5_6
    p.e6_6 = v6_6
    return 0.0 < v0_0 < 100000000.0 and 0.0 < v1_1 < 100000000.0 and 0.0 < v2_2 < 100000000.0 and 0.0 < v3_3 < 100000000.0 and 0.0 < v4_4 < 100000000.0 and 0.0 < v5_5 < 100000000.0 and 0.0 < v6_6 < 100000000.0
