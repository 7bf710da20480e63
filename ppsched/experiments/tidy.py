"""Flatten run summaries into one tidy row (nested dicts become ``a_b`` columns)."""

from __future__ import annotations

import math
from typing import Any


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}_"))
        elif isinstance(value, (list, tuple)):
            out[name] = ";".join(str(v) for v in value)
        else:
            out[name] = value
    return out


def run_row(summary: dict[str, Any], config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Extra columns first, then every summary field, then the config as ``cfg_*``."""
    row: dict[str, Any] = dict(extra)
    row.update(flatten({k: v for k, v in summary.items() if k != "config"}))
    row.update(flatten(config, "cfg_"))
    return row


def stat(summary: dict[str, Any], metric: str, which: str) -> float:
    """``summary[metric][which]`` as a float, NaN when absent."""
    value = summary.get(metric, {})
    value = value.get(which) if isinstance(value, dict) else None
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan
