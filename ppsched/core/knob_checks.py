"""Checks shared by the policies' knob dataclasses: each bad knob is one ``UserError`` naming it,
its value and what was expected."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ppsched.core.errors import UserError


def finite_number(value: object) -> bool:
    """An int or float (not a bool) that is finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def whole_number(value: object) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_knobs(section: str, knobs: object, checks: Iterable[tuple[str, bool, str]]) -> None:
    """``checks``: (knob, passed, what was expected); the first that failed is raised."""
    for name, ok, expected in checks:
        if not ok:
            raise UserError(f"{section} {name}={getattr(knobs, name)!r}: expected {expected}")
