"""``ppsched serve [ppsched options] -- [sglang options]``: SGLang with the plugin configured.

Sets the PPSCHED_* variables the plugin reads in every scheduler process, adds the flags the
plugin needs (``--chunked-prefill-size`` = the largest candidate), refuses SGLang's own dynamic
chunking, prints the effective command, and replaces itself with ``python -m
sglang.launch_server`` (so signals reach SGLang directly).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from ppsched.core.errors import UserError
from ppsched.core.slo import PAPER_TPOT_MS, PAPER_TTFT_MS
from ppsched.sglang_patch.config import config_from_env


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve", help="start sglang.launch_server with the ppsched plugin configured",
        description="Start SGLang with the ppsched plugin. Everything after `--` goes to "
                    "sglang.launch_server unchanged.")
    parser.add_argument("--chunk", default="predictive",
                        help="chunk controller: static:N, greedy, predictive, predictive-paper "
                             "or py:module:factory")
    parser.add_argument("--ds", default="on", help="delay scheduling: on, off or py:module:factory")
    parser.add_argument("--ds-max-consecutive", type=int, default=1)
    parser.add_argument("--slo-ttft-ms", type=float, default=PAPER_TTFT_MS)
    parser.add_argument("--slo-tpot-ms", type=float, default=PAPER_TPOT_MS)
    parser.add_argument("--profile", default=None, help="ALP profile JSON (ppsched profile fit)")
    parser.add_argument("--candidates", default=None,
                        help="allowed chunk sizes, comma-separated (default: up to the launch "
                             "chunk); the largest becomes --chunked-prefill-size")
    parser.add_argument("--boundaries", default=None,
                        help="efficient decode batch sizes for DS, comma-separated")
    parser.add_argument("--boundary-unit", type=int, default=None,
                        help="DS boundaries every N requests (instead of --boundaries)")
    parser.add_argument("--model", default=None,
                        help="model for the policies (built-in name or HF config.json); default: "
                             "the server's --model-path")
    parser.add_argument("--hardware", default="a100-40g-pcie")
    parser.add_argument("--decision-log", default=None, help="JSONL decision log path")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with sglang installed (default: this one)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the command and environment, start nothing")
    parser.add_argument("sglang_args", nargs=argparse.REMAINDER,
                        help="-- then sglang.launch_server options")
    parser.set_defaults(handler=serve_command)


def plugin_env(args: argparse.Namespace) -> dict[str, str]:
    env = {"PPSCHED_CHUNK": args.chunk, "PPSCHED_DS": args.ds,
           "PPSCHED_DS_MAX_CONSECUTIVE": str(args.ds_max_consecutive),
           "PPSCHED_SLO_TTFT_MS": repr(args.slo_ttft_ms),
           "PPSCHED_SLO_TPOT_MS": repr(args.slo_tpot_ms), "PPSCHED_HARDWARE": args.hardware}
    optional = {"PPSCHED_PROFILE": args.profile, "PPSCHED_CANDIDATES": args.candidates,
                "PPSCHED_BOUNDARIES": args.boundaries, "PPSCHED_MODEL": args.model,
                "PPSCHED_DECISION_LOG": args.decision_log,
                "PPSCHED_BOUNDARY_UNIT": None if args.boundary_unit is None
                else str(args.boundary_unit)}
    env.update({k: v for k, v in optional.items() if v is not None})
    return env


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def sglang_command(args: argparse.Namespace, cfg) -> list[str]:
    rest = list(args.sglang_args)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if _flag_value(rest, "--model-path") is None and _flag_value(rest, "--model") is None:
        raise UserError("no --model-path after `--`: expected `ppsched serve ... -- "
                        "--model-path MODEL [sglang options]`")
    if "--enable-dynamic-chunking" in rest:
        raise UserError("--enable-dynamic-chunking: SGLang's own dynamic chunking conflicts with "
                        "the plugin's chunk controller; drop it")
    if "--enable-mixed-chunk" in rest and cfg.ds != "off":
        print("ppsched: note: --enable-mixed-chunk decodes inside prefill batches, which delay "
              "scheduling does not trim", file=sys.stderr)
    given = _flag_value(rest, "--chunked-prefill-size")
    if cfg.candidates:
        want = max(cfg.candidates)
        if given is not None and given != str(want):
            raise UserError(f"--chunked-prefill-size {given} after `--` but the largest "
                            f"candidate is {want}: expected them equal (or leave it out)")
        if given is None:
            rest += ["--chunked-prefill-size", str(want)]
    elif given is not None:
        try:
            ok = int(given) > 0
        except ValueError:
            ok = False
        if not ok:
            raise UserError(f"--chunked-prefill-size {given!r}: the plugin needs chunked "
                            "prefill, expected a positive int")
    return [args.python, "-m", "sglang.launch_server", *rest]


def serve_command(args: argparse.Namespace) -> int:
    env_add = plugin_env(args)
    cfg = config_from_env(env_add)  # the same validation the plugin does, before launching
    if cfg is None:
        raise UserError("--chunk and --ds configure nothing: expected at least one of them on")
    cmd = sglang_command(args, cfg)
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env_add.items()))
    print(f"ppsched: {shown} {shlex.join(cmd)}", flush=True)
    if args.dry_run:
        return 0
    env = {**os.environ, **env_add}
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        raise UserError(f"--python {args.python!r}: cannot start it ({exc.strerror})") from None
    return 0  # unreachable: exec replaced this process
