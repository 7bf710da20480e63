"""oracle-static's candidates: every seed only where a candidate can still win.

oracle-static reports, per SLO scale, the candidate with the highest goodput over seeds (the
lowest seed's), and no candidate's own row. A candidate's goodput is at most its seed-0 goodput,
so once the candidates that lead some scale after seed 0 have run every seed, a candidate whose
seed-0 goodput is below the best of theirs at every scale where it found one cannot be chosen:
its later seeds are not run around its seed-0 goodputs. The scales where its seed 0 found none
are still searched on every seed (their search is apart from the others, ``_seed_search``), so
that a scale no candidate holds reports the same spread. The chosen candidate, its seeds and
every figure of the table are those of the search that runs every seed of every candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ppsched.experiments.joint_search import Measured, SearchResult, SeedSearch


def search_candidates(search: SeedSearch, keys: Sequence[str], scales: Sequence[float],
                      seeds: int) -> dict[tuple[str, float], Measured]:
    """{(candidate, scale): Measured}: every seed of the leaders after seed 0, and of any other
    candidate that could still win; seed 0 and its zero scales' seeds of the rest."""
    with ThreadPoolExecutor(max_workers=max(1, len(keys))) as pool:
        first = dict(zip(keys, pool.map(lambda k: search(k, 0, None, True), keys), strict=True))
        found: dict[str, list[dict[float, SearchResult]]] = {k: [first[k]] for k in keys}
        if seeds > 1:
            seed0 = {k: {s: first[k][s].goodput_rps for s in scales} for k in keys}

            def later(key: str, reseed: bool) -> None:
                found[key] += [search(key, i, seed0[key], reseed) for i in range(1, seeds)]

            leaders = _leaders(seed0, scales)
            list(pool.map(lambda k: later(k, True), leaders))
            best = {s: max((min(r[s].goodput_rps for r in found[k]) for k in leaders),
                           default=0.0) for s in scales}
            rest = [k for k in keys if k not in leaders]
            list(pool.map(lambda k: later(k, not _dominated(seed0[k], best)), rest))
    return {(k, s): Measured(tuple(r[s] for r in runs if s in r))
            for k, runs in found.items() for s in scales}


def _leaders(seed0: dict[str, dict[float, float]], scales: Sequence[float]) -> list[str]:
    """Candidates with the highest non-zero seed-0 goodput at some scale (ties: all of them)."""
    out: list[str] = []
    for scale in scales:
        top = max(g[scale] for g in seed0.values())
        out += [k for k, g in seed0.items() if top > 0 and g[scale] == top and k not in out]
    return out


def _dominated(seed0: dict[float, float], best: dict[float, float]) -> bool:
    """Below the leaders' best at every scale where seed 0 found a goodput: never chosen."""
    return all(g < best[s] for s, g in seed0.items() if g > 0)
