"""Every knob of ppsched's policies in one object, ``PolicyConfig``, with one section per policy:
``predictive`` (``dcp.rule_base.PredictiveConfig``), ``greedy`` (``dcp.greedy.GreedyConfig``),
``ds`` (``delay_sched.trimmer.DsConfig``) and ``admission``
(``admission.controller.AdmissionConfig``); each field's comment there says what it means.

Read from a JSON file (``--policy-config`` of ``run``, ``goodput``, ``sweep``, ``serve``; the
plugin's ``PPSCHED_POLICY_CONFIG``) and written into every output a policy shaped: a run's
summary.json, goodput's config.json, the plugin decision log's ``start`` and ``enabled`` records.
A file gives any subset of sections and knobs; the rest keep their defaults. An unknown section
or knob, or a value of the wrong type or range, stops the run before anything starts, naming it.
What a run is (SLO, chunk spec, DS on/off and its starvation bound K) are the run's own flags.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ppsched.admission.controller import AdmissionConfig
from ppsched.core.errors import UserError
from ppsched.dcp.knobs import GreedyConfig, PredictiveConfig
from ppsched.delay_sched.trimmer import DsConfig

SECTIONS: dict[str, type] = {"predictive": PredictiveConfig, "greedy": GreedyConfig,
                             "ds": DsConfig, "admission": AdmissionConfig}


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    predictive: PredictiveConfig = field(default_factory=PredictiveConfig)
    greedy: GreedyConfig = field(default_factory=GreedyConfig)
    ds: DsConfig = field(default_factory=DsConfig)
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: asdict(getattr(self, name)) for name in SECTIONS}

    @classmethod
    def from_dict(cls, data: object, source: str = "policy config") -> PolicyConfig:
        """Sections and knobs from ``data`` over the defaults; ``source`` prefixes each error."""
        if not isinstance(data, dict):
            raise UserError(f"{source}: expected a JSON object with sections "
                            f"{', '.join(SECTIONS)}; got {type(data).__name__}")
        built: dict[str, Any] = {}
        for name, given in data.items():
            if name not in SECTIONS:
                raise UserError(f"{source}: unknown section {name!r}; expected one of "
                                f"{', '.join(SECTIONS)}")
            built[name] = _section(SECTIONS[name], name, given, source)
        return cls(**built)


def _section(kind: type, name: str, given: object, source: str) -> Any:
    if not isinstance(given, dict):
        raise UserError(f"{source}: section {name!r}: expected a JSON object of knobs; got "
                        f"{given!r}")
    knobs = {f.name: f for f in fields(kind)}
    values: dict[str, Any] = {}
    for key, value in given.items():
        if key not in knobs:
            raise UserError(f"{source}: unknown knob {name}.{key}; expected one of "
                            f"{', '.join(knobs)}")
        values[key] = _typed(value, knobs[key].default, f"{source}: {name}.{key}",
                             "None" in str(knobs[key].type))
    try:
        return kind(**values)
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None


def _typed(value: object, default: object, where: str, optional: bool) -> object:
    """``value`` if it has the type of the knob's default (an int is a float), else an error."""
    if value is None and optional:
        return None
    if isinstance(default, bool):
        ok, expected = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, expected = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
        value = float(value) if ok else value  # type: ignore[arg-type]
    else:
        ok, expected = isinstance(value, str), "a string"
    if not ok:
        raise UserError(f"{where}={value!r}: expected {expected}"
                        + (" or null" if optional else ""))
    return value


def load_policy_config(path: str | None, what: str = "--policy-config") -> PolicyConfig:
    """The file's config (``path`` None: the defaults)."""
    if path is None:
        return PolicyConfig()
    source = f"{what} {path!r}"
    try:
        text = Path(path).expanduser().read_text()
    except OSError as exc:
        raise UserError(f"{source}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: not valid JSON ({exc})") from None
    return PolicyConfig.from_dict(data, source)
