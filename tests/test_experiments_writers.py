import pandas as pd
import pytest
import test_experiments_fakes as fakes

from ppsched.cli.main import main
from ppsched.experiments.fig_goodput import format_table
from ppsched.experiments.goodput import SearchSettings
from ppsched.experiments.paper import PaperPlan, figures_step, goodput_step
from ppsched.experiments.plan import Setup
from ppsched.experiments.report import write_report
from ppsched.experiments.runner import Runner
from ppsched.metrics.steady import Window

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLAN = PaperPlan(replay_window_min=1.0,
                 settings=SearchSettings(start=2.0, floor=0.25, rel_tol=0.02, max_steps=8,
                                         verify=True, window=Window(warmup_s=10.0,
                                                                    measure_s=120.0,
                                                                    cooldown_s=5.0)))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    with Runner(out / "cache", jobs=1, simulate_ref=fakes.fake_simulate) as runner:
        setup = Setup()
        table = goodput_step(runner, setup, "azure-conv", out / "goodput" / setup.model, PLAN)
        figures_step(runner, setup, out, PLAN)
    write_report(out, elapsed_s=12.0)
    return out, table


def test_goodput_csv_and_plot(results):
    out, table = results
    folder = out / "goodput" / "qwen2.5-32b"
    assert (folder / "goodput_vs_slo.png").read_bytes()[:8] == PNG_MAGIC
    csv = pd.read_csv(folder / "goodput.csv")
    for col in ("model", "workload", "policy", "slo_scale", "goodput_rps", "ratio_vs_2048"):
        assert col in csv.columns
    assert len(csv) == 8 * 5  # every policy of "all" and predictive-paper, five scales
    assert set(csv["verify"]) <= {"pass", "FAIL", "n/a"}
    text = format_table(table)
    assert "predictive-ds" in text and "SLO 0.2" in text


def test_every_figure_has_png_and_csv(results):
    out, _ = results
    for stem in ("tail_latency_vs_static", "iteration_latency_cdf", "alp_predicted_vs_measured",
                 "synthetic", "azure_replay_attainment"):
        assert (out / "figures" / f"{stem}.png").read_bytes()[:8] == PNG_MAGIC, stem
        assert len(pd.read_csv(out / "figures" / f"{stem}.csv")) > 0, stem
    replay = pd.read_csv(out / "figures" / "azure_replay_attainment.csv")
    assert sorted(replay["tpot_slo_ms"].unique()) == [150.0, 200.0]
    # The fake keeps P90 TPOT under 150 ms at this load only for high-capacity policies.
    assert replay["slo_attainment"].between(0, 1).all()
    alp = pd.read_csv(out / "figures" / "alp_predicted_vs_measured.csv")
    told = alp[alp["source"] == "controller"]
    assert list(told["measured_ms"]) == [20.0, 30.0]


def test_report_shows_ours_next_to_paper(results):
    out, table = results
    text = (out / "REPORT.md").read_text()
    assert "| predictive / static:2048 | 1 |" in text and "2.70×" in text and "5.40×" in text
    ours = table[(table.policy == "predictive") & (table.slo_scale == 1.0)]["ratio_vs_2048"]
    assert f"{float(ours.iloc[0]):.2f}×" in text
    assert "controller's own prediction" in text and "MAPE 4.2% over 2" in text
    assert "51.68" in text and "92.5%" in text
    assert "wall time: 0.2 min" in text


def test_report_without_csvs_is_just_the_commands(tmp_path):
    text = write_report(tmp_path).read_text()
    assert "make demo" in text and "Goodput vs SLO" not in text


