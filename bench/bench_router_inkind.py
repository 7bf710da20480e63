"""The live router test's request sequence through the simulated fleet, side by side with the
live figures (docs/FLEET_SIM.md, "In kind against the live router").

Usage: .venv/bin/python bench/bench_router_inkind.py [--pin]
Replays results/pinned/live_router_sequence.csv (same send order, same prompt and output
lengths, bench_serving's own Poisson draw at 2 req/s, seed 1) on two simulated boxes (phi-2's
shape, bench/models/phi-2, PP 2 on A100 40GB, predictive + DS as on the live replicas) under
round_robin and cache_aware, and prints per replica, live and simulated: requests and share,
the groups it served whole and those split across replicas, prompt and cached tokens, prefix
hit rate. Then per request: the box each policy chose and the cached tokens live and simulated.
Token figures are live tokens (ppsched/fleet/inkind.py: 64 simulated tokens per live token, so
one 512-token block is 8 live tokens and the 120-token shared prefix is 15 blocks).
--pin writes results/pinned/router_inkind.csv and its .meta.json.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppsched.experiments.pinned import PinnedMeta  # noqa: E402
from ppsched.experiments.run_config import RunConfig  # noqa: E402
from ppsched.fleet.inkind import (  # noqa: E402
    POLICIES,
    SHARED_PREFIX_TOKENS,
    LiveRequest,
    Replay,
    bench_serving_arrivals,
    expected_hits,
    groups_on,
    live_groups_by_replica,
    prefix_ready,
    read_live_sequence,
    replay,
)

PINNED = ROOT / "results" / "pinned"
BOX = RunConfig(model=str(ROOT / "bench" / "models" / "phi-2"), parallel="pp2",
                chunk="predictive", ds="on", context_length=16384)
BOXES = 2


def read_live_replicas(path: Path) -> dict[str, list[dict[str, str]]]:
    """live_router.csv: per policy, its replicas' rows in replica order."""
    by_policy: dict[str, list[dict[str, str]]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            by_policy.setdefault(row["policy"], []).append(row)
    for rows in by_policy.values():
        rows.sort(key=lambda r: int(r["replica"]))
    return by_policy


def _live_groups(seq: Sequence[LiveRequest], policy: str,
                 replicas: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """(whole groups, split groups) per live replica. cache_aware: from the replicas' prompt
    tokens (the one placement of whole groups that sums to them). round_robin: a group that
    got fewer hits than its follow-on requests touched both replicas."""
    if policy == "cache_aware":
        placed = live_groups_by_replica(seq, [int(r["prompt_tokens"]) for r in replicas])
        return [" ".join(map(str, g)) for g in placed], ["" for _ in replicas]
    hits: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for row in seq:
        sizes[row.group] = sizes.get(row.group, 0) + 1
        hits[row.group] = hits.get(row.group, 0) + (row.cached_under(policy) > 0)
    split = " ".join(str(g) for g in sorted(sizes) if hits[g] < sizes[g] - 1)
    whole = " ".join(str(g) for g in sorted(sizes) if hits[g] == sizes[g] - 1)
    return [whole or "-" for _ in replicas], [split for _ in replicas]


def _sim_groups(seq: Sequence[LiveRequest], result: Replay, box: int) -> tuple[str, str]:
    placed = groups_on(seq, result.routed)
    whole = " ".join(str(g) for g in sorted(placed) if placed[g] == {box})
    split = " ".join(str(g) for g in sorted(placed) if len(placed[g]) > 1 and box in placed[g])
    return whole or "-", split


def compare(seq: Sequence[LiveRequest], live: dict[str, list[dict[str, str]]],
            results: dict[str, Replay]) -> list[dict[str, object]]:
    rows = []
    for policy in POLICIES:
        result = results[policy]
        live_whole, live_split = _live_groups(seq, policy, live[policy])
        for box in range(BOXES):
            mine = [row for row, b in zip(seq, result.routed, strict=True) if b == box]
            prompt = sum(r.prompt_tokens for r in mine)
            lrow = live[policy][box]
            sim_whole, sim_split = _sim_groups(seq, result, box)
            rows.append({
                "policy": policy, "replica": box,
                "live_requests": int(lrow["requests"]), "sim_requests": len(mine),
                "live_share": float(lrow["share"]), "sim_share": len(mine) / len(seq),
                "live_whole_groups": live_whole[box], "sim_whole_groups": sim_whole,
                "live_split_groups": live_split[box] or "-", "sim_split_groups": sim_split or "-",
                "live_prompt_tokens": int(lrow["prompt_tokens"]), "sim_prompt_tokens": prompt,
                "live_cached_tokens": int(lrow["cached_tokens"]),
                "sim_cached_tokens": result.cached_tokens[box],
                "live_hit_rate": round(float(lrow["prefix_hit_rate"]), 4),
                "sim_hit_rate": round(result.cached_tokens[box] / prompt, 4) if prompt else 0.0})
    return rows


def _print_table(rows: list[dict[str, object]]) -> None:
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k]))
                               for r in rows)) for k in keys}
    print("  ".join(k.rjust(widths[k]) for k in keys))
    for r in rows:
        print("  ".join((f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k])).rjust(widths[k])
                        for k in keys))


