"""`ppsched report --pin GROUP`: the pinned summary (results/pinned/) from full results.

Each group is what one command measures, so a pin never stamps figures of one command with the
commit of another: ``paper`` (`make paper`: goodput of both models, delay scheduling, the
fixed-load figures, the run's wall time), ``heldout`` and ``heldout-models``
(`bench/run_heldout.sh`). The full results stay untracked; the pinned files are small enough to
track (pinned.MAX_PINNED_BYTES each).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ppsched.core.errors import UserError
from ppsched.experiments.pinned import PinnedMeta, write_pinned

# The goodput.csv columns the tables read (the search's per-rate log `tried` stays behind).
GOODPUT_COLUMNS = ("model", "workload", "policy", "controller", "slo_scale", "goodput_rps",
                   "goodput_max", "seeds", "ratio_vs_2048", "per_seed", "chosen", "warmup_s",
                   "measure_s", "cooldown_s", "over_context", "search_goodput_rps", "verify",
                   "verify_p90_ttft_ms", "verify_p90_tpot_ms", "verify_reason", "verify_tried")
CONTROLLER_COLUMNS = ("model", "workload", "policy", "slo_scale", "goodput_rps", "per_seed",
                      "chosen", "verify")
PAPER_COMMAND = "make paper"
HELDOUT_COMMAND = "bash bench/run_heldout.sh"
HELDOUT_MODELS_COMMAND = (
    "OUT_ROOT=results/heldout-models bash bench/run_heldout.sh bench/models/codellama-34b:sharegpt"
    " bench/models/codellama-34b:azure-conv bench/models/internlm2-20b:sharegpt"
    " bench/models/internlm2-20b:azure-code")


@dataclass(frozen=True, slots=True)
class PinSpec:
    name: str
    title: str
    command: str
    build: Callable[[Path], pd.DataFrame | None]  # results folder -> frame (None: not there)
    note: str = ""


def _goodput_files(files: list[Path], columns: tuple[str, ...]) -> pd.DataFrame | None:
    frames = [pd.read_csv(p) for p in files if p.is_file()]
    if not frames:
        return None
    frame = pd.concat(frames, ignore_index=True)
    return frame[[c for c in columns if c in frame.columns]]


def _paper_goodput(results: Path) -> pd.DataFrame | None:
    from ppsched.experiments.paper import PAPER_MODELS

    return _goodput_files([results / "goodput" / m / "goodput.csv" for m in PAPER_MODELS],
                          GOODPUT_COLUMNS)


def _ds_goodput(results: Path) -> pd.DataFrame | None:
    from ppsched.experiments.paper import DS_WORKLOADS

    return _goodput_files([results / "goodput" / f"ds-{w}" / "goodput.csv"
                           for w in DS_WORKLOADS], GOODPUT_COLUMNS)


def _heldout(folder: str) -> Callable[[Path], pd.DataFrame | None]:
    def build(results: Path) -> pd.DataFrame | None:
        return _goodput_files(sorted((results / folder).glob("*/goodput.csv")),
                              CONTROLLER_COLUMNS)
    return build


def _figure(stem: str) -> Callable[[Path], pd.DataFrame | None]:
    def build(results: Path) -> pd.DataFrame | None:
        path = results / "figures" / f"{stem}.csv"
        return pd.read_csv(path) if path.is_file() else None
    return build


def _alp_mape(results: Path) -> pd.DataFrame | None:
    from ppsched.experiments.report import alp_mape_frame

    path = results / "figures" / "alp_predicted_vs_measured.csv"
    return alp_mape_frame(pd.read_csv(path)) if path.is_file() else None


def _paper_run(results: Path) -> pd.DataFrame | None:
    path = results / "paper_run.json"
    if not path.is_file():
        return None
    run = json.loads(path.read_text())
    return pd.DataFrame([{"wall_min": round(float(run["wall_s"]) / 60, 1),
                          "runs_simulated": run["runs_simulated"],
                          "runs_cached": run["runs_cached"], "jobs": run["jobs"],
                          "seeds": run.get("seeds"), "verify": run.get("verify")}])


GROUPS: dict[str, tuple[PinSpec, ...]] = {
    "paper": (
        PinSpec("goodput", "Sustained goodput vs SLO scale, azure-conv, both models",
                PAPER_COMMAND, _paper_goodput),
        PinSpec("ds_goodput", "Delay scheduling's sustained goodput", PAPER_COMMAND,
                _ds_goodput),
        PinSpec("paper_run", "Wall time of make paper", PAPER_COMMAND, _paper_run),
        PinSpec("tail_latency", "P90/P99 TPOT and E2E against PP_static", PAPER_COMMAND,
                _figure("tail_latency_vs_static")),
        PinSpec("iteration_latency", "Iteration latency percentiles, azure-conv, 32B",
                PAPER_COMMAND, _figure("iteration_latency_percentiles")),
        PinSpec("alp_mape", "ALP's error against the simulator's cost model", PAPER_COMMAND,
                _alp_mape),
        PinSpec("synthetic", "Synthetic prefill-heavy and decode-heavy, PP against TP4",
                PAPER_COMMAND, _figure("synthetic")),
        PinSpec("replay_attainment", "Azure 15-minute replay at 0.9x speed: SLO attainment",
                PAPER_COMMAND, _figure("azure_replay_attainment")),
    ),
    "heldout": (PinSpec("heldout", "Chunk controllers on the other workloads", HELDOUT_COMMAND,
                        _heldout("heldout")),),
    "heldout-models": (PinSpec("heldout_models", "Chunk controllers on two further models",
                               HELDOUT_MODELS_COMMAND, _heldout("heldout-models")),),
}


def plot_path(img_dir: Path, model: str) -> Path:
    return img_dir / f"goodput_vs_slo_{model}.png"


def copy_plots(results: Path, img_dir: Path) -> list[Path]:
    """make paper's goodput-vs-SLO plots as small PNGs for the docs (a 128-colour palette keeps
    each near 60 KB instead of 200)."""
    from PIL import Image

    from ppsched.experiments.paper import PAPER_MODELS

    models = [m for m in PAPER_MODELS if (results / "goodput" / m / "goodput.csv").is_file()]
    if not models:
        raise UserError(f"no goodput under {str(results / 'goodput')!r}; expected the output "
                        f"of {PAPER_COMMAND}")
    img_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for model in models:  # the models the pinned goodput holds
        source = results / "goodput" / model / "goodput_vs_slo.png"
        if not source.is_file():
            raise UserError(f"no plot {source}; expected the output of {PAPER_COMMAND}")
        with Image.open(source) as image:
            small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
        small.save(plot_path(img_dir, model), optimize=True)
        written.append(plot_path(img_dir, model))
    return written


def pin_group(group: str, results: Path, pinned: Path, commit: str, date: str,
              note: str | None = None) -> list[Path]:
    """Write the group's pinned CSVs and sidecars from ``results`` (``note``: every sidecar's,
    else each spec's own); an error names any source that is missing (a partial pin would mix
    figures of two runs)."""
    if group not in GROUPS:
        raise UserError(f"pin group {group!r}: expected one of {', '.join(GROUPS)}")
    frames = {spec.name: spec.build(results) for spec in GROUPS[group]}
    missing = [name for name, frame in frames.items() if frame is None or frame.empty]
    if missing:
        raise UserError(f"--pin {group}: no results for {', '.join(missing)} under "
                        f"{str(results)!r}; expected the output of {GROUPS[group][0].command}")
    written = []
    for spec in GROUPS[group]:
        meta = PinnedMeta(spec.title, spec.command, commit, date, note or spec.note)
        written.append(write_pinned(pinned, spec.name, frames[spec.name], meta))
    return written
