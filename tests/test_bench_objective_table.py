"""bench/objective_table.py: a candidate rule's cells beside the pinned ones, its aggregates, and
recorded arrivals beside the pinned best fixed chunk."""

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

PATH = Path(__file__).resolve().parents[1] / "bench" / "objective_table.py"
spec = importlib.util.spec_from_file_location("objective_table", PATH)
table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table)


def write_pinned_as_candidate(root: Path, scale: float = 1.0) -> None:
    """The pinned predictive rows laid out as bench/run_objective_table.sh writes them, every
    goodput times ``scale``."""
    for folder, name in table.TABLES.values():
        rows = pd.read_csv(table.PINNED / name)
        rows = rows[rows["policy"] == "predictive"].copy()
        rows["goodput_rps"] = rows["goodput_rps"] * scale
        for i, (_, group) in enumerate(rows.groupby(["model", "workload"])):
            out = root / folder / f"group{i}"
            out.mkdir(parents=True)
            group.to_csv(out / "goodput.csv", index=False)


def test_the_rule_on_main_judged_against_itself_is_equal(tmp_path):
    write_pinned_as_candidate(tmp_path)
    cells = table.cells(tmp_path)
    assert len(cells) >= 60
    scored = cells[cells["oracle_static_rps"] > 0]
    assert (scored["after_vs_oracle"] == scored["before_vs_oracle"]).all()
    lines = table.summary(cells)
    before = table.geomean(scored["before_vs_oracle"])
    after = table.geomean(scored["after_vs_oracle"])
    assert before == after and f"geomean before {before:.3f}, after {after:.3f}" in lines[0]


def test_a_lost_cell_makes_the_geomean_zero(tmp_path):
    write_pinned_as_candidate(tmp_path, scale=0.5)
    scored = table.cells(tmp_path)
    scored = scored[scored["oracle_static_rps"] > 0]
    assert table.geomean(scored["after_vs_oracle"]) == pytest.approx(
        0.5 * table.geomean(scored["before_vs_oracle"]))
    assert table.geomean(pd.Series([1.1, 0.0])) == 0.0
    assert math.isnan(table.geomean(pd.Series([], dtype=float)))


def test_recorded_arrivals_beside_the_best_fixed_chunk(tmp_path):
    pinned = pd.read_csv(table.PINNED / "recorded_arrivals.csv")
    conv = pinned[pinned["workload"] == "azure-conv"]
    best = conv[conv["policy"].str.startswith("static-")]["goodput_rps"].max()
    for trace, rate in (("azure-conv", best * 0.9), ("azure-code", 10.0)):
        out = tmp_path / "recorded" / trace
        out.mkdir(parents=True)
        pd.DataFrame({"policy": ["predictive"], "goodput_rps": [rate]}).to_csv(
            out / "goodput.csv", index=False)
    code_line, conv_line = table.recorded(tmp_path)
    assert code_line.startswith("recorded azure-code: predictive 10 req/s")
    assert code_line.endswith("(at or above)")
    assert conv_line.startswith("recorded azure-conv") and conv_line.endswith("(below)")
    assert table.recorded(tmp_path / "none") == []
