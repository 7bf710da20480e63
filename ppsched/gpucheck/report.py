"""The kit's report: one result per check, written as report.json and report.md."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATUSES = ("pass", "fail", "skip")


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    status: str  # pass | fail | skip
    summary: str  # one line: what was found
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r}: expected one of {STATUSES}")


@dataclass(frozen=True, slots=True)
class Report:
    machine: dict[str, Any]
    command: str
    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        """Every check passed or was skipped with its reason; at least one ran."""
        ran = [r for r in self.results if r.status != "skip"]
        return bool(ran) and all(r.status == "pass" for r in ran)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "machine": self.machine, "command": self.command,
                "results": [asdict(r) for r in self.results]}

    def markdown(self) -> str:
        lines = ["# ppsched gpu-check", "", f"Command: `{self.command}`", "",
                 "| | |", "| --- | --- |"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in self.machine.items()]
        lines += ["", f"**Overall: {'PASS' if self.passed else 'FAIL'}**", "",
                  "| check | status | summary | s |", "| --- | --- | --- | --- |"]
        lines += [f"| {r.name} | {r.status} | {r.summary} | {r.seconds:.1f} |"
                  for r in self.results]
        for r in self.results:
            if r.figures:
                lines += ["", f"## {r.name}", "", "```",
                          json.dumps(_jsonable(r.figures), indent=1, sort_keys=True), "```"]
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> tuple[Path, Path]:
        out.mkdir(parents=True, exist_ok=True)
        js, md = out / "report.json", out / "report.md"
        js.write_text(json.dumps(_jsonable(self.to_dict()), indent=1, sort_keys=True) + "\n")
        md.write_text(self.markdown())
        return js, md


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