def _print_requests(seq: Sequence[LiveRequest], results: dict[str, Replay]) -> None:
    arrivals = bench_serving_arrivals(len(seq))
    print("\nper request (cached: live tokens; ready: an earlier request of its group on its "
          "box had its first token by this one's arrival)")
    print("pos group arrival_s | " + " | ".join(
        f"{p}: box live_cached sim_ready" for p in POLICIES))
    ready = {p: prefix_ready(seq, results[p]) for p in POLICIES}
    for i, row in enumerate(seq):
        cells = [f"{results[p].routed[i]:>3} {row.cached_under(p):>11} {ready[p][i]!s:>9}"
                 for p in POLICIES]
        print(f"{row.position:>3} {row.group:>5} {arrivals[i]:>9.3f} | " + " | ".join(cells))
    for p in POLICIES:
        print(f"{p}: router reasons {dict(results[p].router_reasons)}")


def live_round_robin_order(seq: Sequence[LiveRequest]) -> None:
    """Which order of arrival at the router the live round_robin hits fit: exact alternation
    by send position, and with sends under 1 ms apart (bench_serving's draw) swapped."""
    arrivals = bench_serving_arrivals(len(seq))
    live = [row.cached_under("round_robin") for row in seq]
    swapped = list(range(len(seq)))
    for i in range(len(seq) - 1):
        if arrivals[i + 1] - arrivals[i] < 1e-3:
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    print("\nlive round_robin hits against exact alternation in an order of arrival:")
    for name, order in (("send order", list(range(len(seq)))),
                        ("near-ties swapped", swapped)):
        routed = [0] * len(seq)
        for turn, position in enumerate(order):
            routed[position] = turn % 2
        expected = expected_hits(seq, routed)
        differ = [i for i in range(len(seq)) if (live[i] > 0) != (expected[i] > 0)]
        print(f"  {name} {order[:6]}...: positions whose hit differs {differ}")


def _pin(rows: list[dict[str, object]]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    path = PINNED / "router_inkind.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    PinnedMeta(
        title="Simulated router vs the live sglang-router on the same request sequence",
        command=".venv/bin/python bench/bench_router_inkind.py --pin",
        commit=commit, date=datetime.date.today().isoformat(),
        note=("live_*: results/pinned/live_router.csv (one live run; cache_aware's split of "
              "groups between replicas varied run to run, docs/FLEET.md). sim_*: the same 20 "
              "requests in the same order with bench_serving's Poisson draw (2 req/s, seed 1) "
              "on 2 simulated boxes (phi-2's shape, PP 2, A100 40GB, predictive + DS). Tokens "
              "are live tokens; the simulator's 512-token blocks are 8 live tokens here, the "
              f"{SHARED_PREFIX_TOKENS}-token shared prefix 15 blocks. Groups: whole = all of "
              "the group's requests on this replica; split = on both. Live placement of groups "
              "is recovered from each replica's prompt tokens (cache_aware) or its hits "
              "(round_robin). The simulated cache_aware misses one follow-on request "
              "(position 4, 0.18 s after its group's first on the same box, whose prefill of "
              "the 64x-scaled prompt had not ended).")).write(PINNED / "router_inkind.meta.json")
    print(f"\nwrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pin", action="store_true",
                        help="write results/pinned/router_inkind.csv and .meta.json")
    args = parser.parse_args()
    seq = read_live_sequence(PINNED / "live_router_sequence.csv")
    live = read_live_replicas(PINNED / "live_router.csv")
    results = {p: replay(seq, BOX, p, BOXES) for p in POLICIES}
    rows = compare(seq, live, results)
    _print_table(rows)
    _print_requests(seq, results)
    live_round_robin_order(seq)
    if args.pin:
        _pin(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
