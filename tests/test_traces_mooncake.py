"""Mooncake JSONL reader on the real vendored file, bad-input errors, over-context counts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.core.paths import data_dir
from ppsched.traces import load_workload, read_trace

REAL = data_dir() / "traces" / "mooncake_synthetic_trace.jsonl"


def test_real_file_parses_every_line_with_its_block_ids():
    table = read_trace(REAL, "mooncake")
    lines = [json.loads(t) for t in REAL.read_text().splitlines() if t.strip()]
    assert len(table) == len(lines) == 3993
    assert table.arrival_s[-1] == pytest.approx(1022.025)  # last timestamp 1022025 ms
    assert (table.prompt_tokens[0], table.output_tokens[0]) == (40160, 6)
    assert table.prefix_block_ids[0] == tuple(range(79))  # ceil(40160 / 512) blocks
    assert all(len(b) == math.ceil(p / 512)
               for b, p in zip(table.prefix_block_ids, table.prompt_tokens, strict=True))


def test_catalog_name_replays_and_poisson_keeps_each_rows_ids():
    wl = load_workload("mooncake-synthetic")
    assert len(wl) == 3993 and wl.requests[0].prefix_block_ids == tuple(range(79))
    table = read_trace(REAL, "mooncake")
    rows: dict[tuple[int, ...], set[tuple[int, int]]] = {}  # equal prefixes may share ids
    for b, p, o in zip(table.prefix_block_ids, table.prompt_tokens, table.output_tokens,
                       strict=True):
        rows.setdefault(b, set()).add((int(p), int(o)))
    resampled = load_workload("mooncake-synthetic", rate=3.0, num_requests=6000, seed=4)
    assert len(resampled) == 6000  # more than the file: sampled with replacement
    for req in resampled.requests[:500]:
        assert (req.prompt_tokens, req.output_tokens) in rows[req.prefix_block_ids]


def test_capping_keeps_only_the_blocks_the_prompt_still_covers():
    wl = load_workload("mooncake-synthetic", max_context=4096)
    assert wl.truncated > 0
    for req in wl.requests:
        assert len(req.prefix_block_ids) == math.ceil(req.prompt_tokens / 512)


def test_over_context_count_matches_the_lengths_and_stats_report_it(capsys):
    wl = load_workload("mooncake-synthetic")
    _, prompt, output = wl.arrays()
    expected = int(((prompt + output) > 32768).sum())
    assert wl.over_context(32768) == expected == 646
    assert main(["workload", "stats", "mooncake-synthetic", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["over_context"], data["context_limit"], data["truncated"]) == (646, 32768, 0)
    assert main(["workload", "stats", "mooncake-synthetic", "--max-context", "32768",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["over_context"], data["truncated"]) == (0, 646)


@pytest.mark.parametrize(("text", "expected"), [
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}\nnot json\n',
     "line 2: not JSON"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2}\n', "line 1: missing hash_ids"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": [0]}\n'
     '{"timestamp": 4, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n',
     "line 2: timestamp=4 is earlier"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 2, "hash_ids": []}\n',
     "line 1: input_length=0"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [0]}\n',
     "line 1: 1 hash_ids for input_length=600"),
    ('{"timestamp": 0, "input_length": 6, "output_length": 2, "hash_ids": ["a"]}\n',
     "line 1: hash_ids="),
    ("\n\n", "no JSON lines"),
])
def test_malformed_lines_name_the_line(tmp_path, text, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(UserError, match=expected):
        read_trace(path, "mooncake")


def test_user_jsonl_through_the_cli(tmp_path, capsys):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 1000 * i, "input_length": 100 * (i + 1),
                                        "output_length": 5, "hash_ids": [i]}) + "\n"
                            for i in range(3)))
    assert main(["workload", "stats", "--trace-file", str(path), "--format", "mooncake",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["requests"], data["span_s"], data["prompt_tokens"]["p50"]) == (3, 2.0, 200)
    np.testing.assert_equal(data["over_context"], 0)
