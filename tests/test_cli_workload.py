"""`ppsched workload stats` through the CLI entry point: real numbers and every bad input."""

from __future__ import annotations

import json

import pytest

from ppsched.cli.main import main

AZ_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
LEN_HEADER = "num_prefill_tokens,num_decode_tokens\n"


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_azure_conv_json(capsys):
    data = _json(capsys, ["workload", "stats", "azure-conv", "--json"])
    assert data["requests"] == 19366
    assert data["span_s"] == pytest.approx(3502, abs=1)
    assert data["rate_rps"] == pytest.approx(5.53, abs=0.005)
    assert data["prompt_tokens"]["p50"] == 1020 and data["output_tokens"]["p50"] == 129
    assert set(data["prompt_tokens"]) >= {"mean", "p50", "p90", "p99"}


def test_azure_code_by_flag(capsys):
    assert _json(capsys, ["workload", "stats", "--workload", "azure-code", "--json"])[
        "requests"] == 8819


def test_replay_window_speed_and_num_requests(capsys):
    data = _json(capsys, ["workload", "stats", "azure-conv", "--replay", "--window-min", "15",
                          "--speedup", "0.9", "--json"])
    assert data["span_s"] <= 900 / 0.9 and data["span_s"] > 890 / 0.9
    data = _json(capsys, ["workload", "stats", "sharegpt", "--rate", "3", "--num-requests",
                          "40000", "--seed", "2", "--json"])
    assert data["requests"] == 40000
    assert data["rate_rps"] == pytest.approx(3, rel=0.05)


def test_text_report(capsys):
    assert main(["workload", "stats", "summarization", "--rate", "2", "--max-context", "2048"]) == 0
    out = capsys.readouterr().out
    assert "CNN/DailyMail" in out and "capped" in out and "p99" in out


def test_user_trace_file(tmp_path, capsys):
    path = tmp_path / "mine.csv"
    path.write_text(AZ_HEADER + "0.0,100,10\n1.5,200,20\n4.0,300,30\n")
    data = _json(capsys, ["workload", "stats", "--trace-file", str(path), "--format", "azure",
                          "--json"])
    assert (data["requests"], data["span_s"], data["prompt_tokens"]["p50"]) == (3, 4.0, 200)


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    return err


@pytest.mark.parametrize(("fmt", "text", "expected"), [
    ("azure", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,10\n",
     ["missing column 'GeneratedTokens'"]),
    ("lengths", "num_prefill_tokens,tokens\n10,2\n", ["missing column 'num_decode_tokens'"]),
    ("azure", AZ_HEADER + "0,10,5\n1,abc,5\n", ["line 3", "ContextTokens='abc'"]),
    ("azure", AZ_HEADER + "0,10,5\n1,10,5\n2,-4,5\n", ["line 4", "ContextTokens='-4'"]),
    ("lengths", LEN_HEADER + "10,2\nnan,3\n", ["line 3", "num_prefill_tokens='nan'"]),
    ("lengths", LEN_HEADER + "10,2\n10,\n", ["line 3", "num_decode_tokens=''"]),
    ("lengths", LEN_HEADER + "10,2.5\n", ["line 2", "num_decode_tokens='2.5'"]),
    ("lengths", LEN_HEADER + "1e20,2\n", ["line 2", "num_prefill_tokens='1e20'"]),
    ("azure", AZ_HEADER + "0,10,5\n1,10,0\n", ["line 3", "GeneratedTokens='0'"]),
    ("azure", AZ_HEADER + "2023-11-16 18:15:46.6,10,5\n2023-11-16 18:15:45.1,10,5\n",
     ["line 3", "'2023-11-16 18:15:45.1'", "earlier"]),
    ("azure", AZ_HEADER + "0,10,5\nsoon,10,5\n", ["line 3", "TIMESTAMP='soon'"]),
    ("azure", "", ["empty"]),
    ("lengths", LEN_HEADER, ["no rows"]),
    ("lengths", LEN_HEADER + "10,2\n10,2,5,6\n", ["not a readable CSV", "line 3"]),
])
def test_bad_trace_files(tmp_path, capsys, fmt, text, expected):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    argv = ["workload", "stats", "--trace-file", str(path), "--format", fmt, "--json"]
    if fmt == "lengths":
        argv += ["--rate", "1"]
    err = _error(capsys, argv)
    assert str(path) in err
    for piece in expected:
        assert piece in err


@pytest.mark.parametrize(("argv", "expected"), [
    (["nope"], "unknown workload 'nope'"),
    (["sharegpt", "--rate", "0"], "--rate 0.0"),
    (["sharegpt", "--rate", "-2"], "--rate -2.0"),
    (["sharegpt", "--rate", "nan"], "--rate nan"),
    (["sharegpt"], "--rate"),
    (["sharegpt", "--replay"], "--replay needs a timestamped trace"),
    (["azure-conv", "--rate", "1", "--replay"], "exclude each other"),
    (["azure-conv", "--speedup", "0"], "--speedup 0.0"),
    (["azure-conv", "--window-min", "-5"], "--window-min -5.0"),
    (["azure-conv", "--num-requests", "0"], "--num-requests 0"),
    (["azure-conv", "--max-context", "1"], "--max-context 1"),
    (["azure-conv", "--duration", "0"], "--duration 0.0"),
    (["azure-conv", "--workload", "azure-code"], "workload given twice"),
    ([], "no workload"),
    (["--trace-file", "/nonexistent/t.csv", "--format", "azure"], "/nonexistent/t.csv"),
    (["--trace-file", "x.csv"], "needs --format"),
    (["azure-conv", "--data-dir", "/nonexistent/dir"], "/nonexistent/dir"),
])
def test_bad_arguments(capsys, argv, expected):
    assert expected in _error(capsys, ["workload", "stats", *argv])
