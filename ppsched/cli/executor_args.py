"""The ``--executor`` / ``--ray-address`` flags shared by the experiment commands."""

from __future__ import annotations

import argparse

from ppsched.experiments.executors import EXECUTOR_KINDS, ExecutorChoice


def add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="local",
                   help=f"where runs execute: {' or '.join(EXECUTOR_KINDS)} (Ray needs "
                        "pip install 'ppsched[ray]'; results and cache are the same either way)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="with --executor ray: 'auto' joins the running cluster, HOST:PORT a "
                        "given one; left out, a local Ray with --jobs CPUs is started")


def executor_choice(args: argparse.Namespace) -> ExecutorChoice:
    """The executor the flags ask for; a bad value is a UserError naming it."""
    return ExecutorChoice(args.executor, args.ray_address)
