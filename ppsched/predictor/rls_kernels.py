"""Unrolled recursive-least-squares steps for a fixed number of weights (ALP's 4-5, the fit's 7).

ALP and the device fit learn from every stage measurement, so their symmetric rank-1 updates run
once per microbatch. Written as loops over the covariance's rows they cost ~20 us a step in
Python; unrolled into straight-line arithmetic they cost a third of that. The source of each
kernel is generated once per size below, and performs exactly the loops' operations in the
loops' order (the same sums from 0, left to right; every product and difference as the loops
form it), so results are bit-identical to the loops (tests/test_rls_kernels.py).

Both kernels take the covariance ``p`` as a list of row lists, symmetric, and update it in
place: entry (i, j) and (j, i) both get the value the loops compute for i <= j from the
upper triangle, which is what they read.

The sizes ALP and the device fit run are generated ahead of time into ``kernels.py`` (typed, so
that ``make native`` compiles them; ``scripts/gen_kernels.py``); the functions below build any
size on demand from the same source.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache

RlsStep = Callable[[list[list[float]], list[float], list[float], float, float, bool], bool]
AnchorStep = Callable[[list[list[float]], list[float], list[float], float, float], None]
RelativeRlsStep = Callable[[list[list[float]], list[float], list[float], float, float, float],
                           bool]


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


def rows_source(n: int) -> list[str]:
    """Unpack the rows of ``p`` and every row's entries ``r{i}_{j}``."""
    return [f"    {names_source('r', n)} = p"] + [
        f"    {names_source(f'r{i}_', n)} = r{i}" for i in range(n)]


def store_source(n: int) -> list[str]:
    """Write the upper triangle back into both triangles of every row."""
    return [f"    r{i}[:] = [{', '.join(entry_source(i, j) for j in range(n))}]"
            for i in range(n)]


def _define(source: list[str], name: str) -> Callable:
    """The function ``name`` that ``source`` defines (``kernels.py``'s imports in scope)."""
    namespace: dict = {"isfinite": math.isfinite, "Sequence": Sequence}
    exec("\n".join(source), namespace)  # noqa: S102 - generated from sizes and constants alone
    return namespace[name]


def rls_step_source(n: int, name: str = "step") -> list[str]:
    lines = [f"def {name}(p: list[list[float]], w: list[float], x: Sequence[float], "
             "err: float, forgetting: float, guard: bool) -> bool:",
             f"    {names_source('x', n)} = x", *rows_source(n)]
    lines += [*gain_source(n), "    if guard and not (denom > 0 and isfinite(denom)):",
              "        return False", *update_source(n, "w[{i}]")]
    return lines + store_source(n) + ["    return True"]


def anchor_step_source(n: int, name: str = "step") -> list[str]:
    lines = [f"def {name}(p: list[list[float]], w: list[float], pa: Sequence[float], "
             "gain: float, denom: float) -> None:",
             f"    {names_source('a', n)} = pa", *rows_source(n)]
    for i in range(n):
        lines += [f"    w[{i}] += a{i} * gain", f"    k{i} = a{i} / denom"]
        lines += [f"    v{i}_{j} = r{i}_{j} - k{i} * a{j}" for j in range(i, n)]
    return lines + store_source(n)


def relative_rls_step_source(n: int, cov_limit: float, name: str = "step") -> list[str]:
    lines = [f"def {name}(p: list[list[float]], w: list[float], x: Sequence[float], "
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
    return _define(rls_step_source(n), "step")


@cache
def anchor_step(n: int) -> AnchorStep:
    """``step(p, w, pa, gain, denom)`` (``pa``: a copy of row a of P before the step):
    w += pa gain, P = P - (pa / denom) pa^T -- ALP's pseudo-observation of one prior."""
    return _define(anchor_step_source(n), "step")


@cache
def relative_rls_step(n: int, cov_limit: float) -> RelativeRlsStep:
    """``step(p, w, x, inv_y, target, forgetting)``: the device fit's step in relative error
    (``DeviceFit.update``): xs = x inv_y, err = target - w . xs, then ``rls_step``'s update with
    xs, unguarded. Returns whether every diagonal of the new P lies in (0, cov_limit)."""
    return _define(relative_rls_step_source(n, cov_limit), "step")
