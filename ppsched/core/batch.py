"""The shape of one microbatch as one pipeline stage sees it: what costs time, nothing else."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchShape:
    """prefill: (prefix_len, extend_len) per prefill piece; decodes as count and context sum.

    A decode request with context c attends over c tokens and adds one token to the batch.
    """

    prefill: tuple[tuple[int, int], ...] = ()
    decode_count: int = 0
    decode_ctx_sum: int = 0

    def __post_init__(self) -> None:
        if self.decode_count < 0 or self.decode_ctx_sum < 0:
            raise ValueError(f"decode_count={self.decode_count} and decode_ctx_sum="
                             f"{self.decode_ctx_sum} must be >= 0")
        for prefix, extend in self.prefill:
            if prefix < 0 or extend <= 0:
                raise ValueError(f"prefill piece (prefix={prefix}, extend={extend}): expected "
                                 "prefix >= 0 and extend > 0")

    @property
    def prefill_tokens(self) -> int:
        return sum(extend for _, extend in self.prefill)

    @property
    def batched_tokens(self) -> int:
        """Rows through the linear layers: every prefill token plus one per decode request."""
        return self.prefill_tokens + self.decode_count

    @property
    def kind(self) -> str:
        """'prefill', 'mixed' (prefill with decodes), 'decode', or 'empty'."""
        if self.prefill and self.decode_count:
            return "mixed"
        if self.prefill:
            return "prefill"
        return "decode" if self.decode_count else "empty"
