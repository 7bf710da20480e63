"""The controller table: the target per cell, the ratio, the count, the scale filter."""

from __future__ import annotations

import csv

from ppsched.experiments.controller_table import read_rows, table_lines, verdict

FIELDS = ("model", "workload", "policy", "slo_scale", "goodput_rps", "per_seed", "chosen")


def _write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow(dict(zip(FIELDS, r, strict=True)))
    return path


def _cell(scale, oracle, pred, greedy, paper):
    return [("m", "w", "oracle-static", scale, oracle, f"{oracle};{oracle + 1}", "static:256"),
            ("m", "w", "predictive", scale, pred, f"{pred};{pred}", ""),
            ("m", "w", "greedy", scale, greedy, "", ""),
            ("m", "w", "predictive-paper", scale, paper, "", "")]


def test_target_needs_097_of_the_oracle_and_greedy_and_the_paper_rule(tmp_path):
    path = _write(tmp_path / "goodput.csv",
                  _cell(1.0, 2.0, 1.95, 1.0, 1.0)    # 0.975x: ok
                  + _cell(0.8, 2.0, 1.9, 1.0, 1.0)   # 0.95x: short
                  + _cell(0.6, 2.0, 2.1, 2.2, 1.0)   # above the oracle, below greedy: short
                  + _cell(0.4, 0.0, 0.0, 0.0, 0.0)   # nothing sustains it: not counted
                  + _cell(0.2, 2.0, 0.0, 0.0, 0.0))  # filtered out below
    rows = read_rows([path], scales=(1.0, 0.8, 0.6, 0.4))
    assert [verdict(rows[("m", "w", s)]) for s in (1.0, 0.8, 0.6, 0.4)] == [
        "ok", "**short**", "**short**", "-"]
    text = "\n".join(table_lines(rows))
    assert "| m | w | 1 | 2 [2..3] (static:256) | 1.95 [1.95..1.95] | 1 | 1 | 0.97× | ok |" in text
    assert "| 0.2 |" not in text
    assert text.endswith("Target met in 1 of 3 cells with a non-zero goodput.")
