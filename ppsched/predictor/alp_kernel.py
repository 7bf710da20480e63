"""ALP's whole learning step as one generated function: the RLS step, the priors, the checks
(written out into ``kernels.py`` as ``alp_step_4`` and ``alp_step_5`` by ``kernels_source``).

``ALPredictor.update`` runs once per stage measurement. Written as the RLS kernel, then one
anchor kernel per prior (``ALPredictor._anchor``), each unpacking and storing the covariance
again, it costs ~9 us; here the covariance stays in local variables from the RLS step through
every prior to the health checks and is stored once. The source is generated per layout of
priors and performs exactly the operations of ``rls_kernels.rls_step`` followed by
``ALPredictor._anchor`` in their order (the same sums from 0, left to right; every product,
quotient and difference as they form it), so the state it leaves is bit-identical to theirs
(tests/test_alp_fast_update.py compares them step by step).
"""

from __future__ import annotations

from ppsched.predictor.rls_kernels import (
    entry_source,
    gain_source,
    names_source,
    rows_source,
    store_source,
    update_source,
)

# (weight index, one-sided: anchored only while the weight is negative, the level prior: its
# mean and precision follow the device scale and it has Student-t tails)
AnchorLayout = tuple[tuple[int, bool, bool], ...]


def alp_step_source(n: int, layout: AnchorLayout, linear_scale: float, level_dof: float,
                    cov_limit: float, name: str = "step") -> list[str]:
    """``name(p, w, x, err, forgetting, precisions, scale)``: the fused step for ``n`` weights
    and the priors in ``layout`` (in ``_anchor``'s order; ``precisions`` holds each one's base
    precision in the same order). Returns -1: the RLS denominator is not finite and > 0,
    nothing changed; 1: learned, healthy; 0: learned, the covariance or the weights need a
    reset."""
    lines = [f"def {name}(p: Matrix{n}, w: list[float], x: list[float], "
             "err: float, forgetting: float, precisions: tuple[float, ...], scale: float) -> int:",
             f"    {names_source('x', n)} = x",
             f"    {names_source('w', n)} = w",
             *rows_source(n)]
    # rls_step: px = P x, denom = forgetting + x . px, k = px / denom, w += k err,
    # P = (P - k px^T) / forgetting
    lines += [*gain_source(n), "    if not (denom > 0 and isfinite(denom)):", "        return -1",
              *update_source(n, "w{i}")]
    # _anchor: one pseudo-observation per prior, P -= (pa / denom) pa^T, w += pa gain
    lines += ["    forgotten = 1.0 - forgetting",
              "    if forgotten > 0.0:"]
    for m, (a, one_sided, level) in enumerate(layout):
        ind = "        "
        if one_sided:  # anchored unless the weight is >= 0 (a NaN weight is anchored)
            lines.append(f"{ind}if not w{a} >= 0.0:")
            ind += "    "
        lines += [f"{ind}{names_source('a', n)} = "
                  f"{', '.join(entry_source(a, j) for j in range(n))}{',' if n == 1 else ''}",
                  f"{ind}precision = precisions[{m}]",
                  f"{ind}prior = 0.0"]
        if level:
            lines += [f"{ind}prior = (1.0 / scale - 1.0) * {linear_scale!r}",
                      f"{ind}precision /= scale * scale",
                      f"{ind}z2 = (w{a} - prior) ** 2 * precision",
                      f"{ind}precision *= ({level_dof!r} + 1.0) / ({level_dof!r} + z2)"]
        lines += [f"{ind}denom = 1.0 / (forgotten * precision) + a{a}",
                  f"{ind}gain = (prior - w{a}) / denom"]
        for i in range(n):
            lines += [f"{ind}w{i} += a{i} * gain", f"{ind}k{i} = a{i} / denom"]
            lines += [f"{ind}v{i}_{j} = v{i}_{j} - k{i} * a{j}" for j in range(i, n)]
    lines += [*store_source(n), f"    w[:] = [{', '.join(f'w{j}' for j in range(n))}]",
              "    healthy = (" + " and ".join(f"0.0 < v{i}_{i} < {cov_limit!r}"
                                          for i in range(n))
              + " and " + " and ".join(f"isfinite(w{i})" for i in range(n)) + ")",
              "    return 1 if healthy else 0"]
    return lines
