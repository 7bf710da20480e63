"""BENCHMARKS.md and the README's results block, written from results/pinned/ only.

Every figure in them is computed here from a pinned CSV and printed with the command, commit
and date of its sidecar (pinned.PinnedMeta); nothing is typed by hand. `ppsched report
--benchmarks` writes both files; tests/test_generated_docs.py fails when the committed files
differ from what this module writes from the committed pinned data.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pandas as pd

from ppsched.core.errors import UserError
from ppsched.experiments import paper_refs as ref
from ppsched.experiments.controller_table import (
    ROLES,
    TARGET_SCALES,
    TARGET_SHARE,
    count_met,
    group_lines,
    rows_from_frame,
)
from ppsched.experiments.pin_results import GROUPS, plot_path
from ppsched.experiments.pinned import PINNED_DIR, PinnedTable, read_pinned
from ppsched.experiments.report import (
    CONTROLLERS,
    METHOD,
    ds_section,
    goodput_section,
    iteration_section,
    replay_section,
    synthetic_section,
    tail_section,
)

BEGIN = "<!-- BEGIN GENERATED: results -->"
END = "<!-- END GENERATED: results -->"
REGENERATE = "ppsched report --benchmarks"
IMG_DIR = Path("docs") / "img"
# The pinned CSVs the fixed sections read (everything `ppsched report --pin` writes); any other
# pinned CSV is rendered generically after them.
CONTROLLER_SOURCES = ("goodput", "heldout", "heldout_models")
FIXED = tuple(spec.name for specs in GROUPS.values() for spec in specs)
FIGURE_MODEL = "qwen2.5-32b"  # make paper's fixed-load figures run on it (paper.run_paper)
HEADLINE_SCALE = 1.0


def source_line(table: PinnedTable) -> str:
    meta = table.meta
    text = (f"*Measured by `{meta.command}` at commit {meta.commit} ({meta.date}); data: "
            f"`{(PINNED_DIR / table.name).as_posix()}.csv`.*")
    return text + (f" {meta.note}" if meta.note else "")


def _need(tables: dict[str, PinnedTable], name: str) -> PinnedTable:
    if name not in tables:
        raise UserError(f"results/pinned/{name}.csv is missing; the generated docs read it "
                        "(`ppsched report --pin` writes it from full results)")
    return tables[name]


def _point(table: pd.DataFrame, model: str, policy: str, scale: float) -> pd.Series | None:
    rows = table[(table.model == model) & (table.policy == policy) & (table.slo_scale == scale)]
    return rows.iloc[0] if len(rows) else None


def _failed(row: pd.Series | None) -> bool:
    return row is not None and str(row.get("verify")) == "FAIL"


def ratio(table: pd.DataFrame, model: str, a: str, b: str, scale: float) -> float:
    """Goodput a / b; NaN where either is missing, failed verification or b is 0."""
    num, den = _point(table, model, a, scale), _point(table, model, b, scale)
    if num is None or den is None or _failed(num) or _failed(den):
        return math.nan
    return float(num.goodput_rps) / float(den.goodput_rps) if den.goodput_rps > 0 else math.nan


def _x(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2f}×"


def headline_lines(goodput: PinnedTable) -> list[str]:
    """Every policy's sustained goodput at SLO 1.0 per model, best first on the first model."""
    table = goodput.frame
    models = list(dict.fromkeys(table["model"]))
    at = table[table.slo_scale == HEADLINE_SCALE]
    # Best first; ties keep the CSV's order (predictive before predictive-ds).
    order = at[at.model == models[0]].sort_values("goodput_rps", ascending=False,
                                                   kind="stable")["policy"]
    lines = ["| policy | " + " | ".join(f"{m} PP4" for m in models) + " |",
             "|---|" + "---|" * len(models)]
    for policy in dict.fromkeys(order):
        cells = []
        for model in models:
            row = _point(table, model, policy, HEADLINE_SCALE)
            if row is None:
                cells.append("—")
                continue
            cell = f"{row.goodput_rps:.2f}"
            if float(row.goodput_max) > float(row.goodput_rps):
                cell += f" [{row.goodput_max:.2f}]"
            if policy == "oracle-static" and isinstance(row.chosen, str):
                cell += f" ({row.chosen})"
            if _failed(row):
                cell += " ✗"
            cells.append(cell)
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    windows = sorted(set(table["measure_s"]))
    window = f"{windows[0]:g} s window" if len(windows) == 1 else "window"
    ratios = []
    for model in models:
        paper = ref.GOODPUT_RATIO_VS_2048.get(model, {}).get(HEADLINE_SCALE)
        ratios.append(f"{_x(ratio(table, model, 'predictive', 'static-2048', HEADLINE_SCALE))} on"
                      f" {model}" + (f" (paper {paper:g}×)" if paper else ""))
    seeds = int(table["seeds"].max())
    lines += ["", f"Sustained goodput in req/s on the simulator (4×A100 40 GB PCIe cost model), "
              f"azure-conv, SLO scale {HEADLINE_SCALE:g} (TTFT 2 s, TPOT 200 ms): the lowest "
              f"of {seeds} seeds [highest seed], each point re-run at 4× the "
              f"{window} on unused seeds. predictive / static-2048: "
              + ", ".join(ratios) + "."]
    return lines


