import io
import shutil

import pandas as pd
import pytest
import test_experiments_fakes as fakes
from record_compare import same_records

from ppsched.core.paths import data_dir
from ppsched.core.requests import RequestRecord
from ppsched.experiments.cache import RunCache, records_from_frame, records_to_frame, run_key
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.runner import Runner, RunTask
from ppsched.experiments.workload_spec import WorkloadSpec

SPEC = WorkloadSpec("synthetic-decode", rate=2.0, num_requests=40, seed=3)


def test_records_round_trip_keeps_nan_and_rejections():
    recs = (RequestRecord(0, 0.5, 10, 3, 0.7, 1.2, slot=2, retractions=1),
            RequestRecord(1, 0.9, 99999, 5, rejected=True, reject_reason="prompt > KV capacity"))
    back = records_from_frame(records_to_frame(recs))
    assert back[0] == recs[0]
    assert back[1].rejected and back[1].reject_reason == "prompt > KV capacity"
    assert pd.isna(back[1].first_token_s) and back[1].slot == -1


def test_cache_file_reads_back_every_record(tmp_path):
    """The cache writes requests.csv.gz itself (``records_csv``): the same table pandas writes,
    and the same records when read back (NaN, quoting, booleans, long floats)."""
    recs = (RequestRecord(0, 0.1 + 0.2, 10, 3, 1 / 3, 1e-7, slot=2, retractions=1),
            RequestRecord(1, 123456.789012345, 99999, 5, rejected=True,
                          reject_reason='prompt, "too" long'),
            RequestRecord(2, 5.0, 7, 1, 5.5, 5.5, slot=0))
    entry = RunCache(tmp_path).put("k", recs, {}, {})
    written = pd.read_csv(entry.path / "requests.csv.gz", keep_default_na=False, na_values=[""])
    pd.testing.assert_frame_equal(written, pd.read_csv(
        io.StringIO(records_to_frame(recs).to_csv(index=False)), keep_default_na=False,
        na_values=[""]))
    back = RunCache(tmp_path).get("k").records
    assert back[0] == recs[0] and back[2] == recs[2]
    assert back[1].reject_reason == 'prompt, "too" long' and pd.isna(back[1].finish_s)


def test_key_changes_with_config_workload_and_code():
    a, b = RunConfig(chunk="static:512"), RunConfig(chunk="static:1024")
    w = SPEC.to_dict()
    assert run_key(a.to_dict(), w, "x") == run_key(RunConfig(chunk="static:512").to_dict(), w, "x")
    assert run_key(a.to_dict(), w, "x") != run_key(b.to_dict(), w, "x")
    assert run_key(a.to_dict(), w, "x") != run_key(a.to_dict(), SPEC.at_rate(3.0).to_dict(), "x")
    assert run_key(a.to_dict(), w, "x") != run_key(a.to_dict(), w, "y")


def test_rerun_hits_cache_and_config_change_invalidates(tmp_path):
    fakes.CALLS.clear()
    task = RunTask(RunConfig(chunk="static:512"), SPEC)
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        first = runner.submit(task).result()
    assert not first.cached and fakes.CALLS == ["static:512"]
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        again = runner.submit(task).result()
        changed = runner.submit(RunTask(RunConfig(chunk="static:512", seed=1), SPEC)).result()
    assert again.cached and same_records(again.records, first.records)
    assert not changed.cached and len(fakes.CALLS) == 2
    assert changed.key != first.key


def test_iterations_requested_later_are_computed(tmp_path):
    fakes.CALLS.clear()
    cfg = RunConfig(chunk="static:256")
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        plain = runner.submit(RunTask(cfg, SPEC)).result()
        assert plain.iterations() is None
        full = runner.submit(RunTask(cfg, SPEC, keep_iterations=True)).result()
    assert len(fakes.CALLS) == 2
    frame = full.iterations()
    assert list(frame["measured_ms"]) == [20.0, 30.0]


