"""Overload (CI size): every policy at 10x the goodput rate stays stable; admission helps.

The big version is `ppsched overload --size soak` (make soak); numbers in bench/reliability.md.
"""

from __future__ import annotations

import csv
import functools

import numpy as np
import pytest

from ppsched.cli.cmd_overload import (
    OVERLOAD_POLICIES,
    OverloadSpec,
    growth_per_min,
    queue_series,
    run_one,
)
from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.traces import load_workload

SPEC = OverloadSpec(minutes=0.25, sample_s=5.0)  # 15 s of arrivals at 23.6 req/s


@functools.cache
def _workload(minutes: float = SPEC.minutes):
    spec = OverloadSpec(minutes=minutes)
    return load_workload(spec.workload, rate=spec.rate, duration_s=spec.duration_s, seed=0)


@functools.cache
def _row(policy: str, admission: str) -> dict:
    return run_one(SPEC, policy, admission, _workload(), memory="rss")


@pytest.mark.parametrize("policy", OVERLOAD_POLICIES)
def test_policy_survives_overload_without_admission(policy):
    row = _row(policy, "off")  # the engine's invariant checks ran inside: no exception
    assert row["requests"] == len(_workload().requests) == row["admitted"]
    assert row["rejected_frac"] == 0.0
    assert row["queue_growth_per_min"] > 0  # 10x overload: the queue must be seen growing
    assert row["queue_at_end"] > 0 and row["drain_s"] > 0
    assert row["peak_mb"] > 0


@pytest.mark.parametrize("policy", OVERLOAD_POLICIES)
def test_admission_bounds_the_queue_and_keeps_goodput(policy):
    on, off = _row(policy, "on"), _row(policy, "off")
    assert on["requests"] == off["requests"]
    assert 0 < on["rejected_frac"] < 1
    assert on["queue_max"] < off["queue_max"]
    assert on["p90_ttft_ms"] < off["p90_ttft_ms"]
    assert on["goodput_rps"] >= off["goodput_rps"]


def test_simulator_memory_grows_linearly_with_the_overload_run():
    """Peak Python heap at 2x the arrival window stays within linear growth (+25%): nothing in
    the engine grows with the square of the queue."""
    short = OverloadSpec(minutes=0.1)
    long = OverloadSpec(minutes=0.2)
    a = run_one(short, "tp4", "off", _workload(0.1), memory="heap")
    b = run_one(long, "tp4", "off", _workload(0.2), memory="heap")
    ratio = b["peak_mb"] / a["peak_mb"]
    requests = b["requests"] / a["requests"]
    assert ratio <= 1.25 * requests, (a["peak_mb"], b["peak_mb"], requests)


def _rec(arrival: float, first: float, rejected: bool = False) -> RequestRecord:
    return RequestRecord(0, arrival, 10, 2, first_token_s=first, finish_s=first + 1,
                         rejected=rejected, reject_reason="x" if rejected else "")


def test_queue_series_counts_arrived_without_first_token():
    recs = [_rec(0.0, 5.0), _rec(1.0, 2.0), _rec(3.0, 9.0), _rec(1.0, float("nan"), True)]
    q = queue_series(recs, np.array([0.0, 1.5, 2.0, 4.0, 6.0, 10.0]))
    assert q.tolist() == [1, 2, 1, 2, 1, 0]
    t = np.arange(0.0, 61.0, 10.0)
    assert growth_per_min(t, 3.0 * t) == pytest.approx(180.0)


def test_overload_cli_prints_the_table(tmp_path, capsys):
    rc = main(["overload", "--policies", "tp4", "--admission", "off", "--minutes", "0.05",
               "--memory", "heap", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "tp4" in out and "23.6 req/s" in out
    rows = list(csv.DictReader(open(tmp_path / "overload.csv")))
    assert [r["policy"] for r in rows] == ["tp4"] and int(rows[0]["requests"]) > 0


@pytest.mark.parametrize("argv, named", [
    (["--size", "huge"], "'huge'"), (["--admission", "sometimes"], "'sometimes'"),
    (["--factor", "0"], "--factor 0"), (["--policies", "bogus"], "'bogus'"),
    (["--memory", "swap"], "'swap'"), (["--minutes", "-1"], "--minutes -1"),
    (["--policies", "tp4", "--out", "/dev/null/x"], "'/dev/null/x'"),
])
def test_overload_cli_bad_input(argv, named, capsys):
    assert main(["overload", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppsched: error:") and named in err[0]


def test_spec_validates():
    with pytest.raises(UserError, match="--base-rate"):
        OverloadSpec(base_rate=float("nan"))
