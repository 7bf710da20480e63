"""Frozen slots dataclasses built through their slot descriptors, for the records an engine
makes per microbatch or per request.

A frozen dataclass's ``__init__`` pays an ``object.__setattr__`` lookup per field; calling the
slot descriptors' setters directly makes the same object in about half the time. A builder
written with ``slot_setters`` must set every field, in order, and the class must have no
``__post_init__``: both are checked when the builder's module is imported.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

new_object = object.__new__


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The setters of ``cls``'s fields ``names``, in order; ImportError if ``names`` is not
    every field of ``cls`` in order, or ``cls`` validates in ``__post_init__`` (a builder would
    then diverge from the class)."""
    if tuple(f.name for f in fields(cls)) != names or hasattr(cls, "__post_init__"):
        raise ImportError(f"{cls.__name__} changed: update the builder that sets its slots")
    return tuple(vars(cls)[name].__set__ for name in names)
