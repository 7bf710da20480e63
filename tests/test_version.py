"""One version, written once (ppsched/version.py): the package, the CLI and the build agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import ppsched
from ppsched.cli.main import main

REPO = Path(__file__).resolve().parents[1]


def test_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", ppsched.__version__)
    assert ppsched.__version__ == "0.3.0"


def test_cli_prints_the_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"ppsched {ppsched.__version__}"


def test_pyproject_reads_the_version_from_the_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]  # no second copy to drift
    assert project["project"]["dynamic"] == ["version"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "ppsched.version.__version__"
