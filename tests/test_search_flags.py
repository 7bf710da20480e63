"""The honest figure by default: goodput, demo and paper search 3 seeds and verify; --quick not."""

from __future__ import annotations

import pytest

from ppsched.cli.experiment_args import search_flags
from ppsched.cli.main import build_parser
from ppsched.core.errors import UserError


@pytest.mark.parametrize("cmd", [["goodput", "--out", "x"], ["demo"], ["paper"]])
def test_default_is_three_verified_seeds_with_early_stop(cmd):
    assert search_flags(build_parser().parse_args(cmd)) == {"seeds": 3, "verify": True,
                                                             "stop_early": True}


@pytest.mark.parametrize("cmd", [["goodput", "--out", "x"], ["demo"], ["paper"]])
def test_quick_is_one_unverified_seed(cmd):
    flags = search_flags(build_parser().parse_args(cmd + ["--quick", "--no-stop-early"]))
    assert flags == {"seeds": 1, "verify": False, "stop_early": False}


@pytest.mark.parametrize("extra, match", [(["--quick", "--seeds", "2"], "--quick"),
                                          (["--verify", "--no-verify"], "--verify"),
                                          (["--verify", "--quick"], "--verify"),
                                          (["--seeds", "0"], "--seeds")])
def test_contradictory_search_flags_are_refused(extra, match):
    with pytest.raises(UserError, match=match):
        search_flags(build_parser().parse_args(["demo"] + extra))


def test_sweep_and_run_take_their_stop_flags():
    assert build_parser().parse_args(["sweep", "--rates", "1", "--out", "x"]).stop_early
    assert not build_parser().parse_args(["sweep", "--rates", "1", "--out", "x",
                                          "--no-stop-early"]).stop_early
    assert build_parser().parse_args(["run", "--out", "x", "--stop-early"]).stop_early
    assert not build_parser().parse_args(["run", "--out", "x"]).stop_early


def test_stop_early_refuses_a_live_engine(tmp_path):
    from ppsched.cli.cmd_run import run_command

    args = build_parser().parse_args(["run", "--engine", "http://127.0.0.1:9", "--stop-early",
                                      "--out", str(tmp_path)])
    with pytest.raises(UserError, match="--stop-early"):
        run_command(args)
