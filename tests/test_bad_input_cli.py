"""Bad input everywhere through the CLI, in-process: one clear line naming the value, exit 2.

The same cases generate docs/BAD_INPUT.md (input -> message -> exit code); the test fails if the
file is out of date. Regenerate: PPSCHED_WRITE_BAD_INPUT_DOC=1 pytest tests/test_bad_input_cli.py
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ppsched.cli.main import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "BAD_INPUT.md"
WL = ("--workload", "azure-conv", "--num-requests", "5")
OUT = ("--out", "<tmp>/out")

# Small malformed files, written to a temporary folder (shown as <tmp> in the doc).
FILES = {
    "truncated.json": '{"alpha0": 1.0, "alpha1": ',
    "not_a_profile.json": '{"kind": "linear"}',
    "config_missing_keys.json": '{"hidden_size": 10}',
    "azure_bad_row.csv": ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                          "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.5,abc,12\n"),
    "azure_bad_time.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,374,44\n",
    "wrong_header.csv": "a,b\n1,2\n",
    "empty.csv": "",
    "header_only.csv": "num_prefill_tokens,num_decode_tokens\n",
    "negative.csv": "num_prefill_tokens,num_decode_tokens\n100,-5\n",
    "zero.csv": "num_prefill_tokens,num_decode_tokens\n0,5\n",
    "binary.csv": "\x00\x01\x02binary",
    "backwards.csv": ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50.5,374,44\n"
                      "2023-11-16 18:15:46.6805900,100,12\n"),
    "not_utf8.csv": "num_prefill_tokens,num_decode_tokens\n\udcff\udcfe100,5\n",
    "knob_unknown.json": '{"predictive": {"cadance": 4}}',
    "knob_bad_value.json": '{"admission": {"headroom": -1}}',
    "bad.jsonl": ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}\n'
                  "{timestamp: 1}\n"),
}


@dataclass(frozen=True)
class Case:
    what: str  # the bad input in words
    argv: tuple[str, ...]
    names: str  # the message must contain this (the bad value, as the user typed it)
    env: tuple[tuple[str, str], ...] = ()
    extra_lines: bool = False  # other output precedes the error line (flagged in the doc)


CASES: tuple[Case, ...] = (
    # chunk / policy specs
    Case("unknown chunk spec", ("run", "--chunk", "bogus", *WL, *OUT), "'bogus'"),
    Case("static chunk of 0", ("run", "--chunk", "static:0", *WL, *OUT), "0"),
    Case("negative static chunk", ("run", "--chunk", "static:-5", *WL, *OUT), "-5"),
    Case("non-numeric static chunk", ("run", "--chunk", "static:abc", *WL, *OUT),
         "'static:abc'"),
    Case("chunk cap not positive", ("run", "--max-chunk-tokens", "0", *WL, *OUT),
         "--max-chunk-tokens 0"),
    Case("unknown delay-scheduling mode", ("run", "--ds", "maybe", *WL, *OUT), "'maybe'"),
    Case("negative DS hold bound", ("run", "--ds-max-consecutive", "-1", *WL, *OUT), "-1"),
    Case("unknown admission mode", ("run", "--admission", "maybe", *WL, *OUT), "'maybe'"),
    Case("unknown policy knob", ("run", "--policy-config", "<tmp>/knob_unknown.json", *WL, *OUT),
         "predictive.cadance"),
    Case("policy knob out of range (goodput)", ("goodput", "--policy-config",
                                                "<tmp>/knob_bad_value.json", "--workload",
                                                "azure-conv", "--out", "<tmp>/out"), "-1"),
    Case("policy config missing", ("run", "--policy-config", "<tmp>/none.json", *WL, *OUT),
         "none.json"),
    Case("unknown policy (sweep)", ("sweep", "--policies", "bogus", "--workload", "azure-conv",
                                    "--rates", "1", "--no-progress", *OUT), "'bogus'"),
    Case("unknown policy (goodput)", ("goodput", "--policies", "bogus", "--workload",
                                      "azure-conv", "--no-progress", *OUT), "'bogus'"),
    # rates and SLOs
    Case("negative rate", ("run", "--rate", "-1", "--workload", "sharegpt", *OUT), "-1"),
    Case("zero rate", ("run", "--rate", "0", "--workload", "sharegpt", *OUT), "0"),
    Case("NaN rate", ("run", "--rate", "nan", "--workload", "sharegpt", *OUT), "nan"),
    Case("negative rate (sweep list)", ("sweep", "--policies", "greedy", "--workload",
                                        "azure-conv", "--rates=1,-1", "--no-progress", *OUT),
         "'-1'"),
    Case("TTFT SLO of 0", ("run", "--slo-ttft-ms", "0", *WL, *OUT), "ttft_ms=0"),
    Case("negative TPOT SLO", ("run", "--slo-tpot-ms", "-3", *WL, *OUT), "tpot_ms=-3"),
    Case("infinite TTFT SLO", ("run", "--slo-ttft-ms", "inf", *WL, *OUT), "ttft_ms=inf"),
    Case("SLO scale of 0", ("goodput", "--slo-scales", "0", "--workload", "azure-conv",
                            "--policies", "greedy", "--no-progress", *OUT), "'0'"),
    Case("negative SLO scale", ("goodput", "--slo-scales=1,-0.5", "--workload", "azure-conv",
                                "--policies", "greedy", "--no-progress", *OUT), "'-0.5'"),
    Case("goodput floor above the start rate", ("goodput", "--floor", "5", "--start", "1",
                                                "--workload", "azure-conv", "--policies",
                                                "greedy", "--no-progress", *OUT),
         "start=1.0, floor=5.0"),
    Case("goodput resolution coarser than 2%", ("goodput", "--rel-tol", "0.05", "--workload",
                                                "azure-conv", "--policies", "greedy",
                                                "--no-progress", *OUT), "rel_tol=0.05"),
    Case("mooncake line not JSON", ("workload", "stats", "--trace-file",
                                    "<tmp>/bad.jsonl", "--format", "mooncake"),
         "line 2: not JSON"),
    # model / hardware / parallelism / engine settings
    Case("unknown model", ("run", "--model", "llama-9000", *WL, *OUT), "'llama-9000'"),
    Case("model config not JSON", ("run", "--model", "<tmp>/truncated.json", *WL, *OUT),
         "truncated.json"),
    Case("model config lacks keys", ("run", "--model", "<tmp>/config_missing_keys.json", *WL,
                                     *OUT), "num_attention_heads"),
    Case("unknown model (sweep)", ("sweep", "--model", "nope", "--policies", "greedy",
                                   "--workload", "azure-conv", "--rates", "1", "--no-progress",
                                   *OUT), "'nope'"),
    Case("unknown hardware", ("run", "--hardware", "h100", *WL, *OUT), "'h100'"),
    Case("unknown hardware (sweep)", ("sweep", "--hardware", "h100", "--policies", "greedy",
                                      "--workload", "azure-conv", "--rates", "1",
                                      "--no-progress", *OUT), "'h100'"),
    Case("zero pipeline stages", ("run", "--parallel", "pp0", *WL, *OUT), "'pp0'"),
    Case("unknown parallelism", ("run", "--parallel", "dp4", *WL, *OUT), "'dp4'"),
    Case("memory fraction above 1", ("run", "--mem-fraction-static", "1.5", *WL, *OUT), "1.5"),
    Case("zero running-request cap", ("run", "--max-running-requests", "0", *WL, *OUT),
         "--max-running-requests 0"),
    Case("unknown engine", ("run", "--engine", "grpc://x", *WL, *OUT), "'grpc://x'"),
    Case("negative seed", ("run", "--seed", "-1", *WL, *OUT), "--seed -1"),
    Case("model does not fit the GPUs", ("run", "--parallel", "pp1", *WL, *OUT), "pp_size=1"),
    Case("more stages than layers", ("run", "--parallel", "pp128", *WL, *OUT), "pp_size=128"),
    Case("TP degree not dividing the heads", ("run", "--parallel", "tp3", *WL, *OUT),
         "tp_size=3"),
    Case("memory fraction too small for the weights", ("run", "--mem-fraction-static", "0.01",
                                                       *WL, *OUT), "mem_fraction_static=0.01"),
    Case("flag value of the wrong type (argparse)", ("run", "--slo-ttft-ms", "abc", *WL, *OUT),
         "'abc'"),
    Case("zero worker processes", ("sweep", "--policies", "greedy", "--workload", "azure-conv",
                                   "--rates", "1", "--jobs", "0", "--no-progress", *OUT),
         "--jobs 0"),
    Case("output folder cannot be created", ("run", *WL, "--out", "/dev/null/x"),
         "'/dev/null/x'"),
    Case("report from a folder without results", ("report", *OUT), "holds no results"),
    # profiles
    Case("profile JSON malformed (run)", ("run", "--chunk", "predictive", "--profile",
                                          "<tmp>/truncated.json", *WL, *OUT), "truncated.json"),
    Case("profile JSON of the wrong kind", ("run", "--chunk", "predictive", "--profile",
                                            "<tmp>/not_a_profile.json", *WL, *OUT),
         "not_a_profile.json"),
    Case("profile JSON missing", ("run", "--chunk", "predictive", "--profile",
                                  "<tmp>/missing.json", *WL, *OUT), "missing.json"),
    Case("profile JSON missing (goodput)", ("goodput", "--profile", "<tmp>/missing.json",
                                            "--policies", "predictive", "--no-progress", *OUT),
         "missing.json"),
    Case("profile JSON malformed (goodput)", ("goodput", "--profile", "<tmp>/truncated.json",
                                              "--policies", "predictive", "--no-progress", *OUT),
         "truncated.json"),
    Case("profile JSON malformed (profile eval)", ("profile", "eval", "--profile",
                                                   "<tmp>/truncated.json", *WL),
         "truncated.json"),
    Case("profiling CSV with the wrong columns", ("profile", "fit", "--mlp-csv",
                                                  "<tmp>/wrong_header.csv", "--model",
                                                  "qwen2.5-32b"), "wrong_header.csv"),
    Case("profiling CSV missing", ("profile", "fit", "--mlp-csv", "<tmp>/missing.csv",
                                   "--model", "qwen2.5-32b"), "missing.csv"),
    # workloads and trace files
    Case("unknown workload", ("run", "--workload", "nope", *OUT), "'nope'"),
    Case("no workload at all", ("run", *OUT), "no workload"),
    Case("zero requests", ("run", "--workload", "azure-conv", "--num-requests", "0", *OUT),
         "--num-requests 0"),
    Case("negative duration", ("run", "--workload", "azure-conv", "--duration", "-5", *OUT),
         "-5"),
    Case("context cap below 2", ("run", *WL, "--max-context", "1", *OUT), "--max-context 1"),
    Case("trace without --format", ("run", "--trace-file", "<tmp>/negative.csv", "--rate", "1",
                                    *OUT), "negative.csv"),
    Case("trace file missing", ("run", "--trace-file", "<tmp>/missing.csv", "--format",
                                "lengths", "--rate", "1", *OUT), "missing.csv"),
    Case("trace file empty", ("run", "--trace-file", "<tmp>/empty.csv", "--format", "lengths",
                              "--rate", "1", *OUT), "empty.csv"),
    Case("trace with a header only", ("run", "--trace-file", "<tmp>/header_only.csv",
                                      "--format", "lengths", "--rate", "1", *OUT),
         "header_only.csv"),
    Case("trace with the wrong columns", ("run", "--trace-file", "<tmp>/wrong_header.csv",
                                          "--format", "azure", *OUT), "TIMESTAMP"),
    Case("trace row not a number", ("run", "--trace-file", "<tmp>/azure_bad_row.csv",
                                    "--format", "azure", *OUT), "'abc'"),
    Case("trace timestamp unreadable", ("run", "--trace-file", "<tmp>/azure_bad_time.csv",
                                        "--format", "azure", *OUT), "azure_bad_time.csv"),
    Case("trace with a negative length", ("run", "--trace-file", "<tmp>/negative.csv",
                                          "--format", "lengths", "--rate", "1", *OUT), "'-5'"),
    Case("trace with a zero length", ("run", "--trace-file", "<tmp>/zero.csv", "--format",
                                      "lengths", "--rate", "1", *OUT), "'0'"),
    Case("binary trace file", ("run", "--trace-file", "<tmp>/binary.csv", "--format", "lengths",
                               "--rate", "1", *OUT), "binary.csv"),
    Case("trace times going backwards", ("run", "--trace-file", "<tmp>/backwards.csv",
                                         "--format", "azure", *OUT), "backwards.csv"),
    Case("trace not UTF-8", ("run", "--trace-file", "<tmp>/not_utf8.csv", "--format", "lengths",
                             "--rate", "1", *OUT), "not_utf8.csv"),
    Case("trace path is a folder", ("run", "--trace-file", "<tmp>", "--format", "lengths",
                                    "--rate", "1", *OUT), "<tmp>"),
    Case("replay speedup of 0", ("run", "--workload", "azure-conv", "--speedup", "0", *OUT),
         "--speedup 0"),
    Case("negative replay window", ("run", "--workload", "azure-conv", "--window-min", "-1",
                                    *OUT), "--window-min -1"),
    Case("rate and replay together", ("run", "--workload", "azure-conv", "--rate", "1",
                                      "--replay", *OUT), "--replay"),
    Case("bad trace in workload stats", ("workload", "stats", "--trace-file",
                                         "<tmp>/azure_bad_row.csv", "--format", "azure"),
         "'abc'"),
    Case("unknown workload (sweep)", ("sweep", "--policies", "greedy", "--workload", "nope",
                                      "--rates", "1", "--no-progress", *OUT), "'nope'"),
    # environment and data directory
    Case("data directory missing", ("run", "--data-dir", "<tmp>/nodata", *WL, *OUT), "nodata"),
    Case("data directory without traces", ("run", "--data-dir", "<tmp>", *WL, *OUT),
         "AzureLLMInferenceTrace_conv.csv"),
    Case("$PPSCHED_DATA_DIR missing", ("run", *WL, *OUT), "nodata",
         env=(("PPSCHED_DATA_DIR", "<tmp>/nodata"),)),
    Case("data directory missing (sim validate)", ("sim", "validate", "--data-dir",
                                                   "<tmp>/nodata"), "nodata"),
)


def _run(case: Case, tmp: Path, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[str], str]:
    for name, text in FILES.items():
        if not (tmp / name).exists():  # surrogateescape: lone \udcXX become raw (non-UTF-8) bytes
            (tmp / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    for key, value in case.env:
        monkeypatch.setenv(key, value.replace("<tmp>", str(tmp)))
    argv = [a.replace("<tmp>", str(tmp)) for a in case.argv]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    return rc, lines, captured.err.replace(str(tmp), "<tmp>")


_SEEN: dict[Case, tuple[int, str]] = {}  # (exit, last stderr line) per case, for the doc test


def _last_line(err: str) -> str:
    return err.strip().splitlines()[-1].removeprefix("ppsched: error: ") if err.strip() else ""


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.what)
def test_bad_input_exits_2_with_one_clear_line(case, tmp_path, capsys, monkeypatch):
    rc, lines, err = _run(case, tmp_path, capsys, monkeypatch)
    _SEEN[case] = (rc, _last_line(err))
    assert rc == 2, f"{case.argv}: exit {rc}, stderr {lines}"
    assert lines and "Traceback" not in "\n".join(lines)
    assert lines[-1].startswith("ppsched: error: "), lines
    if not case.extra_lines:
        assert len(lines) == 1, f"expected one line, got {lines}"
    shown = lines[-1].replace(str(tmp_path), "<tmp>")
    assert case.names in shown, f"message {shown!r} does not name {case.names!r}"


def render(rows: list[tuple[Case, int, str]]) -> str:
    out = ["# What each bad input gets", "",
           "Generated by `tests/test_bad_input_cli.py` from the cases it runs (in-process, "
           "`ppsched.cli.main.main`); that test fails when this file is out of date. "
           "Every case exits with code 2 and prints one line on stderr, no traceback. "
           "`<tmp>` stands for a temporary folder holding the malformed file named.", "",
           "| bad input | command | exit | message (stderr) |", "|---|---|---|---|"]
    for case, rc, message in rows:
        env = " ".join(f"{k}={v}" for k, v in case.env)
        cmd = (f"{env} " if env else "") + "ppsched " + " ".join(case.argv)
        out.append(f"| {case.what} | `{cmd}` | {rc} | {message.replace('|', '&#124;')} |")
    return "\n".join(out) + "\n"


def test_bad_input_doc_is_current(tmp_path, capsys, monkeypatch):
    rows = []
    for case in CASES:  # cases the parametrized test already ran are not run twice
        if case not in _SEEN:
            with monkeypatch.context() as mp:
                rc, _, err = _run(case, tmp_path, capsys, mp)
            _SEEN[case] = (rc, _last_line(err))
        rows.append((case, *_SEEN[case]))
    text = render(rows)
    if os.environ.get("PPSCHED_WRITE_BAD_INPUT_DOC") == "1":
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
    assert DOC.is_file() and DOC.read_text() == text, (
        "docs/BAD_INPUT.md is out of date: PPSCHED_WRITE_BAD_INPUT_DOC=1 pytest "
        "tests/test_bad_input_cli.py")