def test_damaged_entry_is_recomputed(tmp_path):
    fakes.CALLS.clear()
    task = RunTask(RunConfig(chunk="static:512"), SPEC)
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        runner.submit(task).result()
    (RunCache(tmp_path).entry(task.key) / "requests.csv.gz").write_bytes(b"not gzip")
    assert RunCache(tmp_path).get(task.key) is None
    with Runner(tmp_path, jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        assert not runner.submit(task).result().cached
    assert len(fakes.CALLS) == 2


def test_parallel_workers_fill_the_cache(tmp_path):
    tasks = [RunTask(RunConfig(chunk=f"static:{c}"), SPEC) for c in (256, 512, 1024)]
    with Runner(tmp_path, jobs=2, simulate_ref=fakes.fake_simulate) as runner:
        outcomes = runner.run_all(tasks + tasks)  # duplicates computed once
    assert runner.computed == 3
    assert all(RunCache(tmp_path).has(t.key) for t in tasks)
    assert same_records(outcomes[0].records, outcomes[3].records)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_workload_spec_rejects_bad_rate(bad):
    from ppsched.core.errors import UserError

    with pytest.raises(UserError, match="rate"):
        WorkloadSpec("azure-conv", rate=bad)


def test_key_misses_when_the_trace_file_changes(tmp_path):
    trace = tmp_path / "mine.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n100,10\n200,20\n")
    spec = WorkloadSpec("mine", rate=1.0, num_requests=5, trace_file=str(trace),
                        trace_format="lengths")
    config = RunConfig()
    before = RunTask(config, spec).key
    assert RunTask(config, spec).key == before  # same bytes: same key
    trace.write_text("num_prefill_tokens,num_decode_tokens\n100,10\n200,21\n")  # same size
    assert RunTask(config, spec).key != before


def test_key_misses_when_the_data_dir_changes(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(data_dir() / "traces", data / "traces")
    shutil.copytree(data_dir() / "profiles", data / "profiles")
    spec = WorkloadSpec("azure-conv", rate=1.0, num_requests=5)
    monkeypatch.setenv("PPSCHED_DATA_DIR", str(data))
    before = RunTask(RunConfig(), spec).key
    profile = data / "profiles" / "a100" / "cpu_overheads_codellama34b_tp2.csv"
    profile.write_text(profile.read_text() + "\n")
    after_profile = RunTask(RunConfig(), spec).key
    assert after_profile != before  # an edited cost-model profile misses
    trace = data / "traces" / "AzureLLMInferenceTrace_conv.csv"
    trace.write_text(trace.read_text().replace(",374,44\n", ",375,44\n", 1))
    assert RunTask(RunConfig(), spec).key != after_profile  # an edited catalog trace misses
    monkeypatch.delenv("PPSCHED_DATA_DIR")
    assert RunTask(RunConfig(), spec).key != after_profile  # another data dir misses


def test_alp_profile_reaches_only_the_policies_that_read_it_and_keys_on_its_bytes(tmp_path):
    from ppsched.experiments.plan import Setup, make_config
    from ppsched.experiments.policies import get_policy

    profile = tmp_path / "p.json"
    profile.write_text('{"x": 1}')
    setup = Setup(profile_path=str(profile))
    assert make_config(get_policy("predictive"), setup).profile_path == str(profile)
    assert make_config(get_policy("predictive-ds"), setup).profile_path == str(profile)
    assert make_config(get_policy("static-2048"), setup).profile_path is None  # cache kept
    config = make_config(get_policy("predictive"), setup)
    before = RunTask(config, SPEC).key
    assert before != RunTask(make_config(get_policy("predictive"), Setup()), SPEC).key
    profile.write_text('{"x": 2}')  # same path and size, other bytes: another run
    assert RunTask(config, SPEC).key != before


def test_key_misses_when_a_model_folders_config_json_changes(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    config = folder / "config.json"
    config.write_text('{"hidden_size": 4096}')
    w = SPEC.to_dict()
    for model in (str(folder), str(config)):  # `--model` takes the folder or the file
        cfg = RunConfig(chunk="static:512", model=model).to_dict()
        before = run_key(cfg, w, "x")
        config.write_text('{"hidden_size": 5120}')
        assert run_key(cfg, w, "x") != before
        config.write_text('{"hidden_size": 4096}')
        assert run_key(cfg, w, "x") == before
