"""Comparing two runs' records (requests, decisions)."""

from __future__ import annotations

from collections.abc import Iterable


def same_records(a: Iterable[object], b: Iterable[object]) -> bool:
    """Field for field, a NaN equal to a NaN (a rejected request's first token and finish are
    NaN: ``==`` on records holds only where both NaNs are one object, which compiled modules,
    re-boxing each float they read, do not give). ``repr`` writes each float exactly."""
    return [repr(r) for r in a] == [repr(r) for r in b]
