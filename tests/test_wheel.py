"""The wheel carries its data: build it, install it into a fresh venv outside the checkout
(offline: --no-index --no-deps, the dependencies reused from this environment), and run
`ppsched run` on a built-in workload and `ppsched profile fit` on a built-in profile with no
PPSCHED_DATA_DIR and no checkout on the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import setuptools, pip"],
                   capture_output=True).returncode != 0,
    reason="needs setuptools and pip in this interpreter (offline build)")


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a clean copy: the build must not write into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "ppsched", src / "ppsched",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-q", "-w", str(dist), str(src)], cwd=tmp)
    wheel = next(dist.glob("ppsched-*.whl"))
    venv = tmp / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index",
          "--no-deps", "-q", str(wheel)], cwd=tmp)
    # Dependencies (numpy, pandas, ...) from this environment, after the venv's own packages;
    # a path line in a .pth does not run that folder's .pth files, so no editable ppsched leaks.
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                ).stdout.strip()
    Path(site, "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PPSCHED_DATA_DIR", "VIRTUAL_ENV")}
    return {"wheel": wheel, "venv": venv, "py": py, "env": env, "tmp": tmp}


def test_wheel_contains_the_data(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert "ppsched/data/traces/AzureLLMInferenceTrace_conv.csv" in names
    assert "ppsched/data/profiles/a100/Qwen-72B/mlp.csv" in names
    assert "ppsched/data/licenses/vidur-MIT.txt" in names


def test_installed_copy_is_the_one_imported(installed):
    out = _run([str(installed["py"]), "-c", "import ppsched; print(ppsched.__file__)"],
               cwd=installed["tmp"], env=installed["env"]).stdout.strip()
    assert out.startswith(str(installed["venv"])) and str(REPO) not in out


def test_wheel_and_installed_cli_carry_the_package_version(installed):
    from ppsched.version import __version__

    assert installed["wheel"].name.startswith(f"ppsched-{__version__}-")
    done = _run([str(installed["venv"] / "bin" / "ppsched"), "--version"],
                cwd=installed["tmp"], env=installed["env"])
    assert done.stdout.strip() == f"ppsched {__version__}"


def test_run_on_a_builtin_workload(installed):
    out = installed["tmp"] / "run"
    _run([str(installed["venv"] / "bin" / "ppsched"), "run", "--workload", "azure-conv",
          "--rate", "2", "--num-requests", "30", "--model", "qwen2.5-14b", "--out", str(out)],
         cwd=installed["tmp"], env=installed["env"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] == 30 and summary["completed"] == 30


def test_profile_fit_on_a_builtin_profile(installed):
    from ppsched.core.paths import PACKAGE_DATA_DIR

    csv = Path("profiles/a100/Qwen-72B/mlp.csv")
    assert (PACKAGE_DATA_DIR / csv).is_file()
    data = _run([str(installed["py"]), "-c",
                 "from ppsched.core.paths import data_dir; print(data_dir())"],
                cwd=installed["tmp"], env=installed["env"]).stdout.strip()
    assert data.startswith(str(installed["venv"]))
    done = _run([str(installed["venv"] / "bin" / "ppsched"), "profile", "fit", "--mlp-csv",
                 str(Path(data) / csv), "--model", "qwen2.5-32b", "--json"],
                cwd=installed["tmp"], env=installed["env"])
    assert json.loads(done.stdout)
