"""Every command in the README's ```bash blocks runs as written, scaled down.

How a command is scaled (the one mechanism, applied to the parsed argv): options named in
``VALUE_OVERRIDES`` get a smaller value where the command gives them, ``DROPPED_FLAGS`` are
removed, and the subcommands in ``EXTRA_OPTIONS`` get options that shorten a search (argparse
takes the last value given). Everything else (workloads, models, policies' kinds, paths, flags)
is the README's. Commands run from a scratch folder that links the repository's ``ppsched``,
``bench`` and ``scripts``, so relative paths in the README resolve and outputs stay out of the
checkout.

Skipped, each with its reason: ``make demo`` / ``make test`` (the commands this suite runs
under), commands that need a GPU, a live SGLang server (the CPU recipe has its own live test) or
a Ray cluster (tests/test_executor_ray.py), or SGLang servers behind the router
(tests/test_live_router.py). A command none of these rules knows fails
``test_every_readme_command_is_run_or_skipped_with_a_reason``, so a new README command gets a
test or a stated reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

VALUE_OVERRIDES = {
    "--num-requests": "40",
    "--window-min": "1",
    "--seeds": "1",
    "--rates": "2",
    "--policies": "static-512",
}
DROPPED_FLAGS = ("--verify",)
SEARCH_OPTIONS = ("--slo-scales", "1.0", "--measure-s", "30", "--warmup-s", "10",
                  "--cooldown-s", "5", "--max-steps", "2")
EXTRA_OPTIONS = {
    "goodput": (*SEARCH_OPTIONS, "--jobs", "1", "--no-progress"),
    "sweep": ("--measure-s", "30", "--warmup-s", "10", "--cooldown-s", "5", "--jobs", "1",
              "--no-progress"),
    "plan": ("--rate", "8", "--configs", "static-512", "--routers", "round_robin",
             "--measure-s", "30", "--warmup-s", "10", "--cooldown-s", "5", "--jobs", "1",
             "--no-progress"),
}

SKIP_RULES: tuple[tuple[str, str], ...] = (
    (r"^make (demo|test)\b", "make demo / make test: the commands this suite runs under"),
    (r"--device cuda|Qwen/Qwen2\.5-32B", "needs a GPU"),
    (r"--engine http://|sglang\.bench_serving|setup_sglang_cpu\.sh|^PY=|^\$PY |ppsched serve",
     "needs a live SGLang server (the CPU recipe runs in the live tests)"),
    (r"\bray start\b|--executor ray", "needs a Ray cluster (tests/test_executor_ray.py)"),
    (r"sglang-router|sglang_router",
     "needs SGLang servers behind the router (tests/test_live_router.py)"),
)


def readme_commands(text: str) -> list[str]:
    """Each logical command of every ```bash block: continuation lines joined, comment-only
    lines dropped, trailing comments kept for shlex to drop."""
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        logical = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            logical += line
            stripped = logical.strip()
            if stripped and not stripped.startswith("#"):
                commands.append(" ".join(stripped.split()))
            logical = ""
    return commands


def skip_reason(command: str) -> str | None:
    for pattern, reason in SKIP_RULES:
        if re.search(pattern, command):
            return reason
    return None


def scaled_argv(command: str) -> list[str]:
    """The README's ppsched command as an argv for ``python -m ppsched.cli.main``, scaled."""
    words = shlex.split(command, comments=True)
    assert words[0] == "ppsched", f"not a ppsched command: {command!r}"
    args: list[str] = []
    i = 1
    while i < len(words):
        word = words[i]
        if word in DROPPED_FLAGS:
            i += 1
            continue
        args.append(word)
        if word in VALUE_OVERRIDES and i + 1 < len(words):
            args.append(VALUE_OVERRIDES[word])
            i += 2
            continue
        i += 1
    return [*args, *EXTRA_OPTIONS.get(args[0], ())]


COMMANDS = readme_commands(README.read_text())
RUNNABLE = [c for c in COMMANDS if skip_reason(c) is None]


def test_the_readme_has_commands_of_each_kind() -> None:
    assert any(c.startswith("ppsched run --engine sim") for c in RUNNABLE)
    assert any(c.startswith("ppsched goodput") for c in RUNNABLE)
    assert any("--context-length 1024" in c for c in COMMANDS), "the CPU recipe's serve"
    assert ("ppsched run --engine http://127.0.0.1:30000 --workload sharegpt --rate 2 "
            "--num-requests 40 --out /tmp/live") in COMMANDS


def test_every_readme_command_is_run_or_skipped_with_a_reason() -> None:
    unknown = [c for c in RUNNABLE if not c.startswith("ppsched ")]
    assert unknown == [], f"README commands with neither a test nor a skip reason: {unknown}"


def test_scaling_overrides_values_and_keeps_the_rest() -> None:
    argv = scaled_argv("ppsched goodput --workload azure-conv --seeds 3 --verify --out d  # x")
    assert argv[:6] == ["goodput", "--workload", "azure-conv", "--seeds", "1", "--out"]
    assert "--verify" not in argv and "# x" not in argv
    assert argv[6:] == ["d", *EXTRA_OPTIONS["goodput"]]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    for name in ("ppsched", "bench", "scripts"):
        (folder / name).symlink_to(ROOT / name)
    return folder


def _out_dir(argv: list[str], scratch: Path) -> Path | None:
    return scratch / argv[argv.index("--out") + 1] if "--out" in argv else None


@pytest.mark.parametrize("command", RUNNABLE, ids=lambda c: " ".join(c.split()[:4])[:60])
def test_readme_command_runs(command: str, scratch: Path) -> None:
    argv = scaled_argv(command)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "ppsched.cli.main", *argv], cwd=scratch,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{argv}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    out = _out_dir(argv, scratch)
    if argv[0] == "run":
        summary = json.loads((out / "summary.json").read_text())
        assert (out / "requests.csv").is_file() and (out / "decisions.jsonl").is_file()
        assert summary["requests"] > 0 and summary["unfinished"] == 0
        assert summary["completed"] + summary["rejected"] == summary["requests"]
    elif argv[0] == "goodput":
        assert (out / "goodput.csv").read_text().count("\n") >= 2
    elif argv[0] == "sweep":
        assert (out / "sweep.csv").read_text().count("\n") >= 2
    elif argv[0] == "profile" and argv[1] == "scale":
        assert (scratch / argv[argv.index("--out") + 1]).is_file()
    else:
        assert result.stdout.strip(), f"{argv} printed nothing"


@pytest.mark.parametrize("command", [c for c in COMMANDS if skip_reason(c) is not None],
                         ids=lambda c: " ".join(c.split()[:3])[:60])
def test_readme_command_needing_what_ci_lacks(command: str) -> None:
    pytest.skip(skip_reason(command))
