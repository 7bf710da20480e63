"""``ppsched gpu-check``: check the plugin on this machine's GPUs (docs/SGLANG_PLUGIN.md)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ppsched.core.errors import UserError

DESCRIPTION = """\
Check, on a CUDA machine, what the SGLang plugin claims about GPUs; write DIR/report.md and
DIR/report.json (plus the model, mlp.csv, profile.json, decisions.jsonl and server.log it used).

  model          a random-weight Qwen2.5-0.5B-shaped model made here (no download)
  profile        `profile collect` of that model's linear ops on this GPU, fitted for one PP
                 stage; boundary detection on it (the profile is then served with)
  event-vs-sync  the plugin's CUDA-event stage timer (read by polling, never blocking) against a
                 synchronized measurement of the same stage forward: <= 5% apart
  serve          SGLang with the plugin at --pp-size = number of GPUs (1 allowed; DS needs 2),
                 predictive chunking (+ DS), a short replay; every stage record must be timed
                 by cuda-event, DS's boundaries must include the decode graph cap, and ALP's
                 MAPE on the real iterations is reported (target <= 15%)

Needs torch with CUDA here and, for model/serve, a Python with SGLang 0.5.23, transformers and
ppsched installed (--python, default $PPSCHED_SGLANG_PYTHON or this Python). Exit 0 when every
check passed, 1 otherwise; without CUDA it says so in one line and exits 1.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("gpu-check", help="check the plugin on this machine's GPUs "
                              "(timing, graphs, profile, a short live run)",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the report and its artefacts")
    p.add_argument("--python", default=None,
                   help="python of the GPU SGLang install (default: $PPSCHED_SGLANG_PYTHON, "
                   "else this one)")
    p.add_argument("--requests", type=int, default=48, help="requests in the short replay")
    p.add_argument("--repeats", type=int, default=10,
                   help="timed forwards per size in event-vs-sync")
    p.add_argument("--no-serve", action="store_true", help="skip the SGLang run")
    p.set_defaults(handler=cmd_gpu_check)


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from ppsched.gpucheck.probe import probe_cuda

    for name in ("requests", "repeats"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name} {getattr(args, name)}: expected an integer >= 1")
    info, why_not = probe_cuda()
    if info is None:
        print(f"ppsched gpu-check: no CUDA device ({why_not}); nothing was checked",
              file=sys.stderr)
        return 1
    import torch

    from ppsched.gpucheck.run import KitOptions, run_kit

    python = Path(args.python or os.environ.get("PPSCHED_SGLANG_PYTHON") or sys.executable)
    if not python.is_file():
        raise UserError(f"--python {str(python)!r}: no such file; expected the GPU SGLang "
                        "install's python")
    opts = KitOptions(out=Path(args.out), python=python, requests=args.requests,
                      repeats=args.repeats, serve=not args.no_serve)
    command = "ppsched " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "ppsched gpu-check"
    report = run_kit(torch, info, opts, command)
    js, md = report.write(opts.out)
    for r in report.results:
        print(f"{r.status:4}  {r.name}: {r.summary}")
    print(f"{'PASS' if report.passed else 'FAIL'}: wrote {md} and {js}")
    return 0 if report.passed else 1
