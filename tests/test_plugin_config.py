"""Plugin configuration from environment variables / a config file: good and bad values."""

import json

import pytest

from ppsched.core.errors import UserError
from ppsched.sglang_patch.config import PluginConfig, config_from_env


def test_nothing_set_means_off():
    assert config_from_env({}) is None
    assert config_from_env({"PATH": "/bin", "PPSCHED_CHUNK": "  "}) is None


def test_full_configuration():
    cfg = config_from_env({"PPSCHED_CHUNK": "greedy", "PPSCHED_DS": "on",
                           "PPSCHED_DS_MAX_CONSECUTIVE": "2", "PPSCHED_SLO_TTFT_MS": "500",
                           "PPSCHED_SLO_TPOT_MS": "50.5", "PPSCHED_CANDIDATES": "64,16,32,16",
                           "PPSCHED_BOUNDARY_UNIT": "4"}, max_running=16)
    assert cfg.chunk == "greedy" and cfg.ds == "on" and cfg.ds_max_consecutive == 2
    assert cfg.slo.ttft_ms == 500 and cfg.slo.tpot_ms == 50.5
    assert cfg.candidates == (16, 32, 64)
    assert cfg.boundaries == (4, 8, 12, 16)


def test_snap_chunk_to_candidates():
    cfg = PluginConfig(chunk="static:8", candidates=(16, 32, 64))
    assert [cfg.snap_chunk(n) for n in (1, 16, 31, 32, 100)] == [16, 16, 16, 32, 64]
    assert PluginConfig(chunk="static:8").snap_chunk(77) == 77


@pytest.mark.parametrize("env, needle", [
    ({"PPSCHED_DS": "maybe"}, "PPSCHED_DS='maybe'"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_DS_MAX_CONSECUTIVE": "-1"}, "DS_MAX_CONSECUTIVE"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_DS_MAX_CONSECUTIVE": "x"}, "DS_MAX_CONSECUTIVE"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_SLO_TTFT_MS": "0"}, "SLO_TTFT_MS"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_SLO_TPOT_MS": "nan"}, "SLO_TPOT_MS"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_SLO_TPOT_MS": "-3"}, "SLO_TPOT_MS"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_CANDIDATES": "16,0"}, "CANDIDATES"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_CANDIDATES": ","}, "CANDIDATES"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_BOUNDARY_UNIT": "0"}, "BOUNDARY_UNIT"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_BOUNDARY_UNIT": "4",
      "PPSCHED_BOUNDARIES": "4,8"}, "both set"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_PROFILE": "/nonexistent/p.json"}, "PROFILE"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_DECISION_LOG": "/nonexistent/dir/log"},
     "DECISION_LOG"),
    ({"PPSCHED_CHUNK": "sglang-dynamic"}, "enable-dynamic-chunking"),
    ({"PPSCHED_SLO_TTFT_MS": "100"}, "nothing to enable"),
    ({"PPSCHED_CHUNK": "static:8", "PPSCHED_QUEUE_VIEW": "0"}, "QUEUE_VIEW"),
])
def test_bad_values_name_the_variable(env, needle):
    with pytest.raises(UserError, match=needle.replace("(", r"\(").replace("*", r"\*")):
        config_from_env(env)


def test_config_file_and_override(tmp_path):
    path = tmp_path / "ppsched.json"
    path.write_text(json.dumps({"chunk": "static:32", "ds": "on", "candidates": [16, 32],
                                "boundaries": [4, 8]}))
    cfg = config_from_env({"PPSCHED_CONFIG": str(path), "PPSCHED_DS": "off"})
    assert cfg.chunk == "static:32" and cfg.ds == "off"
    assert cfg.candidates == (16, 32) and cfg.boundaries == (4, 8)


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not valid JSON"), ("[1, 2]", "JSON object"),
    ('{"chunk": "static:8", "colour": "red"}', "unknown key 'colour'"),
])
def test_bad_config_file(tmp_path, content, needle):
    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.raises(UserError, match=needle):
        config_from_env({"PPSCHED_CONFIG": str(path)})


def test_missing_config_file(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        config_from_env({"PPSCHED_CONFIG": str(tmp_path / "absent.json")})


def test_decision_log_must_be_a_writable_file(tmp_path):
    base = {"PPSCHED_CHUNK": "static:8"}
    with pytest.raises(UserError, match="is a folder"):
        config_from_env({**base, "PPSCHED_DECISION_LOG": str(tmp_path)})
    ok = config_from_env({**base, "PPSCHED_DECISION_LOG": str(tmp_path / "new.jsonl")})
    assert ok.decision_log == str(tmp_path / "new.jsonl")
    assert not (tmp_path / "new.jsonl").exists()  # checked, not created


def test_unknown_hardware_names_the_variable():
    with pytest.raises(UserError, match="PPSCHED_HARDWARE='tpu'"):
        config_from_env({"PPSCHED_CHUNK": "static:8", "PPSCHED_HARDWARE": "tpu"})


def test_a_log_that_cannot_open_fails_at_start_up_not_mid_run(tmp_path):
    """DecisionLog opens the file in its constructor (inside the start-up guard)."""
    from ppsched.sglang_patch.decision_log import DecisionLog

    with pytest.raises(IsADirectoryError):
        DecisionLog(str(tmp_path), 0)
    log = DecisionLog(str(tmp_path / "ok.jsonl"), 3)
    log.write("x", a=1)
    log.write("y", b=[1, 2])
    log.flush()
    lines = (tmp_path / "ok.jsonl").read_text().splitlines()
    assert [line.count('"rank": 3') for line in lines] == [1, 1]
