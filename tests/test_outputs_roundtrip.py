"""Run outputs: files, columns, strict JSON, and the requests.csv round trip."""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import fields

import pandas as pd
import pytest

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.experiments.outputs import REQUEST_COLUMNS, read_requests_csv, write_run_outputs
from ppsched.metrics import jsonable, summarize

RECORDS = [
    RequestRecord(0, 0.0, 100, 5, first_token_s=0.5, finish_s=1.5, slot=1, retractions=2),
    RequestRecord(1, 0.25, 50, 1, first_token_s=0.75, finish_s=0.75, slot=0),
    RequestRecord(2, 0.5, 70, 9, rejected=True, reject_reason="prompt, too long"),
]


def test_writes_all_files_and_round_trips(tmp_path):
    summary = summarize(RECORDS, Slo())
    iterations = pd.DataFrame({"slot": [0, 1], "start_s": [0.0, 0.1]})
    decisions = [{"t": 0.0, "chunk": 512}, {"t": 0.1, "chunk": math.nan}]
    written = write_run_outputs(tmp_path / "run", RECORDS, summary, {"policy": "static-2048"},
                                iterations=iterations, decisions=decisions)
    assert set(written) == {"summary", "requests", "iterations", "decisions"}

    frame = pd.read_csv(written["requests"])
    assert tuple(frame.columns) == REQUEST_COLUMNS
    assert frame.loc[0, "ttft_ms"] == pytest.approx(500.0)
    assert frame.loc[0, "tpot_ms"] == pytest.approx(250.0)
    assert math.isnan(frame.loc[1, "tpot_ms"]) and math.isnan(frame.loc[2, "e2e_ms"])

    back = read_requests_csv(written["requests"])
    assert len(back) == 3
    for got, want in zip(back, RECORDS, strict=True):
        assert (got.req_id, got.prompt_tokens, got.output_tokens, got.rejected, got.slot,
                got.retractions, got.reject_reason) == \
            (want.req_id, want.prompt_tokens, want.output_tokens, want.rejected, want.slot,
             want.retractions, want.reject_reason)
        for field in ("arrival_s", "first_token_s", "finish_s"):
            a, b = getattr(got, field), getattr(want, field)
            assert (math.isnan(a) and math.isnan(b)) or a == b
    assert jsonable(summarize(back, Slo())) == jsonable(summary)

    data = json.loads(written["summary"].read_text(), parse_constant=_no_nan)
    assert data["config"] == {"policy": "static-2048"}
    assert data["requests"] == 3 and data["rejected"] == 1
    lines = written["decisions"].read_text().splitlines()
    assert [json.loads(x, parse_constant=_no_nan) for x in lines] == \
        [{"t": 0.0, "chunk": 512}, {"t": 0.1, "chunk": None}]
    assert pd.read_csv(written["iterations"]).equals(iterations)


def _no_nan(token):
    raise AssertionError(f"non-standard JSON constant {token}")


def test_optional_files_absent_when_not_given(tmp_path):
    written = write_run_outputs(tmp_path, RECORDS, {"requests": 3}, {})
    assert set(written) == {"summary", "requests"}
    assert not (tmp_path / "iterations.csv").exists()
    assert not (tmp_path / "decisions.jsonl").exists()


def test_nan_summary_values_become_null(tmp_path):
    summary = summarize([RECORDS[2]], Slo())  # only a rejected request: every latency is NaN
    write_run_outputs(tmp_path, [RECORDS[2]], summary, {})
    data = json.loads((tmp_path / "summary.json").read_text(), parse_constant=_no_nan)
    assert data["ttft_ms"]["p50"] is None and data["goodput_ok"] is False


def test_read_requests_csv_bad_inputs(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_requests_csv(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,arrival_s\n0,0.0\n")
    with pytest.raises(UserError, match="missing column 'first_token_s'"):
        read_requests_csv(bad)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(UserError, match="empty"):
        read_requests_csv(empty)


def test_a_record_pickles_every_field():
    """Records cross from the worker processes to the driver by pickle (``__reduce__``)."""
    record = RequestRecord(req_id=7, arrival_s=1.5, prompt_tokens=300, output_tokens=20,
                           first_token_s=2.25, finish_s=4.0, rejected=True,
                           reject_reason="context", slot=3, retractions=2)
    assert len(record.__reduce__()[1]) == len(fields(RequestRecord))
    assert pickle.loads(pickle.dumps(record)) == record
    unfinished = RequestRecord(req_id=1, arrival_s=0.0, prompt_tokens=5, output_tokens=5)
    back = pickle.loads(pickle.dumps(unfinished))
    assert back.req_id == 1 and math.isnan(back.first_token_s) and math.isnan(back.finish_s)
