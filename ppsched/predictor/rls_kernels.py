"""Unrolled recursive-least-squares steps for a fixed number of weights (ALP's 4-5, the fit's 7).

ALP and the device fit learn from every stage measurement, so their symmetric rank-1 updates run
once per microbatch. Written as loops over the covariance's rows they cost ~20 us a step in
Python; unrolled into straight-line arithmetic they cost a third of that. The source of each
kernel is generated once per size below, and performs exactly the loops' operations in the
loops' order (the same sums from 0, left to right; every product and difference as the loops
form it), so results are bit-identical to the loops (tests/test_rls_kernels.py).

The kernels take the covariance ``p`` as a ``Matrix{n}`` (``matrix_source``): one float field
per entry, so that the compiled steps read and write unboxed floats (as a list of row lists
every step boxed n^2 floats anew, ~15% of a predictive simulation). They update it in place:
entry (i, j) and (j, i) both get the value the loops compute for i <= j from the upper
triangle, which is what they read.

The sizes ALP and the device fit run are generated ahead of time into ``kernels.py`` (typed, so
that ``make native`` compiles them; ``scripts/gen_kernels.py``); the functions below build any
size on demand from the same source.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

RlsStep = Callable[[Any, list[float], list[float], float, float, bool], bool]
AnchorStep = Callable[[Any, list[float], list[float], float, float], None]
RelativeRlsStep = Callable[[Any, list[float], list[float], float, float, float], bool]


def dot_source(row: str, vec: str, n: int) -> str:
    """sum(map(mul, row, vec)) as sum() forms it: from 0, left to right."""
    return "0.0 + " + " + ".join(f"{row}{j} * {vec}{j}" for j in range(n))


def gain_source(n: int) -> list[str]:
    """The RLS step's px = P x and denom = forgetting + x . px, over unpacked ``r{i}_{j}``."""
    return ([f"    px{i} = {dot_source(f'r{i}_', 'x', n)}" for i in range(n)]
            + [f"    denom = forgetting + ({dot_source('x', 'px', n)})"])


def update_source(n: int, weight: str) -> list[str]:
    """The RLS step's k = px / denom, w += k err and P = (P - k px^T) / forgetting into the upper
    triangle ``v{i}_{j}``; ``weight`` names weight i in the generated code (a format of i)."""
    lines = ["    inv_lambda = 1.0 / forgetting"]
    for i in range(n):
        lines += [f"    k{i} = px{i} / denom", f"    {weight.format(i=i)} += k{i} * err"]
        lines += [f"    v{i}_{j} = (r{i}_{j} - k{i} * px{j}) * inv_lambda" for j in range(i, n)]
    return lines


def names_source(prefix: str, n: int) -> str:
    """``prefix0, prefix1, ...``: a tuple target or value (a trailing comma for one name)."""
    return ", ".join(f"{prefix}{j}" for j in range(n)) + ("," if n == 1 else "")


def entry_source(i: int, j: int) -> str:
    """The covariance entry (i, j), read from the upper triangle ``v{i}_{j}``."""
    return f"v{min(i, j)}_{max(i, j)}"


def rows_source(n: int, upper: bool = False) -> list[str]:
    """Read every entry of ``p`` (``upper``: those of the upper triangle) into ``r{i}_{j}``."""
    return [f"    r{i}_{j} = p.e{i}_{j}" for i in range(n) for j in range(i if upper else 0, n)]


def store_source(n: int) -> list[str]:
    """Write the upper triangle back into both triangles of ``p``."""
    return [f"    p.e{i}_{j} = {entry_source(i, j)}" for i in range(n) for j in range(n)]


def matrix_source(n: int) -> list[str]:
    """``class Matrix{n}``: an n x n matrix as n^2 float fields ``e{i}_{j}``, built from and
    read back as row lists (``rows``)."""
    fields = [(i, j) for i in range(n) for j in range(n)]
    return [f"class Matrix{n}:",
            f'    """A {n}x{n} matrix, one float field per entry (generated)."""',
            "", *[f"    e{i}_{j}: float" for i, j in fields], "",
            "    def __init__(self, rows: Sequence[Sequence[float]]) -> None:",
            f"        if len(rows) != {n} or any(len(row) != {n} for row in rows):",
            f"            raise ValueError(f\"expected {n} rows of {n}, got {{len(rows)}} rows\")",
            *[f"        self.e{i}_{j} = float(rows[{i}][{j}])" for i, j in fields], "",
            "    def rows(self) -> list[list[float]]:",
            "        return [" + ", ".join(
                "[" + ", ".join(f"self.e{i}_{j}" for j in range(n)) + "]" for i in range(n))
            + "]"]


