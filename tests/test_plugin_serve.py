"""`ppsched serve`: the effective command and environment, and its bad inputs (exit 2)."""

import pytest

from ppsched.cli.main import main


def test_dry_run_prints_effective_command(capsys):
    code = main(["serve", "--dry-run", "--chunk", "greedy", "--ds", "on", "--candidates",
                 "64,128", "--boundary-unit", "8", "--decision-log", "/tmp/x.jsonl", "--",
                 "--model-path", "/models/m", "--pp-size", "4"])
    assert code == 0
    out = capsys.readouterr().out
    assert "PPSCHED_CHUNK=greedy" in out and "PPSCHED_DS=on" in out
    assert "PPSCHED_CANDIDATES=64,128" in out and "PPSCHED_BOUNDARY_UNIT=8" in out
    assert "-m sglang.launch_server --model-path /models/m --pp-size 4 " \
           "--chunked-prefill-size 128" in out


def test_matching_chunk_flag_is_kept(capsys):
    assert main(["serve", "--dry-run", "--candidates", "32,64", "--", "--model-path", "m",
                 "--chunked-prefill-size", "64"]) == 0
    assert capsys.readouterr().out.count("--chunked-prefill-size") == 1


@pytest.mark.parametrize("argv, needle", [
    (["--ds", "sometimes", "--", "--model-path", "m"], "PPSCHED_DS='sometimes'"),
    (["--slo-tpot-ms", "0", "--", "--model-path", "m"], "SLO_TPOT_MS"),
    (["--candidates", "0,64", "--", "--model-path", "m"], "CANDIDATES"),
    (["--chunk", "sglang-dynamic", "--", "--model-path", "m"], "enable-dynamic-chunking"),
    (["--"], "no --model-path"),
    (["--", "--model-path", "m", "--enable-dynamic-chunking"], "enable-dynamic-chunking"),
    (["--candidates", "32,64", "--", "--model-path", "m", "--chunked-prefill-size", "128"],
     "largest candidate is 64"),
    (["--", "--model-path", "m", "--chunked-prefill-size", "-1"], "needs chunked prefill"),
    (["--profile", "/nonexistent.json", "--", "--model-path", "m"], "PPSCHED_PROFILE"),
])
def test_bad_inputs_exit_2(argv, needle, capsys):
    assert main(["serve", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_missing_python_is_a_user_error(capsys):
    code = main(["serve", "--python", "/nonexistent/python", "--", "--model-path", "m"])
    assert code == 2 and "cannot start it" in capsys.readouterr().err
