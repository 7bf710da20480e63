"""`make demo` installs the runtime only: the demo's code path imports nothing beyond it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what only `make test` and the extras install (pyproject's dev, ray and profile extras)
NOT_INSTALLED = ("torch", "ray", "pytest", "hypothesis", "prometheus_client", "sglang")


def test_demo_path_runs_without_the_dev_and_extra_packages(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {NOT_INSTALLED!r}:
                    raise ModuleNotFoundError(f"blocked: {{name}}")
        sys.meta_path.insert(0, Block())
        from ppsched.cli.main import main
        sys.exit(main(["goodput", "--policies", "static-512", "--slo-scales", "1.0",
                       "--quick", "--measure-s", "30", "--warmup-s", "10", "--cooldown-s", "5",
                       "--start", "1", "--max-steps", "2", "--jobs", "1", "--no-progress",
                       "--cache", r"{tmp_path / 'cache'}", "--out", r"{tmp_path / 'out'}"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "goodput.csv").is_file()
    assert "blocked" not in done.stderr
