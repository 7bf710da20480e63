"""Compile the simulator's hot modules (``ppsched.native.MODULES``) with mypyc, in place.

    .venv/bin/python scripts/build_native.py          # `make native` (only if a source changed)
    .venv/bin/python scripts/build_native.py --clean  # remove the extensions: pure Python

Needs mypy (its mypyc) and a C compiler. Extensions left by an earlier build are removed first,
so a module taken off the list runs as Python again. ``-ffp-contract=off``: the compiler must
not fuse a product and a sum into one rounding (an FMA), or results would differ from Python's.
Writes ``ppsched/native_build.json``: each compiled source's SHA-256, which ``ppsched.native``
checks at import.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PPSCHED_PURE"] = "1"  # this process reads the sources, never a stale extension

from ppsched import native  # noqa: E402


def remove_extensions() -> int:
    removed = 0
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for path in (ROOT / "ppsched").rglob(f"*{suffix}"):
            path.unlink()
            removed += 1
    native.BUILD_RECORD.unlink(missing_ok=True)
    return removed


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import Distribution

    os.environ["CFLAGS"] = (os.environ.get("CFLAGS", "") + " -ffp-contract=off").strip()
    paths = [str(native.source_path(m).relative_to(ROOT)) for m in native.MODULES]
    ext_modules = mypycify(["--ignore-missing-imports", "--follow-imports=silent", *paths],
                           opt_level="3", group_name="ppsched._native")
    dist = Distribution({"name": "ppsched-native", "ext_modules": ext_modules})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = True
    cmd.build_temp = str(ROOT / "build" / "native")
    cmd.parallel = os.cpu_count() or 1
    dist.run_command("build_ext")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the extensions only")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args()
    os.chdir(ROOT)
    if not (args.clean or args.force) and native.built_modules() == list(native.MODULES) \
            and not native.stale_sources():
        print(f"native: {len(native.MODULES)} compiled modules up to date")
        return 0
    removed = remove_extensions()
    if args.clean:
        print(f"removed {removed} extension(s): ppsched runs as pure Python")
        return 0
    build()
    native.BUILD_RECORD.write_text(json.dumps(
        {"sources": native.source_digests(), "cflags": os.environ["CFLAGS"]}, indent=1) + "\n")
    print(f"compiled {len(native.MODULES)} modules with mypyc ({native.BUILD_RECORD.name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
