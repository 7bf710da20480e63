"""Find a Python that can run the plugin: it imports sglang and has ppsched's entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ppsched.core.errors import UserError

# Cheap: metadata only, sglang itself is not imported (that costs seconds).
_PROBE = ("import importlib.util as u, importlib.metadata as m, sys; "
          "ok = u.find_spec('sglang') is not None and u.find_spec('ppsched') is not None; "
          "sys.exit(0 if ok else 3)")


def has_sglang(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, timeout=60, cwd="/")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_sglang_python(explicit: str | None) -> str:
    """``--python`` if given (it must work), else $PPSCHED_SGLANG_PYTHON, this interpreter, or
    the CPU venv of scripts/setup_sglang_cpu.sh, the first that has sglang and ppsched."""
    if explicit:
        if not Path(explicit).exists():
            raise UserError(f"--python {explicit!r}: cannot start it (no such file); expected "
                            "an interpreter with sglang and ppsched installed")
        if not has_sglang(explicit):
            raise UserError(f"--python {explicit!r}: cannot import sglang and ppsched there; "
                            "expected an interpreter with `pip install 'ppsched[sglang]'`")
        return explicit
    from ppsched.sglang_patch.cpu_server import sglang_python

    tried = []
    for candidate in (os.environ.get("PPSCHED_SGLANG_PYTHON"), sys.executable,
                      str(sglang_python() or "")):
        if candidate and candidate not in tried:
            tried.append(candidate)
            if has_sglang(candidate):
                return candidate
    raise UserError(f"no interpreter with sglang and ppsched found (tried {', '.join(tried)}): "
                    "pass --python /path/to/venv/bin/python of an `pip install "
                    "'ppsched[sglang]'` install")
