"""Entry point: discovers ``ppsched.cli.cmd_*`` modules; user errors exit 2 with one line."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import ppsched.cli as cli_pkg
from ppsched.core.errors import UserError
from ppsched.version import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        # One line, exit 2, like every other user error (argparse would print the whole usage).
        self.exit(2, f"ppsched: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ppsched", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ppsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"ppsched.cli.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except UserError as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
