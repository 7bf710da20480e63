"""One PolicyConfig: every policy knob read from one JSON file by run, goodput, sweep and serve (the
plugin), written into what each produces, and reaching the controllers it builds."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ppsched.admission.controller import AdmissionConfig
from ppsched.cli.cmd_serve import plugin_env
from ppsched.cli.main import build_parser, main
from ppsched.core.errors import UserError
from ppsched.core.models import load_model_config
from ppsched.core.policy_context import PolicyContext
from ppsched.core.slo import Slo
from ppsched.dcp.knobs import GreedyConfig, PredictiveConfig
from ppsched.delay_sched.trimmer import DsConfig
from ppsched.experiments.run_config import RunConfig
from ppsched.policy_config import PolicyConfig, load_policy_config
from ppsched.sglang_patch.config import config_from_env
from ppsched.sglang_patch.policies import build_policies
from ppsched.sim.engine.simulate import build_engine

CUSTOM = {"predictive": {"cadence": 4, "window_s": 5}, "greedy": {"initial_tokens": 512},
          "ds": {"skip_queued_tokens": 0}, "admission": {"headroom": 0.6,
                                                         "guard_percentile": None}}


@pytest.fixture
def custom_file(tmp_path):
    path = tmp_path / "knobs.json"
    path.write_text(json.dumps(CUSTOM))
    return path


def test_defaults_round_trip_and_a_file_changes_only_what_it_names(custom_file):
    assert PolicyConfig.from_dict(PolicyConfig().to_dict()) == PolicyConfig()
    assert load_policy_config(None) == PolicyConfig()
    cfg = load_policy_config(str(custom_file))
    assert cfg.predictive == PredictiveConfig(cadence=4, window_s=5.0)
    assert cfg.greedy == GreedyConfig(initial_tokens=512)
    assert cfg.ds == DsConfig(skip_queued_tokens=0)
    assert cfg.admission == AdmissionConfig(headroom=0.6, guard_percentile=None)
    assert isinstance(cfg.predictive.window_s, float)  # a JSON int is a number for a float knob
    assert PolicyConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(("data", "needle"), [
    ([1], "expected a JSON object with sections predictive, greedy, ds, admission; got list"),
    ({"chunk": {}}, "unknown section 'chunk'; expected one of predictive, greedy, ds, admission"),
    ({"ds": 3}, "section 'ds': expected a JSON object of knobs; got 3"),
    ({"greedy": {"step": 1}}, "unknown knob greedy.step; expected one of initial_tokens"),
    ({"predictive": {"cadence": "4"}}, "predictive.cadence='4': expected an integer"),
    ({"predictive": {"cadence": 2.0}}, "predictive.cadence=2.0: expected an integer"),
    ({"predictive": {"cadence": None}}, "predictive.cadence=None: expected an integer"),
    ({"admission": {"cadence_guard": 1}}, "admission.cadence_guard=1: expected true or false"),
    ({"greedy": {"q": True}}, "greedy.q=True: expected a number"),
    ({"admission": {"guard_percentile": "p90"}}, "expected a number or null"),
    ({"greedy": {"signals": 1}}, "greedy.signals=1: expected a string"),
    ({"predictive": {"cadence": 0}}, "predictive cadence=0: expected an integer >= 1"),
    ({"ds": {"tpot_percentile": 101}}, "ds tpot_percentile=101.0: expected a number in [0, 100]"),
    ({"greedy": {"signals": "mean"}}, "greedy signals='mean': expected one of leading, completed"),
    ({"admission": {"headroom": 0}}, "admission headroom 0.0: expected a number in (0, 4]"),
])
def test_bad_config_names_the_value_and_what_was_expected(tmp_path, data, needle):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as err:
        load_policy_config(str(path))
    assert str(err.value).startswith(f"--policy-config {str(path)!r}: ")
    assert needle in str(err.value)


def test_unreadable_or_malformed_file_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="cannot read it"):
        load_policy_config(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{predictive: 1")
    with pytest.raises(UserError, match="not valid JSON"):
        load_policy_config(str(bad))


def test_the_cli_prints_the_defaults_and_rejects_a_bad_file(tmp_path, capsys):
    assert main(["policy-config"]) == 0
    assert json.loads(capsys.readouterr().out) == PolicyConfig().to_dict()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ds": {"x": 1}}))
    assert main(["policy-config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown knob ds.x" in err[0]


def test_the_simulator_builds_every_policy_with_the_configs_knobs(custom_file):
    knobs = load_policy_config(str(custom_file))
    base = RunConfig(model="qwen2.5-14b", chunk="predictive", ds="on", admission="on",
                     mixed_chunk=True, policy=knobs)
    engine = build_engine(base, ()).engine
    feed = engine.feed
    assert feed.controller.config == knobs.predictive
    assert feed.trimmer.config == knobs.ds and feed.trimmer.tpot_slo_ms == base.slo.tpot_ms
    assert feed.admission.controller.config == knobs.admission
    greedy = build_engine(replace(base, chunk="greedy"), ()).engine.feed.controller
    assert greedy.cfg == knobs.greedy
    paper = build_engine(replace(base, chunk="greedy-paper"), ()).engine.feed.controller
    assert paper.cfg == replace(knobs.greedy, signals="completed")  # what its name says


def test_run_reads_the_file_and_summary_records_it(custom_file, tmp_path):
    flags = ["run", "--engine", "sim", "--model", "qwen2.5-14b", "--workload", "azure-conv",
             "--rate", "3", "--num-requests", "40", "--seed", "1", "--chunk", "greedy",
             "--mixed-chunk"]
    assert main(flags + ["--policy-config", str(custom_file), "--out", str(tmp_path / "a")]) == 0
    assert main(flags + ["--out", str(tmp_path / "b")]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["config"]["policy"] == load_policy_config(str(custom_file)).to_dict()
    default = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert default["config"]["policy"] == PolicyConfig().to_dict()

    def first_chunk(folder):
        return json.loads((tmp_path / folder / "decisions.jsonl").open().readline())["chunk"]
    # greedy starts at initial_tokens and its first decision steps one candidate (128) from it
    assert (first_chunk("a"), first_chunk("b")) == (384, 128)


def test_goodput_and_sweep_write_the_config_they_ran(custom_file, tmp_path):
    common = ["--model", "qwen2.5-14b", "--workload", "azure-conv", "--policies", "greedy",
              "--policy-config", str(custom_file), "--cache", str(tmp_path / "cache"),
              "--no-progress"]
    assert main(["goodput", *common, "--slo-scales", "1", "--quick", "--max-steps", "2",
                 "--warmup-s", "5", "--measure-s", "10", "--cooldown-s", "5",
                 "--out", str(tmp_path / "g")]) == 0
    written = json.loads((tmp_path / "g" / "config.json").read_text())
    assert written["setup"]["policy"] == load_policy_config(str(custom_file)).to_dict()
    assert written["policies"] == ["greedy"] and written["search"]["seeds"] == 1
    assert main(["sweep", *common, "--rates", "1", "--measure-s", "10",
                 "--out", str(tmp_path / "s")]) == 0
    swept = json.loads((tmp_path / "s" / "config.json").read_text())
    assert swept["setup"]["policy"]["greedy"]["initial_tokens"] == 512


def test_the_plugin_reads_the_file_named_by_its_environment(custom_file):
    env = {"PPSCHED_CHUNK": "predictive", "PPSCHED_DS": "on",
           "PPSCHED_POLICY_CONFIG": str(custom_file), "PPSCHED_MODEL": "qwen2.5-14b"}
    cfg = config_from_env(env)
    knobs = load_policy_config(str(custom_file))
    assert cfg is not None and cfg.policy == knobs
    assert cfg.to_dict()["policy"] == knobs.to_dict()  # the start and enabled records
    ctx = PolicyContext(pp_size=2, slo=Slo(2000.0, 200.0),
                        model=load_model_config("qwen2.5-14b"), max_chunk_tokens=2048)
    chunk, trimmer = build_policies(cfg, ctx)
    assert chunk.config == knobs.predictive and trimmer.config == knobs.ds
    assert config_from_env({"PPSCHED_CHUNK": "greedy"}).policy == PolicyConfig()
    with pytest.raises(UserError, match="PPSCHED_POLICY_CONFIG '/no/such.json': cannot read it"):
        config_from_env({**env, "PPSCHED_POLICY_CONFIG": "/no/such.json"})


def test_serve_passes_the_file_to_every_scheduler_as_an_absolute_path(custom_file, monkeypatch):
    monkeypatch.chdir(custom_file.parent)
    args = build_parser().parse_args(["serve", "--chunk", "predictive", "--policy-config",
                                      custom_file.name, "--", "--model-path", "m"])
    env = plugin_env(args)
    assert env["PPSCHED_POLICY_CONFIG"] == str(custom_file.resolve())
    assert config_from_env(env).policy == load_policy_config(str(custom_file))


def test_the_public_factories_take_the_config():
    import ppsched

    ctx = PolicyContext(pp_size=4, slo=Slo(2000.0, 200.0),
                        model=load_model_config("qwen2.5-14b"), max_chunk_tokens=2048)
    knobs = ppsched.PolicyConfig(greedy=GreedyConfig(initial_tokens=512),
                                 ds=DsConfig(tight_tpot_fraction=0.5))
    assert ppsched.chunk_controller("greedy", ctx, policy=knobs).cfg == knobs.greedy
    assert ppsched.chunk_controller("predictive", ctx).config == PredictiveConfig()
    assert ppsched.decode_trimmer("on", ctx, 2, knobs).config == knobs.ds


def test_overload_runs_with_the_config_and_records_it(custom_file, tmp_path, capsys):
    from ppsched.experiments.plan import Setup, make_config
    from ppsched.experiments.policies import get_policy

    knobs = load_policy_config(str(custom_file))
    assert make_config(get_policy("predictive"), Setup(policy=knobs)).policy == knobs
    assert main(["overload", "--policies", "tp4", "--admission", "on", "--minutes", "0.05",
                 "--memory", "heap", "--policy-config", str(custom_file),
                 "--out", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["overload"]["policy"] == knobs.to_dict()
    assert written["admission"] == ["on"] and written["policies"] == ["tp4"]
