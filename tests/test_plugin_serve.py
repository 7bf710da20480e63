"""`ppsched serve`: the effective command and environment, and its bad inputs (exit 2, one line,
before anything is launched: the policies are built exactly as the schedulers will build them)."""

import subprocess
import sys

import pytest

from ppsched.cli.main import main

# A built-in model for the policies (no config.json needed) and PP 2 so DS may be on.
OK = ["--model", "qwen2.5-14b"]
PP2 = ["--model-path", "m", "--pp-size", "2"]


def test_dry_run_prints_effective_command(capsys):
    code = main(["serve", "--dry-run", "--chunk", "greedy", "--ds", "on", "--candidates",
                 "64,128", "--boundary-unit", "8", "--decision-log", "/tmp/x.jsonl", *OK, "--",
                 "--model-path", "/models/m", "--pp-size", "4"])
    assert code == 0
    out = capsys.readouterr().out
    assert "PPSCHED_CHUNK=greedy" in out and "PPSCHED_DS=on" in out
    assert "PPSCHED_CANDIDATES=64,128" in out and "PPSCHED_BOUNDARY_UNIT=8" in out
    assert "-m sglang.launch_server --model-path /models/m --pp-size 4 " \
           "--chunked-prefill-size 128" in out


def test_matching_chunk_flag_is_kept(capsys):
    assert main(["serve", "--dry-run", "--candidates", "32,64", *OK, "--", *PP2,
                 "--chunked-prefill-size", "64"]) == 0
    assert capsys.readouterr().out.count("--chunked-prefill-size") == 1


def test_force_sets_the_guard_override(capsys):
    assert main(["serve", "--dry-run", "--force", *OK, "--", *PP2]) == 0
    assert "PPSCHED_FORCE=1" in capsys.readouterr().out


@pytest.mark.parametrize("argv, needle", [
    (["--ds", "sometimes", *OK, "--", *PP2], "PPSCHED_DS='sometimes'"),
    (["--slo-tpot-ms", "0", *OK, "--", *PP2], "SLO_TPOT_MS"),
    (["--candidates", "0,64", *OK, "--", *PP2], "CANDIDATES"),
    (["--chunk", "sglang-dynamic", *OK, "--", *PP2], "enable-dynamic-chunking"),
    (["--"], "no --model-path"),
    ([*OK, "--", *PP2, "--enable-dynamic-chunking"], "enable-dynamic-chunking"),
    (["--candidates", "32,64", *OK, "--", *PP2, "--chunked-prefill-size", "128"],
     "largest candidate is 64"),
    ([*OK, "--", *PP2, "--chunked-prefill-size", "-1"], "needs chunked prefill"),
    (["--profile", "/nonexistent.json", *OK, "--", *PP2], "PPSCHED_PROFILE"),
    # The four: a misspelt policy, an unknown model, DS at PP 1, a log path that is a
    # folder. Each used to exit 0 and leave a stock (or dying) server behind.
    (["--chunk", "predictve", *OK, "--", *PP2], "unknown chunk controller 'predictve'"),
    (["--model", "nonexistent", "--", *PP2], "unknown model 'nonexistent'"),
    (["--ds", "on", *OK, "--", "--model-path", "m", "--pp-size", "1"], "needs --pp-size >= 2"),
    (["--ds", "on", *OK, "--", "--model-path", "m"], "needs --pp-size >= 2"),
    (["--decision-log", "/tmp", *OK, "--", *PP2], "is a folder"),
    (["--decision-log", "/nonexistent-dir/x.jsonl", *OK, "--", *PP2], "folder does not exist"),
    (["--hardware", "tpu-v9", *OK, "--", *PP2], "PPSCHED_HARDWARE='tpu-v9'"),
    ([*OK, "--", "--model-path", "m", "--pp-size", "x"], "--pp-size 'x'"),
    ([*OK, "--", "--model-path", "/models/m", "--pp-size", "2"], None),  # control: accepted
])
def test_bad_inputs_exit_2_with_one_line(argv, needle, capsys):
    code = main(["serve", "--dry-run", *argv])
    err = capsys.readouterr().err
    if needle is None:
        assert code == 0, err
        return
    assert code == 2 and needle in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("ppsched: error")]) == 1


def test_bad_input_launches_nothing(tmp_path):
    """Without --dry-run: the refusal comes before the interpreter is even looked for."""
    marker = tmp_path / "launched"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    done = subprocess.run([sys.executable, "-m", "ppsched.cli.main", "serve", "--python",
                           str(fake), "--chunk", "predictve", *OK, "--", *PP2],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "predictve" in done.stderr
    assert not marker.exists()


def test_missing_python_is_a_user_error(capsys):
    code = main(["serve", "--python", "/nonexistent/python", *OK, "--", *PP2])
    assert code == 2 and "--python '/nonexistent/python'" in capsys.readouterr().err


def test_python_without_sglang_names_the_flag(capsys):
    code = main(["serve", "--python", sys.executable, *OK, "--", *PP2])
    err = capsys.readouterr().err
    assert code == 2 and "cannot import sglang" in err and "--python" in err
