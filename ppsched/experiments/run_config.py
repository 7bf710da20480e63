"""One simulator run's settings: what `ppsched run --engine sim` records in summary.json."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig, load_model_config
from ppsched.core.policy_context import PolicyContext
from ppsched.core.slo import Slo
from ppsched.policy_config import PolicyConfig
from ppsched.sim.hardware import known_hardware

HARDWARE = known_hardware()
_PARALLEL = re.compile(r"^(pp|tp)([1-9][0-9]*)$")


def parse_parallel(text: str) -> tuple[int, int]:
    """'pp4' -> (pp_size=4, tp_size=1); 'tp4' -> (1, 4)."""
    match = _PARALLEL.match(text.strip().lower()) if isinstance(text, str) else None
    if match is None:
        raise UserError(f"--parallel {text!r}: expected ppN or tpN with N >= 1 (e.g. pp4, tp4)")
    size = int(match.group(2))
    return (size, 1) if match.group(1) == "pp" else (1, size)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One simulated run: model (built-in name or HF config.json), hardware, ``parallel``
    (ppN or tpN), chunk controller spec, delay scheduling on/off, SLO, seed and the engine's
    SGLang-like settings (KV memory fraction, running-request caps, mixed chunks, context
    length, prefix cache, admission control) and the policies' knobs (``PolicyConfig``). Every
    field is checked when built."""

    model: str = "qwen2.5-32b"
    hardware: str = "a100-40g-pcie"
    parallel: str = "pp4"
    chunk: str = "static:2048"
    ds: str = "off"
    ds_max_consecutive: int = 1
    slo: Slo = field(default_factory=Slo)
    seed: int = 0
    mem_fraction_static: float = 0.9
    max_running_requests: int | None = None  # None: SGLang's default derived from KV capacity
    pp_max_micro_batch_size: int | None = None  # None: max_running_requests // pp_size
    mixed_chunk: bool = False
    max_chunk_tokens: int = 2048
    profile_path: str | None = None
    data_dir: str | None = None
    noise: bool = True
    admission: str = "off"  # on: reject at arrival what cannot meet its TTFT SLO
    context_length: int | None = None  # SGLang --context-length; None: the model's own
    prefix_cache: bool = True  # radix cache for traces with prefix ids (SGLang: on by default)
    policy: PolicyConfig = field(default_factory=PolicyConfig)  # the knobs (--policy-config)

    def __post_init__(self) -> None:
        parse_parallel(self.parallel)
        if self.hardware not in HARDWARE:
            raise UserError(f"--hardware {self.hardware!r}: expected one of {', '.join(HARDWARE)}")
        if not isinstance(self.chunk, str) or not self.chunk:
            raise UserError(f"--chunk {self.chunk!r}: expected a spec such as static:512")
        if self.ds not in ("on", "off"):
            raise UserError(f"--ds {self.ds!r}: expected on or off")
        if not isinstance(self.ds_max_consecutive, int) or self.ds_max_consecutive < 0:
            raise UserError(f"--ds-max-consecutive {self.ds_max_consecutive!r}: expected an "
                            "integer >= 0 (consecutive decode turns a request may be held)")
        if not isinstance(self.policy, PolicyConfig):
            raise UserError(f"policy {self.policy!r}: expected a PolicyConfig")
        if not isinstance(self.slo, Slo):
            raise UserError(f"slo {self.slo!r}: expected an Slo")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"--seed {self.seed!r}: expected an integer >= 0")
        frac = self.mem_fraction_static
        if not (isinstance(frac, (int, float)) and math.isfinite(frac) and 0 < frac <= 1):
            raise UserError(f"--mem-fraction-static {frac!r}: expected a number in (0, 1]")
        for name in ("max_running_requests", "pp_max_micro_batch_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise UserError(f"--{name.replace('_', '-')} {value!r}: expected an integer >= 1")
        if self.admission not in ("on", "off"):
            raise UserError(f"--admission {self.admission!r}: expected on or off")
        if self.context_length is not None and (not isinstance(self.context_length, int)
                                                or self.context_length < 2):
            raise UserError(f"--context-length {self.context_length!r}: expected an integer "
                            ">= 2 (prompt + output tokens a request may span)")
        if not isinstance(self.max_chunk_tokens, int) or self.max_chunk_tokens < 1:
            raise UserError(f"--max-chunk-tokens {self.max_chunk_tokens!r}: expected an "
                            "integer >= 1")

    @property
    def pp_size(self) -> int:
        return parse_parallel(self.parallel)[0]

    @property
    def tp_size(self) -> int:
        return parse_parallel(self.parallel)[1]

    def model_config(self) -> ModelConfig:
        return load_model_config(self.model)

    @property
    def max_context(self) -> int:
        """Context a request may span: --context-length, else the model's configured one."""
        return self.context_length or self.model_config().max_context

    def policy_context(self) -> PolicyContext:
        return PolicyContext(pp_size=self.pp_size, slo=self.slo, model=self.model_config(),
                             hardware=self.hardware, tp_size=self.tp_size,
                             max_chunk_tokens=self.max_chunk_tokens,
                             profile_path=self.profile_path, data_dir=self.data_dir)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["slo"] = {"ttft_ms": self.slo.ttft_ms, "tpot_ms": self.slo.tpot_ms}
        out["pp_size"], out["tp_size"] = self.pp_size, self.tp_size
        return out
