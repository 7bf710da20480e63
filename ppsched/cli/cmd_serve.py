"""``ppsched serve [ppsched options] -- [sglang options]``: SGLang with the plugin configured.

Validates every plugin setting by building the policies as the schedulers will (exit 2 with one
line on any problem, before anything starts), finds an interpreter with SGLang, sets the
PPSCHED_* variables the plugin reads in every scheduler process, adds the flags the plugin needs
(``--chunked-prefill-size`` = the largest candidate), refuses SGLang's own dynamic chunking,
prints the effective command, and replaces itself with ``python -m sglang.launch_server`` (so
signals reach SGLang directly).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ppsched.core.errors import UserError
from ppsched.core.slo import PAPER_TPOT_MS, PAPER_TTFT_MS
from ppsched.sglang_patch.config import config_from_env
from ppsched.sglang_patch.interpreter import find_sglang_python
from ppsched.sglang_patch.preflight import ServerFacts, build_checked

# SGLang's --chunked-prefill-size when none is given depends on the GPU; this is what the plugin
# is checked against before launch then (the real value is checked again at start-up).
SGLANG_DEFAULT_CHUNK = 8192


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
    parser.add_argument("--policy-config", default=None, metavar="FILE",
                        help="JSON of policy knobs over the defaults (`ppsched policy-config` "
                             "prints them); the decision log's start and enabled records say "
                             "which ran")
    parser.add_argument("--python", default=None,
                        help="interpreter with sglang and ppsched installed (default: "
                             "$PPSCHED_SGLANG_PYTHON, else this one if it has sglang, else the "
                             "CPU venv of scripts/setup_sglang_cpu.sh)")
    parser.add_argument("--force", action="store_true",
                        help="hook SGLang even if its version or hooked functions differ from "
                             "the ones the plugin was written for (PPSCHED_FORCE=1)")
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
                "PPSCHED_POLICY_CONFIG": None if args.policy_config is None
                else str(Path(args.policy_config).expanduser().resolve()),
                "PPSCHED_BOUNDARY_UNIT": None if args.boundary_unit is None
                else str(args.boundary_unit)}
    env.update({k: v for k, v in optional.items() if v is not None})
    if args.force:
        env["PPSCHED_FORCE"] = "1"
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
    return ["python", "-m", "sglang.launch_server", *rest]


def _int_flag(rest: list[str], flag: str, default: int) -> int:
    raw = _flag_value(rest, flag)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"{flag} {raw!r} after `--`: expected an integer") from None


def server_facts(rest: list[str], cfg) -> ServerFacts:
    """The facts the plugin will see inside SGLang, read from the launch flags."""
    if rest and rest[0] == "--":
        rest = rest[1:]
    chunk = _int_flag(rest, "--chunked-prefill-size",
                      max(cfg.candidates) if cfg.candidates else SGLANG_DEFAULT_CHUNK)
    context = _flag_value(rest, "--context-length")
    return ServerFacts(
        model_path=_flag_value(rest, "--model-path") or _flag_value(rest, "--model"),
        context_length=_int_flag(rest, "--context-length", 0) if context else None,
        pp_size=_int_flag(rest, "--pp-size", _int_flag(rest, "--pipeline-parallel-size", 1)),
        tp_size=_int_flag(rest, "--tp-size", _int_flag(rest, "--tensor-parallel-size", 1)),
        launch_chunk=chunk, dynamic_chunking="--enable-dynamic-chunking" in rest)


def serve_command(args: argparse.Namespace) -> int:
    env_add = plugin_env(args)
    cfg = config_from_env(env_add)  # the same validation the plugin does, before launching
    if cfg is None:
        raise UserError("--chunk and --ds configure nothing: expected at least one of them on")
    cmd = sglang_command(args, cfg)
    # Build the policies exactly as every scheduler will: a bad name, model, profile or DS at
    # --pp-size 1 fails here, before SGLang starts, instead of leaving a stock server behind.
    build_checked(cfg, server_facts(args.sglang_args, cfg))
    try:
        python = find_sglang_python(args.python)
    except UserError as exc:
        if not args.dry_run:
            raise
        python = args.python or sys.executable  # a dry run only shows the command
        print(f"ppsched: note: {exc}", file=sys.stderr)
    cmd[0] = python
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env_add.items()))
    print(f"ppsched: {shown} {shlex.join(cmd)}", flush=True)
    if args.dry_run:
        return 0
    env = {**os.environ, **env_add}
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        raise UserError(f"--python {python!r}: cannot start it ({exc.strerror})") from None
    return 0  # unreachable: exec replaced this process
