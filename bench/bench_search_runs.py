"""Runs a goodput point costs under the current search, replayed on recorded verdicts.

Usage: .venv/bin/python bench/bench_search_runs.py results/goodput/qwen2.5-32b/goodput.csv \
           [more goodput.csv ...] [--csv PATH]

Each goodput.csv row records every rate its search tried, per seed, with the verdict
(``tried``: ``seed0: 2:0;1:1;...``) and every long verification run (``verify_tried``). This
replays the search code of this checkout (``experiments.goodput._seed_search``) on those
verdicts, with the table's own settings (the defaults: start 2 req/s, x2 steps, 2% resolution,
4% backing) and seeds, and prints per table: the distinct search runs the recorded table took
and the replay takes, whether every seed's goodput is the same, and the verification runs (the
search's goodput decides them, so they are unchanged where it is). A rate the replay needs that
the table never ran cannot be replayed: such a search is counted as ``unknown``. oracle-static's
rows are left out (the candidates it did not choose are not in goodput.csv); static-2048 is in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.experiments.goodput import SearchSettings, _seed_search  # noqa: E402
from ppsched.experiments.policies import get_policy  # noqa: E402


class Unrecorded(LookupError):
    """The replay asked for a rate the recorded search never ran."""


class Verdicts(dict):
    """{scale: passed} of one recorded run; a scale that never saw the rate is not replayable
    (a shared run's verdict is recorded only in the rows whose search ran it)."""

    def __missing__(self, scale: float) -> bool:
        raise Unrecorded(scale)


def recorded_evaluate(recorded: dict[float, list[dict[str, bool]]], seed: int):
    def evaluate(rates):
        out = []
        for rate in rates:
            key = f"{rate:.4g}"
            known = Verdicts({s: runs[seed][key] for s, runs in recorded.items()
                              if key in runs[seed]})
            if not known:
                raise Unrecorded(rate)
            out.append(known)
        return out
    return evaluate


def parse_tried(text: str) -> list[dict[str, bool]]:
    """'seed0: 2:0;1:1 | seed1: ...' -> per seed {rate as '%.4g': passed}."""
    seeds = []
    for part in text.split(" | "):
        runs = part.split(": ", 1)[1]
        seeds.append({r: ok == "1" for r, ok in (run.rsplit(":", 1) for run in runs.split(";"))})
    return seeds


def replay_table(table: pd.DataFrame, settings: SearchSettings | None = None) -> dict:
    settings = settings or SearchSettings()
    rows = table[table.policy != "oracle-static"]
    verify = rows["verify_tried"].fillna("").astype(str) if "verify_tried" in rows else []
    out = {"points": len(rows), "before": 0, "after": 0, "identical": 0, "differ": 0,
           "unknown": 0, "verify_runs": sum(len([x for x in t.split(";") if x]) for t in verify)}
    for policy, group in rows.groupby("policy", sort=False):
        scale_groups = ([[s] for s in group.slo_scale] if get_policy(policy).reads_slo
                        else [list(group.slo_scale)])
        for scales in scale_groups:
            recorded = {s: parse_tried(group.set_index("slo_scale").loc[s, "tried"])
                        for s in scales}
            seeds = len(next(iter(recorded.values())))
            first = None
            for seed in range(seeds):
                before = {r for s in scales for r in recorded[s][seed]}
                out["before"] += len(before)
                try:
                    found = _seed_search(recorded_evaluate(recorded, seed), scales, settings,
                                         first)
                except Unrecorded:
                    out["unknown"] += 1
                    out["after"] += len(before)  # counted as before: not replayable
                    break
                out["after"] += len({f"{r:.4g}" for res in found.values() for r, _ in res.tried})
                per_seed = group.set_index("slo_scale")["per_seed"]
                same = all(f"{found[s].goodput_rps:.4g}"
                           == f"{float(str(per_seed[s]).split(';')[seed]):.4g}" for s in scales)
                out["identical" if same else "differ"] += 1
                if seed == 0:
                    first = {s: found[s].goodput_rps for s in scales}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("tables", nargs="+", help="goodput.csv files")
    p.add_argument("--csv", default=None, help="also write one row per table here")
    args = p.parse_args(argv)
    rows = []
    for path in args.tables:
        try:
            figures = replay_table(pd.read_csv(path))
        except (IndexError, ValueError, KeyError) as exc:
            print(f"{path}: not replayable ({type(exc).__name__}: its columns are not "
                  "goodput.csv's)")
            continue
        rows.append({"table": path, **figures})
        searches = figures["identical"] + figures["differ"]
        print(f"{path}: {figures['points']} points, search runs {figures['before']} -> "
              f"{figures['after']} ({figures['before'] / figures['points']:.1f} -> "
              f"{figures['after'] / figures['points']:.1f} per point), verification runs "
              f"{figures['verify_runs']}; seed searches identical {figures['identical']} of "
              f"{searches}, unknown {figures['unknown']}")
    if args.csv:
        pd.DataFrame(rows).to_csv(args.csv, index=False)
    return 1 if any(r["differ"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
