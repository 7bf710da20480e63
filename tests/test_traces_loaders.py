"""Loaders against the real vendored files, synthetic generators, sampling and context capping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.core.errors import UserError
from ppsched.core.paths import data_dir
from ppsched.traces import WORKLOAD_NAMES, cap_context, load_workload, read_trace
from ppsched.traces.catalog import CATALOG


def test_azure_conv_matches_the_file():
    wl = load_workload("azure-conv")
    stats = wl.stats()
    assert stats["requests"] == 19366
    assert stats["span_s"] == pytest.approx(3501.72, abs=0.01)
    assert stats["rate_rps"] == pytest.approx(5.53, abs=0.005)
    assert stats["prompt_tokens"]["p50"] == 1020
    assert stats["output_tokens"]["p50"] == 129
    assert wl.requests[0].arrival_s == 0.0
    assert (wl.requests[0].prompt_tokens, wl.requests[0].output_tokens) == (374, 44)
    # second row is 4.3145790 s after the first (18:15:46.6805900 -> 18:15:50.9951690)
    assert wl.requests[1].arrival_s == pytest.approx(4.314579, abs=1e-6)


def test_azure_code_matches_the_file():
    wl = load_workload("azure-code")
    assert len(wl) == 8819
    assert wl.stats()["rate_rps"] == pytest.approx(2.57, abs=0.005)
    assert (wl.requests[0].prompt_tokens, wl.requests[0].output_tokens) == (4808, 10)


@pytest.mark.parametrize(("name", "rows", "p50_prompt", "p50_output"), [
    ("sharegpt", 30731, 1730, 415),
    ("summarization", 28257, None, None),
])
def test_length_sets_use_every_row_in_file_order(name, rows, p50_prompt, p50_output):
    table = read_trace(data_dir() / CATALOG[name].file, "lengths")
    wl = load_workload(name, rate=4.0)
    assert len(wl) == rows
    _, prompt, output = wl.arrays()
    np.testing.assert_array_equal(prompt, table.prompt_tokens)
    np.testing.assert_array_equal(output, table.output_tokens)
    if p50_prompt is not None:
        assert np.median(prompt) == p50_prompt and np.median(output) == p50_output
    assert any("CNN/DailyMail" in n for n in wl.notes) == (name == "summarization")


def test_summarization_reversed_swaps_lengths():
    plain = load_workload("summarization", rate=1.0, num_requests=200, seed=3)
    rev = load_workload("summarization-reversed", rate=1.0, num_requests=200, seed=3)
    assert [(r.prompt_tokens, r.output_tokens) for r in rev.requests] == \
        [(r.output_tokens, r.prompt_tokens) for r in plain.requests]
    assert [r.arrival_s for r in rev.requests] == [r.arrival_s for r in plain.requests]


@pytest.mark.parametrize(("name", "prompt_range", "output_range"), [
    ("synthetic-prefill", (512, 1024), (32, 64)),
    ("synthetic-decode", (32, 64), (512, 1024)),
])
def test_synthetic_ranges_and_seed(name, prompt_range, output_range):
    wl = load_workload(name, rate=10.0, num_requests=5000, seed=1)
    _, prompt, output = wl.arrays()
    assert prompt.min() == prompt_range[0] and prompt.max() == prompt_range[1]
    assert output.min() == output_range[0] and output.max() == output_range[1]
    assert load_workload(name, rate=10.0, num_requests=5000, seed=1).requests == wl.requests
    assert load_workload(name, rate=10.0, num_requests=5000, seed=2).requests != wl.requests


def test_synthetic_lengths_do_not_depend_on_rate():
    a = load_workload("synthetic-prefill", rate=1.0, num_requests=100, seed=5)
    b = load_workload("synthetic-prefill", rate=7.0, num_requests=100, seed=5)
    assert [r.prompt_tokens for r in a.requests] == [r.prompt_tokens for r in b.requests]


def test_sampling_with_replacement_when_more_requested():
    table = read_trace(data_dir() / CATALOG["azure-code"].file, "azure")
    wl = load_workload("azure-code", rate=3.0, num_requests=20000, seed=0)
    assert len(wl) == 20000
    pairs = set(zip(table.prompt_tokens.tolist(), table.output_tokens.tolist(), strict=True))
    assert all((r.prompt_tokens, r.output_tokens) in pairs for r in wl.requests)
    assert any("with replacement" in n for n in wl.notes)
    again = load_workload("azure-code", rate=3.0, num_requests=20000, seed=0)
    assert again.requests == wl.requests


def test_fewer_requests_take_the_first_rows():
    wl = load_workload("sharegpt", rate=2.0, num_requests=10)
    table = read_trace(data_dir() / CATALOG["sharegpt"].file, "lengths")
    assert [r.prompt_tokens for r in wl.requests] == table.prompt_tokens[:10].tolist()


def test_cap_context_counts_and_bounds():
    prompt = np.array([100, 3000, 4000, 1, 5000])
    output = np.array([100, 2000, 1, 5000, 5000])
    new_p, new_o, capped = cap_context(prompt, output, 4096)
    assert capped == 3  # rows 1, 3 and 4; row 2 is exactly 4001 <= 4096
    assert ((new_p + new_o) <= 4096).all() and (new_p >= 1).all() and (new_o >= 1).all()
    assert (new_p <= prompt).all() and (new_o <= output).all()
    assert (new_p[[0, 2]] == prompt[[0, 2]]).all() and (new_o[[0, 2]] == output[[0, 2]]).all()
    assert (new_p[1], new_o[1]) == (2457, 1639)  # 3000*4096//5000 = 2457 keeps the 3:2 ratio


def test_cap_context_caps_the_prompt_alone_too():
    prompt = np.array([100, 1015, 2000, 900])
    output = np.array([100, 2, 2, 300])
    new_p, new_o, capped = cap_context(prompt, output, 1022, max_prompt=1017)
    # row 1 fits the total (1017) and the prompt; row 2 is scaled (2000*1022//2002 = 1020) and
    # then its prompt cut to 1017; row 3 is scaled only (900*1022//1200 = 766)
    assert capped == 2
    assert new_p.tolist() == [100, 1015, 1017, 766] and new_o.tolist() == [100, 2, 2, 256]
    assert ((new_p + new_o) <= 1022).all() and (new_p <= 1017).all()


def test_max_prompt_needs_max_context():
    with pytest.raises(UserError, match="max_prompt=100 without max_context"):
        load_workload("sharegpt", rate=2.0, num_requests=5, max_prompt=100)


def test_max_context_is_reported_never_silent():
    wl = load_workload("sharegpt", rate=2.0, max_context=2048)
    _, prompt, output = wl.arrays()
    assert ((prompt + output) <= 2048).all()
    assert wl.truncated > 0
    assert any(f"{wl.truncated} requests capped" in n for n in wl.notes)
    assert wl.describe()["truncated"] == wl.truncated


def test_duration_and_window_bounds():
    table = read_trace(data_dir() / CATALOG["azure-conv"].file, "azure")
    wl = load_workload("azure-conv", duration_s=60.0)
    arrival, _, _ = wl.arrays()
    assert len(wl) == int((table.arrival_s < 60.0).sum()) and arrival.max() < 60.0
    wl = load_workload("sharegpt", rate=5.0, duration_s=100.0)
    arrival, _, _ = wl.arrays()
    assert arrival.max() < 100.0 and 400 < len(wl) < 600


def test_all_names_load():
    for name in WORKLOAD_NAMES:
        wl = load_workload(name, rate=1.0, num_requests=50)
        assert len(wl) == 50 and wl.name == name
        assert wl.describe()["requests"] == 50


def test_parsed_files_are_cached_and_read_only():
    path = data_dir() / CATALOG["azure-conv"].file
    first = read_trace(path, "azure")
    assert read_trace(path, "azure") is first
    with pytest.raises(ValueError):
        first.prompt_tokens[0] = 1


def test_edited_user_file_is_reread(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n10,2\n")
    assert len(read_trace(path, "lengths")) == 1
    path.write_text("num_prefill_tokens,num_decode_tokens\n10,2\n20,3\n")
    assert len(read_trace(path, "lengths")) == 2


def test_replay_more_than_available_is_an_error():
    with pytest.raises(UserError, match="only"):
        load_workload("azure-conv", window_min=1.0, num_requests=10_000)


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 10**5),
                               st.floats(0, 100, allow_nan=False)), min_size=1, max_size=40))
def test_user_files_parse_exactly(tmp_path_factory, rows):
    folder = tmp_path_factory.mktemp("t")
    lengths, azure = folder / "l.csv", folder / "a.csv"
    gaps = np.cumsum([r[2] for r in rows])
    lengths.write_text("\ufeffnum_prefill_tokens, num_decode_tokens\n"
                       + "".join(f"{p}, {o}\n" for p, o, _ in rows))
    body = "".join(f"{float(t)!r},{p},{o}\n" for (p, o, _), t in zip(rows, gaps, strict=True))
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + body)
    for table in (read_trace(lengths, "lengths"), read_trace(azure, "azure")):
        assert table.prompt_tokens.tolist() == [r[0] for r in rows]
        assert table.output_tokens.tolist() == [r[1] for r in rows]
    np.testing.assert_allclose(read_trace(azure, "azure").arrival_s, gaps - gaps[0], atol=1e-9)


def test_rows_with_more_fields_than_the_header_are_refused(tmp_path):
    from ppsched.traces.readers import read_trace

    path = tmp_path / "extra.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n100,5,7\n10,5,1\n")
    with pytest.raises(UserError, match=r"line 2: 3 fields"):
        read_trace(path, "lengths")


def test_resample_draws_lengths_from_every_row_per_seed():
    table = read_trace(data_dir() / CATALOG["azure-conv"].file, "azure")
    rows = set(zip(table.prompt_tokens.tolist(), table.output_tokens.tolist(), strict=True))
    plain = load_workload("azure-conv", rate=2.0, num_requests=300, seed=1)
    first = list(zip(table.prompt_tokens[:300].tolist(), table.output_tokens[:300].tolist(),
                     strict=True))
    assert [(r.prompt_tokens, r.output_tokens) for r in plain.requests] == first  # file order
    a = load_workload("azure-conv", rate=2.0, num_requests=300, seed=1, resample=True)
    b = load_workload("azure-conv", rate=2.0, num_requests=300, seed=2, resample=True)
    pairs_a = [(r.prompt_tokens, r.output_tokens) for r in a.requests]
    assert set(pairs_a) <= rows and pairs_a != first
    assert pairs_a != [(r.prompt_tokens, r.output_tokens) for r in b.requests]
    assert [r.arrival_s for r in a.requests] == [r.arrival_s for r in plain.requests]
    with pytest.raises(UserError, match="Poisson"):
        load_workload("azure-conv", resample=True)


def test_sharegpt_short_keeps_the_short_prompt_rows_in_file_order():
    table = read_trace(data_dir() / CATALOG["sharegpt"].file, "lengths")
    keep = table.prompt_tokens <= 1024
    wl = load_workload("sharegpt-short", rate=4.0)
    _, prompt, output = wl.arrays()
    assert len(wl) == int(keep.sum()) == 11129
    np.testing.assert_array_equal(prompt, table.prompt_tokens[keep])
    np.testing.assert_array_equal(output, table.output_tokens[keep])
    assert any("11129 of the file's 30731 rows" in n for n in wl.notes)
    sampled = load_workload("sharegpt-short", rate=4.0, num_requests=500, seed=2, resample=True)
    assert max(r.prompt_tokens for r in sampled.requests) <= 1024


def test_prompt_filter_keeps_rows_together_and_refuses_an_empty_set():
    from ppsched.traces.load import _prompts_up_to
    from ppsched.traces.readers import TraceTable

    table = TraceTable("t", "mooncake", np.array([10, 900, 30]), np.array([1, 2, 3]),
                       np.array([0.0, 1.0, 2.0]), ((1,), (2, 3), (4,)))
    short = _prompts_up_to(table, 100)
    assert short.prompt_tokens.tolist() == [10, 30] and short.output_tokens.tolist() == [1, 3]
    assert short.arrival_s.tolist() == [0.0, 2.0] and short.prefix_block_ids == ((1,), (4,))
    with pytest.raises(UserError, match="at most 5 tokens"):
        _prompts_up_to(table, 5)
