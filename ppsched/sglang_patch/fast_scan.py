"""Whole-queue and whole-slot sums without a Python call per request (engine-free).

The per-turn snapshot needs exact totals over every waiting request (remaining prompt tokens)
and every running/held request (live count, context tokens). Any of those fields can change
between turns without the plugin seeing it (the radix cache sets ``prefix_len`` on waiting
requests, decoding grows ``output_ids``), so the totals are re-read every turn -- but through
``map``/``attrgetter``, which walk the lists in C: the same values as summing
``remaining_prompt``/``translate.context_len`` request by request, several times cheaper.
Request fields are ints (``extend_end`` may be None, as SGLang's is before a request is chunked);
anything else takes the per-request path, which gives the reference values by definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, is_, not_, sub

_IDS = attrgetter("origin_input_ids")
_OUT = attrgetter("output_ids")
_PREFIX = attrgetter("prefix_len")
_EXTEND = attrgetter("extend_end")


def remaining_prompt(req) -> int:
    """Prompt tokens not yet prefilled (a chunked request has prefilled up to extend_end)."""
    done = max(int(getattr(req, "prefix_len", 0) or 0), int(getattr(req, "extend_end", 0) or 0))
    return max(len(req.origin_input_ids) - done, 0)


def remaining_prompt_sum(reqs: Sequence) -> int:
    """``sum(remaining_prompt(r) for r in reqs)``."""
    return sum(prompts_and_remaining(reqs)[1])


def prompts_and_remaining(reqs: Sequence) -> tuple[list[int], list[int]]:
    """(prompt lengths, ``[remaining_prompt(r) for r in reqs]``)."""
    lens = list(map(len, map(_IDS, reqs)))
    try:
        pre = list(map(_PREFIX, reqs))
        ext = list(map(_EXTEND, reqs))
    except AttributeError:  # a request without progress fields (the reference handles it)
        return lens, list(map(remaining_prompt, reqs))
    has_pre, has_ext = any(pre), any(ext)  # None and 0 both mean "nothing prefilled"
    if not has_pre and not has_ext:
        return lens, lens
    pre = _ints_or_none(pre) if has_pre else repeat(0)
    ext = _ints_or_none(ext) if has_ext else repeat(0)
    if pre is None or ext is None:
        return lens, list(map(remaining_prompt, reqs))
    return lens, list(map(max, map(sub, lens, map(max, pre, ext)), repeat(0)))


def prompt_lens(reqs: Sequence) -> list[int]:
    return list(map(len, map(_IDS, reqs)))


def output_lens(reqs: Sequence) -> list[int]:
    return list(map(len, map(_OUT, reqs)))


def live_load(reqs: Sequence) -> tuple[int, int]:
    """(unfinished requests, their prompt + generated tokens): one slot's decode load."""
    done = [r.finished() for r in reqs]  # a Python method: faster called from here than from C
    live = list(compress(reqs, map(not_, done))) if any(done) else reqs
    return len(live), sum(map(len, map(_IDS, live))) + sum(map(len, map(_OUT, live)))


def finished_flags(reqs: Sequence) -> list[bool]:
    """``[r.finished() for r in reqs]`` (read once per turn, shared by the counts that need it)."""
    return [r.finished() for r in reqs]


def live_load_from_flags(reqs: Sequence, done: list) -> tuple[int, int]:
    """``live_load(reqs)`` with ``done = finished_flags(reqs)`` already read."""
    live = list(compress(reqs, map(not_, done))) if any(done) else reqs
    return len(live), sum(map(len, map(_IDS, live))) + sum(map(len, map(_OUT, live)))


def live_count(reqs: Sequence) -> int:
    """Unfinished requests in ``reqs``."""
    return len(reqs) - sum([bool(r.finished()) for r in reqs])


def _ints_or_none(values: list) -> list | None:
    """``values`` with None as 0, or None when any is not an int (the per-request path then)."""
    if any(map(is_, values, repeat(None))):
        values = [0 if v is None else v for v in values]
    return values if all(map(int.__instancecheck__, values)) else None