@pytest.mark.parametrize("argv, needle", [
    (["sweep", "--rates", "1,x", "--out", "o"], "rate 'x'"),
    (["sweep", "--rates", "1", "--jobs", "0", "--out", "o"], "--jobs 0"),
    (["goodput", "--slo-scales", "1,-0.4", "--out", "o"], "SLO scale '-0.4'"),
    (["goodput", "--model", "nope", "--out", "o"], "unknown model 'nope'"),
    (["goodput", "--floor", "3", "--start", "2", "--out", "o"], "start=2.0, floor=3.0"),
    (["goodput", "--rel-tol", "0.05", "--out", "o"], "rel_tol=0.05"),
    (["goodput", "--trace-file", "missing.jsonl", "--format", "mooncake", "--out", "o"],
     "does not exist"),
    (["goodput", "--workload", "nope", "--out", "o"], "unknown workload 'nope'"),
    (["paper", "--measure-s", "60"], "--measure-s"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_progress_into_a_pipe_prints_whole_lines(capsys):
    from ppsched.experiments.progress import Progress

    bar = Progress("demo")
    bar.add(3)
    for cached in (True, False, False):
        bar.finish_one(cached=cached)
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("3/3 runs (1 cached)     0s\n")


def test_paper_and_figures_parse_their_defaults():
    from ppsched.cli.main import build_parser

    for cmd in ("paper", "figures"):
        args = build_parser().parse_args([cmd])
        assert args.seeds == 3 and not args.no_verify and args.rel_tol == 0.02


@pytest.mark.pure
def test_alp_online_replay_predicts_before_it_learns(monkeypatch):
    import numpy as np

    import ppsched.dcp.registry as registry
    from ppsched.experiments.fig_iter import ALP_WARMUP, alp_frame
    from ppsched.experiments.run_config import RunConfig

    class Recorder:  # predicts the number of measurements it has learnt so far
        def __init__(self):
            self.learnt = []

        def predict(self, shape):
            return float(len(self.learnt))

        def update(self, shape, measured_ms):
            self.learnt.append((shape.prefill_tokens, shape.decode_count, measured_ms))

    rec = Recorder()
    monkeypatch.setattr(registry, "default_predictor", lambda ctx: rec)
    n = ALP_WARMUP + 20
    frame = pd.DataFrame({"stage": 0, "start_s": np.arange(n)[::-1] * 0.1,  # reverse order
                          "prefill_tokens": np.arange(n) % 2 * 128, "prefix_tokens": 0,
                          "decode_reqs": 4, "decode_ctx_sum": 400, "kind": "mixed",
                          "predicted_ms": np.nan, "measured_ms": np.arange(n) + 1.0})
    out = alp_frame(frame, RunConfig(chunk="predictive"))
    assert list(out["predicted_ms"]) == [float(i) for i in range(ALP_WARMUP, n)]
    # Learnt in time order (latest start first in the input), never a measurement ahead.
    assert [m for _, _, m in rec.learnt] == [float(n - i) for i in range(n)]


def test_report_reads_the_recorded_paper_wall_time(tmp_path):
    (tmp_path / "paper_run.json").write_text(
        '{"wall_s": 819.0, "runs_simulated": 725, "runs_cached": 3, "jobs": 2}')
    text = write_report(tmp_path).read_text()
    assert "wall time: 13.7 min with 2 worker processes (725 runs simulated, 3 from cache)" in text


def test_pinned_summary_of_a_paper_run_renders_benchmarks(results, tmp_path, capsys):
    """make paper's last two steps on a (fake) paper run: pin, then generate the docs."""
    import shutil

    from ppsched.experiments.benchmarks_doc import BEGIN, END

    table = results[1]
    out = shutil.copytree(results[0], tmp_path / "results", ignore=shutil.ignore_patterns("cache"))
    ds = out / "goodput" / "ds-synthetic-decode"
    ds.mkdir(parents=True, exist_ok=True)
    table.assign(workload="synthetic-decode").to_csv(ds / "goodput.csv", index=False)
    (out / "paper_run.json").write_text(
        '{"wall_s": 900.0, "runs_simulated": 725, "runs_cached": 3, "jobs": 2}')
    (tmp_path / "README.md").write_text(f"# x\n{BEGIN}\nold table\n{END}\n")
    pin = ["report", "--pin", "paper", "--out", str(out), "--root", str(tmp_path),
           "--commit", "abcdef1", "--date", "2026-12-05"]
    assert main(pin) == 0
    assert (tmp_path / "docs" / "img" / "goodput_vs_slo_qwen2.5-32b.png").read_bytes()[:8] \
        == PNG_MAGIC
    assert main(["report", "--benchmarks", "--root", str(tmp_path)]) == 0
    text = (tmp_path / "BENCHMARKS.md").read_text()
    best = table[(table.policy == "predictive") & (table.slo_scale == 1.0)].iloc[0]
    assert f"| predictive | {best.goodput_rps:.2f}" in text
    assert "`make paper` at commit abcdef1 (2026-12-05)" in text
    assert "`make paper` takes 15 min wall with 2 worker processes (725 runs simulated" in text
    assert "Delay scheduling on synthetic-decode" in text and "MAPE 4.2% over 2" in text
    readme = (tmp_path / "README.md").read_text()
    assert "old table" not in readme and f"| predictive | {best.goodput_rps:.2f}" in readme
    # A heldout pin without bench/run_heldout.sh's output is refused, naming it.
    assert main(["report", "--pin", "heldout", "--out", str(out), "--root", str(tmp_path),
                 "--commit", "abcdef1"]) == 2
    assert "bench/run_heldout.sh" in capsys.readouterr().err
