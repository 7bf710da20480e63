"""BENCHMARKS.md and README.md's results block are generated from results/pinned/: the committed
files must equal what `ppsched report --benchmarks` writes from the committed pinned data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.experiments.benchmarks_doc import (
    BEGIN,
    END,
    IMG_DIR,
    generated,
    replace_block,
    write_docs,
)
from ppsched.experiments.pinned import MAX_PINNED_BYTES, PINNED_DIR, PinnedMeta, read_pinned

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "run `ppsched report --benchmarks` and commit the result"


def test_committed_docs_equal_what_the_command_writes():
    for rel, text in generated(ROOT).items():
        committed = (ROOT / rel).read_text()
        assert committed == text, f"{rel} differs from the pinned results: {REGENERATE}"


def test_readme_block_holds_the_headline_of_the_pinned_goodput():
    goodput = pd.read_csv(ROOT / PINNED_DIR / "goodput.csv")
    row = goodput[(goodput.model == "qwen2.5-32b") & (goodput.policy == "predictive")
                  & (goodput.slo_scale == 1.0)].iloc[0]
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index(BEGIN):readme.index(END)]
    assert f"| predictive | {row.goodput_rps:.2f}" in block
    assert f"| predictive | {row.goodput_rps:.2f}" in (ROOT / "BENCHMARKS.md").read_text()


def test_every_pinned_csv_is_small_and_has_its_sidecar():
    tables = read_pinned(ROOT / PINNED_DIR)
    assert {"goodput", "heldout", "heldout_models", "ds_goodput"} <= set(tables)
    for name in tables:
        assert (ROOT / PINNED_DIR / f"{name}.csv").stat().st_size <= MAX_PINNED_BYTES, name
    for png in (ROOT / IMG_DIR).glob("*.png"):
        assert png.stat().st_size <= 150_000, png


def test_tracked_results_stay_under_500_kb():
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "results"],
                                capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout: {exc}")
    total = sum((ROOT / p).stat().st_size for p in listed if (ROOT / p).is_file())
    assert total <= 500_000, f"git tracks {total} bytes under results/; pin summaries only"
    assert all(p.startswith("results/pinned/") for p in listed), listed


@pytest.fixture
def checkout(tmp_path):
    """A copy of the pinned data, the plots and the README, to regenerate into."""
    shutil.copytree(ROOT / PINNED_DIR, tmp_path / PINNED_DIR)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return tmp_path


def test_figures_follow_the_pinned_data(checkout):
    path = checkout / PINNED_DIR / "goodput.csv"
    goodput = pd.read_csv(path)
    at = (goodput.model == "qwen2.5-32b") & (goodput.policy == "predictive") & (
        goodput.slo_scale == 1.0)
    static = goodput[(goodput.model == "qwen2.5-32b") & (goodput.policy == "static-2048")
                     & (goodput.slo_scale == 1.0)].goodput_rps.iloc[0]
    goodput.loc[at, ["goodput_rps", "goodput_max"]] = 9.87
    goodput.to_csv(path, index=False)
    assert write_docs(checkout) == [Path("BENCHMARKS.md"), Path("README.md")]
    readme = (checkout / "README.md").read_text()
    assert "| predictive | 9.87 |" in readme
    assert f"{9.87 / static:.2f}× on qwen2.5-32b" in readme.replace("\n", " ")
    assert write_docs(checkout, check=True) == []


def test_any_other_pinned_csv_is_rendered_with_its_command_and_commit(checkout):
    pd.DataFrame({"engine": ["sim"], "speedup": [1234.5]}).to_csv(
        checkout / PINNED_DIR / "sim_speed.csv", index=False)
    PinnedMeta("Simulator speed", "python bench/bench_sim.py --quick", "abcdef1", "2026-12-05",
               "one run").write(checkout / PINNED_DIR / "sim_speed.meta.json")
    text = generated(checkout)[Path("BENCHMARKS.md")]
    section = text[text.index("### Simulator speed"):]
    assert "| engine | speedup |" in section and "| sim | 1234 |" in section
    assert "`python bench/bench_sim.py --quick` at commit abcdef1 (2026-12-05)" in section
    assert "one run" in section


def test_a_pinned_csv_without_sidecar_or_with_a_bad_commit_is_refused(checkout):
    (checkout / PINNED_DIR / "extra.csv").write_text("a\n1\n")
    with pytest.raises(UserError, match="extra.csv: no sidecar extra.meta.json"):
        read_pinned(checkout / PINNED_DIR)
    with pytest.raises(UserError, match="commit 'HEAD'"):
        PinnedMeta("t", "c", "HEAD", "2026-12-05")
    with pytest.raises(UserError, match="date '5 Dec'"):
        PinnedMeta("t", "c", "abcdef1", "5 Dec")
    PinnedMeta("t", "c", "abcdef1-dirty", "2026-12-05T01:02:03Z")  # both say more, both valid


def test_readme_without_markers_is_refused():
    with pytest.raises(UserError, match="BEGIN GENERATED: results"):
        replace_block("# README\nno markers\n", "block")
    text = f"a\n{BEGIN}\nold\n{END}\nb\n"
    assert replace_block(text, f"{BEGIN}\nnew\n{END}") == f"a\n{BEGIN}\nnew\n{END}\nb\n"


def test_check_exits_1_when_stale_and_0_when_current(checkout, capsys):
    args = ["report", "--benchmarks", "--root", str(checkout)]
    assert main([*args, "--check"]) == 1  # BENCHMARKS.md not written yet
    assert "run `ppsched report --benchmarks`" in capsys.readouterr().out
    assert not (checkout / "BENCHMARKS.md").exists()
    assert main(args) == 0
    assert main([*args, "--check"]) == 0


def test_pin_from_a_folder_without_results_names_what_is_missing(tmp_path, capsys):
    code = main(["report", "--pin", "heldout", "--out", str(tmp_path), "--root", str(tmp_path),
                 "--commit", "abcdef1", "--date", "2026-12-05"])
    assert code == 2
    assert "--pin heldout: no results for heldout" in capsys.readouterr().err
    assert main(["report", "--check"]) == 2


def _git(root: Path, *argv: str) -> str:
    return subprocess.run(["git", "-C", str(root), *argv], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_pin_stamps_the_head_commit_and_says_when_the_code_differs(tmp_path):
    rows = tmp_path / "results" / "heldout" / "m-w"
    rows.mkdir(parents=True)
    (rows / "goodput.csv").write_text("model,workload,policy,slo_scale,goodput_rps,per_seed,"
                                      "chosen,verify,tried\nm,w,predictive,1.0,2.5,2.5;2.6,,"
                                      "pass,2:1\n")
    (tmp_path / "ppsched").mkdir()
    (tmp_path / "ppsched" / "x.py").write_text("A = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", "ppsched")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    pin = ["report", "--pin", "heldout", "--out", str(tmp_path / "results"), "--root",
           str(tmp_path)]
    assert main(pin) == 0
    meta = PinnedMeta.read(tmp_path / PINNED_DIR / "heldout.meta.json")
    assert meta.commit == head and meta.command == "bash bench/run_heldout.sh"
    assert "uncommitted" not in meta.note
    pinned = pd.read_csv(tmp_path / PINNED_DIR / "heldout.csv")
    assert list(pinned.columns) == ["model", "workload", "policy", "slo_scale", "goodput_rps",
                                    "per_seed", "chosen", "verify"]  # the search log stays out
    (tmp_path / "ppsched" / "x.py").write_text("A = 2\n")
    assert main(pin) == 0
    assert "uncommitted changes" in PinnedMeta.read(
        tmp_path / PINNED_DIR / "heldout.meta.json").note
