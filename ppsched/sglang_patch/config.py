"""Plugin configuration from ``PPSCHED_*`` environment variables or a JSON file they name.

Scheduler processes are spawned, so the environment (or a file it names) is the only channel.
Nothing set → ``None`` (the plugin stays off). Any bad value → ``UserError`` naming it; the
plugin then refuses to enable and SGLang runs stock.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ppsched.core.errors import UserError
from ppsched.core.slo import PAPER_TPOT_MS, PAPER_TTFT_MS, Slo
from ppsched.policy_config import PolicyConfig, load_policy_config

PREFIX = "PPSCHED_"
# Keys of the JSON file named by PPSCHED_CONFIG are these names, lower case, without the prefix.
KEYS = ("CHUNK", "DS", "DS_MAX_CONSECUTIVE", "SLO_TTFT_MS", "SLO_TPOT_MS", "PROFILE",
        "DECISION_LOG", "CANDIDATES", "BOUNDARY_UNIT", "BOUNDARIES", "MODEL", "HARDWARE",
        "QUEUE_VIEW", "POLICY_CONFIG")
# Setting any of these turns the plugin on; the rest only tune it.
ENABLING = ("CHUNK", "DS")


@dataclass(frozen=True, slots=True)
class PluginConfig:
    chunk: str | None = None  # controller spec; None: SGLang's own chunk size
    ds: str = "off"  # "on", "off" or "py:module:attr" (a factory (ctx, K) -> DecodeTrimmer)
    ds_max_consecutive: int = 1
    slo: Slo = Slo(PAPER_TTFT_MS, PAPER_TPOT_MS)
    profile: str | None = None
    decision_log: str | None = None
    candidates: tuple[int, ...] | None = None  # chunk sizes allowed; decisions snap down to one
    boundaries: tuple[int, ...] | None = None  # efficient decode batch sizes for DS
    model: str | None = None  # model name or HF config path; None: the server's --model-path
    hardware: str = "a100-40g-pcie"
    queue_view: int = 64  # FCFS-oldest queued requests shown to the controller
    policy: PolicyConfig = PolicyConfig()  # the policies' knobs (file: PPSCHED_POLICY_CONFIG)

    def __post_init__(self) -> None:
        if self.chunk is None and self.ds == "off":
            raise UserError("ppsched plugin: neither PPSCHED_CHUNK nor PPSCHED_DS enables anything")
        if self.ds_max_consecutive < 0:
            raise UserError(f"PPSCHED_DS_MAX_CONSECUTIVE={self.ds_max_consecutive}: expected an "
                            "int >= 0")
        if self.queue_view < 1:
            raise UserError(f"PPSCHED_QUEUE_VIEW={self.queue_view}: expected an int >= 1")

    def snap_chunk(self, tokens: int) -> int:
        """The largest candidate <= tokens (the smallest candidate if none is)."""
        if not self.candidates:
            return tokens
        fitting = [c for c in self.candidates if c <= tokens]
        return max(fitting) if fitting else self.candidates[0]

    def to_dict(self) -> dict:
        return {"chunk": self.chunk, "ds": self.ds, "ds_max_consecutive": self.ds_max_consecutive,
                "slo_ttft_ms": self.slo.ttft_ms, "slo_tpot_ms": self.slo.tpot_ms,
                "profile": self.profile, "decision_log": self.decision_log,
                "candidates": self.candidates, "boundaries": self.boundaries,
                "model": self.model, "hardware": self.hardware, "queue_view": self.queue_view,
                "policy": self.policy.to_dict()}


def _raw_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """KEY -> raw string: the file's values first, environment variables override them."""
    raw: dict[str, str] = {}
    path = environ.get(PREFIX + "CONFIG", "").strip()
    if path:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise UserError(f"PPSCHED_CONFIG={path!r}: cannot read it ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise UserError(f"PPSCHED_CONFIG={path!r}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise UserError(f"PPSCHED_CONFIG={path!r}: expected a JSON object")
        for key, value in data.items():
            name = str(key).upper()
            if name not in KEYS:
                raise UserError(f"PPSCHED_CONFIG={path!r}: unknown key {key!r}; expected one of "
                                f"{', '.join(k.lower() for k in KEYS)}")
            if isinstance(value, list):
                value = ",".join(str(v) for v in value)
            raw[name] = str(value)
    for key in KEYS:
        value = environ.get(PREFIX + key)
        if value is not None and value.strip():
            raw[key] = value.strip()
    return raw


def _int(key: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"PPSCHED_{key}={text!r}: expected an integer >= {minimum}") from None
    if value < minimum:
        raise UserError(f"PPSCHED_{key}={text!r}: expected an integer >= {minimum}")
    return value


def _ms(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"PPSCHED_{key}={text!r}: expected a finite number of ms > 0")
    return value


def _int_list(key: str, text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UserError(f"PPSCHED_{key}={text!r}: expected a comma-separated list of integers > 0")
    return tuple(sorted({_int(key, p, 1) for p in parts}))


def config_from_env(environ: Mapping[str, str] | None = None,
                    max_running: int | None = None) -> PluginConfig | None:
    """The plugin's configuration, or None when nothing enables it.

    ``max_running`` bounds boundaries made from PPSCHED_BOUNDARY_UNIT (unit, 2·unit, ...).
    """
    env = os.environ if environ is None else environ
    raw = _raw_settings(env)
    if not any(key in raw for key in ENABLING):
        if any(key in raw for key in KEYS):
            raise UserError(f"ppsched plugin: {', '.join(PREFIX + k for k in sorted(raw))} set "
                            "but neither PPSCHED_CHUNK nor PPSCHED_DS: nothing to enable")
        return None
    ds = raw.get("DS", "off")
    if ds not in ("on", "off") and not ds.startswith("py:"):
        raise UserError(f"PPSCHED_DS={ds!r}: expected on, off or py:module:factory")
    chunk = raw.get("CHUNK")
    if chunk == "sglang-dynamic":
        raise UserError("PPSCHED_CHUNK='sglang-dynamic': use SGLang's own "
                        "--enable-dynamic-chunking instead (the plugin has no start-up profile)")
    profile = raw.get("PROFILE")
    if profile is not None and not Path(profile).is_file():
        raise UserError(f"PPSCHED_PROFILE={profile!r}: no such file; expected an ALP profile "
                        "JSON from `ppsched profile fit`")
    candidates = _int_list("CANDIDATES", raw["CANDIDATES"]) if "CANDIDATES" in raw else None
    boundaries = _int_list("BOUNDARIES", raw["BOUNDARIES"]) if "BOUNDARIES" in raw else None
    if "BOUNDARY_UNIT" in raw:
        if boundaries is not None:
            raise UserError("PPSCHED_BOUNDARY_UNIT and PPSCHED_BOUNDARIES both set: expected one")
        unit = _int("BOUNDARY_UNIT", raw["BOUNDARY_UNIT"], 1)
        top = max(max_running or 256, unit)
        boundaries = tuple(range(unit, top + 1, unit))
    log = raw.get("DECISION_LOG")
    if log is not None:
        check_log_path(log)
    hardware = raw.get("HARDWARE", "a100-40g-pcie")
    _check_hardware(hardware)
    return PluginConfig(
        chunk=chunk, ds=ds,
        ds_max_consecutive=_int("DS_MAX_CONSECUTIVE", raw.get("DS_MAX_CONSECUTIVE", "1"), 0),
        slo=Slo(_ms("SLO_TTFT_MS", raw.get("SLO_TTFT_MS", str(PAPER_TTFT_MS))),
                _ms("SLO_TPOT_MS", raw.get("SLO_TPOT_MS", str(PAPER_TPOT_MS)))),
        profile=profile, decision_log=log, candidates=candidates, boundaries=boundaries,
        model=raw.get("MODEL"), hardware=hardware,
        queue_view=_int("QUEUE_VIEW", raw.get("QUEUE_VIEW", "64"), 1),
        policy=load_policy_config(raw.get("POLICY_CONFIG"), "PPSCHED_POLICY_CONFIG"))


def check_log_path(path: str) -> None:
    """The decision log must be a file this process can create or append to."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"PPSCHED_DECISION_LOG={path!r} is a folder; expected a file path "
                        "(e.g. a folder/decisions.jsonl)")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise UserError(f"PPSCHED_DECISION_LOG={path!r}: not writable by this user; "
                            "expected a writable file")
        return
    parent = target.resolve().parent
    if not parent.is_dir():
        raise UserError(f"PPSCHED_DECISION_LOG={path!r}: its folder does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"PPSCHED_DECISION_LOG={path!r}: cannot create a file in "
                        f"{str(parent)!r} (not writable by this user)")


def _check_hardware(name: str) -> None:
    from ppsched.sim.hardware import get_hardware, known_hardware

    try:
        get_hardware(name)
    except UserError:
        raise UserError(f"PPSCHED_HARDWARE={name!r}: unknown hardware; expected one of "
                        f"{', '.join(known_hardware())}") from None