def controller_rows(tables: dict[str, PinnedTable]) -> dict:
    frames = [tables[n].frame for n in CONTROLLER_SOURCES if n in tables]
    return rows_from_frame(pd.concat(frames, ignore_index=True), TARGET_SCALES)


def controller_summary(tables: dict[str, PinnedTable]) -> str:
    met, counted = count_met(controller_rows(tables))
    groups = {(m, w) for m, w, _ in controller_rows(tables)}
    return (f"Against the best fixed chunk in hindsight (oracle-static, per cell), predictive "
            f"reaches ≥ {TARGET_SHARE:g}× its goodput and at least greedy's and "
            f"predictive-paper's in **{met} of {counted}** cells with a non-zero goodput "
            f"({len(groups)} model/workload groups × {len(TARGET_SCALES)} SLO scales).")


def _wrap(line: str) -> str:
    """Prose at the README's width; table rows, images and comments as they are."""
    if line.startswith(("|", "!", "<")):
        return line
    return textwrap.fill(line, width=100, break_long_words=False, break_on_hyphens=False)


def readme_block(tables: dict[str, PinnedTable]) -> str:
    goodput = _need(tables, "goodput")
    plot = plot_path(IMG_DIR, str(goodput.frame["model"].iloc[0])).as_posix()
    others = [tables[n].meta.commit for n in CONTROLLER_SOURCES[1:] if n in tables]
    lines = [BEGIN, f"<!-- written by `{REGENERATE}` from results/pinned/; edit those, not "
             "this block -->", ""]
    lines += headline_lines(goodput)
    lines += ["", controller_summary(tables), "", f"![goodput vs SLO scale]({plot})", "",
              f"Measured by `{goodput.meta.command}` at commit {goodput.meta.commit} "
              f"({goodput.meta.date})"
              + (f"; the cells of the other workloads and models at {', '.join(others)} (their "
                 "commands in BENCHMARKS.md)" if others else "")
              + ". Every figure with its command and commit: [BENCHMARKS.md](BENCHMARKS.md).",
              END]
    return "\n".join(_wrap(line) for line in lines)


