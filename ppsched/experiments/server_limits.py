"""The longest request a live SGLang server serves in full, read from the server.

SGLang 0.5.23 (paths under ``sglang/srt/``) serves a request in full only when

- its prompt is shorter than ``max_req_input_len``: a longer one is aborted
  (``managers/utils.py:272``, ``validate_input_length``), and
- prompt + output <= ``max_req_len - 1``: the scheduler cuts ``max_new_tokens`` to
  ``max_req_len - input_len - 1`` without telling the client (``managers/scheduler.py:2714``,
  ``init_req_max_new_tokens``), so the stream ends early with ``finish_reason`` "length".

There ``max_req_len = min(context_len - 1, kv_capacity - 1)`` (``managers/tp_worker.py:568``)
and ``max_req_input_len = max_req_len - 5`` (``managers/tp_worker.py:572``).

``/server_info`` publishes ``max_req_input_len`` (it reflects the KV capacity as well as the
context length) and ``context_length``, but not ``max_req_len``. The limits are taken from the
smallest ``max_req_len`` the published figures imply; a server that publishes only its context
length (``/get_model_info`` of other versions) gets the 0.5.23 rule: prompt + output at most
context - 2, prompt at most context - 7.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.errors import UserError
from ppsched.sglang_patch.http_client import Endpoint, get_json

INPUT_MARGIN = 5  # max_req_input_len = max_req_len - 5 (managers/tp_worker.py:572)
CONTEXT_KEYS = ("context_length", "max_context_length", "context_len")
INFO_PATHS = ("/server_info", "/get_model_info")


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Requests with prompt <= max_prompt_tokens and prompt + output <= max_total_tokens are
    served in full; ``source`` names the figures they were derived from."""

    max_total_tokens: int
    max_prompt_tokens: int
    source: str

    def __post_init__(self) -> None:
        if self.max_prompt_tokens < 1 or self.max_total_tokens <= self.max_prompt_tokens:
            raise UserError(f"server limits prompt <= {self.max_prompt_tokens}, prompt + output "
                            f"<= {self.max_total_tokens} ({self.source}): expected "
                            "1 <= prompt limit < total limit")


def _positive(info: dict, key: str) -> int | None:
    value = info.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def limits_from_info(info: dict) -> ServerLimits | None:
    """The limits an info page implies (None: it names neither figure)."""
    input_len = _positive(info, "max_req_input_len")
    context_key = next((k for k in CONTEXT_KEYS if _positive(info, k) is not None), None)
    implied: list[int] = []  # max_req_len implied by each published figure
    figures: list[str] = []
    if input_len is not None:
        implied.append(input_len + INPUT_MARGIN)
        figures.append(f"max_req_input_len={input_len}")
    if context_key is not None:
        context = info[context_key]
        implied.append(context - 1)
        figures.append(f"{context_key}={context}")
    if not implied:
        return None
    max_req_len = min(implied)
    if input_len is None or input_len > max_req_len - INPUT_MARGIN:
        input_len = max_req_len - INPUT_MARGIN
    return ServerLimits(max_total_tokens=max_req_len - 1, max_prompt_tokens=input_len - 1,
                        source=", ".join(figures))


def server_limits(ep: Endpoint) -> ServerLimits | None:
    """The server's limits (``/server_info``, else ``/get_model_info``); None if neither says."""
    for path in INFO_PATHS:
        try:
            info = get_json(ep, path, timeout_s=10)
        except (OSError, ValueError):
            continue
        limits = limits_from_info(info) if isinstance(info, dict) else None
        if limits is not None:
            return ServerLimits(limits.max_total_tokens, limits.max_prompt_tokens,
                                f"{path}: {limits.source}")
    return None