def _define(source: list[str], name: str, n: int) -> Any:
    """What ``source`` defines as ``name`` (``kernels.py``'s names for size ``n`` in scope)."""
    namespace: dict = {"isfinite": math.isfinite, "Sequence": Sequence}
    if name != f"Matrix{n}":
        namespace[f"Matrix{n}"] = matrix(n)
    exec("\n".join(source), namespace)  # noqa: S102 - generated from sizes and constants alone
    return namespace[name]


@cache
def matrix(n: int) -> type:
    """``Matrix{n}`` (``matrix_source``), the covariance the steps below take."""
    return _define(matrix_source(n), f"Matrix{n}", n)


def rls_step_source(n: int, name: str = "step") -> list[str]:
    lines = [f"def {name}(p: Matrix{n}, w: list[float], x: list[float], "
             "err: float, forgetting: float, guard: bool) -> bool:",
             f"    {names_source('x', n)} = x", *rows_source(n)]
    lines += [*gain_source(n), "    if guard and not (denom > 0 and isfinite(denom)):",
              "        return False", *update_source(n, "w[{i}]")]
    return lines + store_source(n) + ["    return True"]


def anchor_step_source(n: int, name: str = "step") -> list[str]:
    lines = [f"def {name}(p: Matrix{n}, w: list[float], pa: list[float], "
             "gain: float, denom: float) -> None:",
             f"    {names_source('a', n)} = pa", *rows_source(n, upper=True)]
    for i in range(n):
        lines += [f"    w[{i}] += a{i} * gain", f"    k{i} = a{i} / denom"]
        lines += [f"    v{i}_{j} = r{i}_{j} - k{i} * a{j}" for j in range(i, n)]
    return lines + store_source(n)


def relative_rls_step_source(n: int, cov_limit: float, name: str = "step") -> list[str]:
    lines = [f"def {name}(p: Matrix{n}, w: list[float], x: list[float], "
             "inv_y: float, target: float, forgetting: float) -> bool:",
             f"    {names_source('y', n)} = x",
             *[f"    x{j} = y{j} * inv_y" for j in range(n)],
             "    err = target - (0.0 + " + " + ".join(f"w[{j}] * x{j}" for j in range(n)) + ")",
             *rows_source(n)]
    lines += [*gain_source(n), *update_source(n, "w[{i}]")]
    lines += store_source(n)
    return lines + ["    return " + " and ".join(f"0.0 < v{i}_{i} < {cov_limit!r}"
                                                for i in range(n))]


@cache
def rls_step(n: int) -> RlsStep:
    """``step(p, w, x, err, forgetting, guard)``: px = P x, denom = forgetting + x . px;
    with ``guard``, a denom that is not finite and > 0 returns False and changes nothing.
    Otherwise k = px / denom, w += k err, P = (P - k px^T) / forgetting; returns True."""
    return _define(rls_step_source(n), "step", n)


@cache
def anchor_step(n: int) -> AnchorStep:
    """``step(p, w, pa, gain, denom)`` (``pa``: a copy of row a of P before the step):
    w += pa gain, P = P - (pa / denom) pa^T -- ALP's pseudo-observation of one prior."""
    return _define(anchor_step_source(n), "step", n)


@cache
def relative_rls_step(n: int, cov_limit: float) -> RelativeRlsStep:
    """``step(p, w, x, inv_y, target, forgetting)``: the device fit's step in relative error
    (``DeviceFit.update``): xs = x inv_y, err = target - w . xs, then ``rls_step``'s update with
    xs, unguarded. Returns whether every diagonal of the new P lies in (0, cov_limit)."""
    return _define(relative_rls_step_source(n, cov_limit), "step", n)