def replace_block(text: str, block: str, where: str = "README.md") -> str:
    """``text`` with the part from BEGIN to END (markers included) replaced by ``block``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise UserError(f"{where}: expected one {BEGIN!r} line followed by one {END!r} line "
                        "around the results table")
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block + text[stop:]


def _generic_section(table: PinnedTable) -> list[str]:
    frame = table.frame
    lines = [f"### {table.meta.title}", "", "| " + " | ".join(map(str, frame.columns)) + " |",
             "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        cells = [_value(v) for v in row]
        # A command column reads as code, the rest as figures.
        cells = [f"`{c}`" if name == "command" and c else c
                 for name, c in zip(frame.columns, cells, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + ["", source_line(table), ""]


def _value(value: object) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def _goodput_sections(goodput: PinnedTable) -> list[str]:
    lines = ["## Goodput vs SLO scale", "", METHOD, "", CONTROLLERS, ""]
    for model, table in goodput.frame.groupby("model", sort=False):
        lines += goodput_section(str(model), table.reset_index(drop=True), None, lowered=False)
        lines += [f"![goodput vs SLO, {model}]({plot_path(IMG_DIR, str(model)).as_posix()})",
                  ""]
    return lines + [source_line(goodput), ""]


def _controller_section(tables: dict[str, PinnedTable]) -> list[str]:
    lines = ["## Chunk controller against the best fixed chunk, every workload", "",
             controller_summary(tables), "",
             f"Each cell: predictive / oracle-static, and whether the target (≥ "
             f"{TARGET_SHARE:g}× oracle-static, ≥ greedy, ≥ predictive-paper) is met. " + ROLES,
             ""]
    lines += group_lines(controller_rows(tables))
    lines.append("")
    lines += [source_line(tables[n]) for n in CONTROLLER_SOURCES if n in tables]
    return lines + [""]


def _figure_sections(tables: dict[str, PinnedTable]) -> list[str]:
    lines = [f"## Fixed-load figures ({FIGURE_MODEL})", ""]
    if "tail_latency" in tables:
        lines += tail_section(tables["tail_latency"].frame, links=False)
        lines += [source_line(tables["tail_latency"]), ""]
    if "iteration_latency" in tables:
        alp = tables.get("alp_mape")
        lines += iteration_section(tables["iteration_latency"].frame,
                                   alp.frame if alp else None, links=False)
        lines += [source_line(t) for n in ("iteration_latency", "alp_mape")
                  if (t := tables.get(n))] + [""]
    if "synthetic" in tables:
        lines += synthetic_section(tables["synthetic"].frame, links=False)
        lines += [source_line(tables["synthetic"]), ""]
    if "replay_attainment" in tables:
        good = tables["goodput"].frame
        lines += replay_section(tables["replay_attainment"].frame,
                                good[good.model == FIGURE_MODEL], links=False)
        lines += [source_line(tables["replay_attainment"]), ""]
    return lines


def _ds_sections(ds: PinnedTable) -> list[str]:
    lines = []
    for workload, table in ds.frame.groupby("workload", sort=False):
        lines += ds_section(table.reset_index(drop=True), None, str(workload))
    return lines + [source_line(ds), ""]


def _paper_run_line(run: PinnedTable) -> list[str]:
    row = run.frame.iloc[0]
    return [f"`{run.meta.command}` takes {row.wall_min:g} min wall with "
            f"{int(row.jobs)} worker processes ({int(row.runs_simulated)} runs simulated, "
            f"{int(row.runs_cached)} from the cache).", "",
            source_line(run), ""]


def benchmarks_text(tables: dict[str, PinnedTable]) -> str:
    goodput = _need(tables, "goodput")
    lines = ["# Benchmarks", "",
             f"<!-- written by `{REGENERATE}` from results/pinned/; edit those, not this file -->",
             "",
             "Every figure here is computed from a pinned CSV under `results/pinned/` and names "
             "the command that measured it and the commit and date it was measured at. Engine: "
             "the built-in simulator (4×A100 40 GB PCIe cost model) unless a section says "
             "otherwise. Methods and known shortfalls: `bench/*.md` and `docs/GOODPUT.md`.", "",
             "To refresh: `make paper` re-measures and re-pins its figures and rewrites this "
             "file; after `bash bench/run_heldout.sh` (every group), `ppsched report --pin "
             "heldout` (or `--pin heldout-models` for `OUT_ROOT=results/heldout-models`), then "
             f"`{REGENERATE}`.", "",
             "## Headline: sustained goodput, azure-conv", ""]
    lines += headline_lines(goodput) + ["", source_line(goodput), ""]
    if "paper_run" in tables:
        lines += _paper_run_line(tables["paper_run"])
    lines += _goodput_sections(goodput)
    lines += _controller_section(tables)
    if "ds_goodput" in tables:
        lines += ["## Delay scheduling", ""] + _ds_sections(tables["ds_goodput"])
    lines += _figure_sections(tables)
    others = [t for name, t in tables.items() if name not in FIXED]
    if others:
        lines += ["## Other pinned results", ""]
        for table in others:
            lines += _generic_section(table)
    return "\n".join(lines).rstrip("\n") + "\n"


def generated(root: Path) -> dict[Path, str]:
    """{path relative to root: the text the command writes} for BENCHMARKS.md and README.md."""
    tables = read_pinned(root / PINNED_DIR)
    readme = root / "README.md"
    if not readme.is_file():
        raise UserError(f"{readme} not found; expected the repository root as --root")
    return {Path("BENCHMARKS.md"): benchmarks_text(tables),
            Path("README.md"): replace_block(readme.read_text(), readme_block(tables))}


def write_docs(root: Path, check: bool = False) -> list[Path]:
    """Write (or with ``check``, only compare) the generated files; returns those that differ."""
    stale = []
    for rel, text in generated(root).items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            stale.append(rel)
            if not check:
                path.write_text(text)
    return stale
