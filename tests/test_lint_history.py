"""scripts/lint_history.sh: fails naming file:line on history words in tracked files, passes on
present-tense text, and ignores untracked files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "lint_history.sh"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "lint_history.sh")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    return tmp_path


def _lint(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/lint_history.sh"], cwd=repo, capture_output=True,
                          text=True)


def test_clean_tree_passes(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"README.md": "The rule picks the largest chunk within the SLO.\n"})
    result = _lint(repo)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


# Built from pieces so that this file does not trip the lint it tests.
@pytest.mark.parametrize("line", [
    "Found in Sess" + "ion 12 on 32B.",
    "as the ENGI" + "NEER said",
    "see iss" + "ue 14's target",
    "h" + "12's method",
])
def test_each_pattern_fails_with_file_and_line(tmp_path: Path, line: str) -> None:
    repo = _repo(tmp_path, {"notes.md": f"first line\n{line}\n"})
    result = _lint(repo)
    assert result.returncode == 1
    assert f"notes.md:2:{line}" in result.stderr


def test_untracked_files_are_not_linted(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"README.md": "clean\n"})
    (repo / "scratch.md").write_text("sess" + "ion 3 notes\n")
    assert _lint(repo).returncode == 0
