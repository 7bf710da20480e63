"""The shape of one microbatch as one pipeline stage sees it: what costs time, nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BatchShape:
    """prefill: (prefix_len, extend_len) per prefill piece; decodes as count and context sum.

    A decode request with context c attends over c tokens and adds one token to the batch.
    """

    prefill: tuple[tuple[int, int], ...] = ()
    decode_count: int = 0
    decode_ctx_sum: int = 0
    # the pieces' extend tokens, summed once by the validation pass (engines read it several
    # times per microbatch); derived, so not part of equality, hash or repr
    _prefill_tokens: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.decode_count < 0 or self.decode_ctx_sum < 0:
            raise ValueError(f"decode_count={self.decode_count} and decode_ctx_sum="
                             f"{self.decode_ctx_sum} must be >= 0")
        tokens = 0
        for prefix, extend in self.prefill:
            if prefix < 0 or extend <= 0:
                raise ValueError(f"prefill piece (prefix={prefix}, extend={extend}): expected "
                                 "prefix >= 0 and extend > 0")
            tokens += extend
        object.__setattr__(self, "_prefill_tokens", tokens)

    @property
    def prefill_tokens(self) -> int:
        return self._prefill_tokens

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


# What the latency models read of a microbatch: (batched tokens, sum of prefix x extend, sum of
# extend^2, prefill pieces, decode context sum, decode requests). A candidate scan builds these
# directly (``piece_sums``): sixteen BatchShapes cost a decision more than the predictions.
ShapeSums = tuple[int, int, int, int, int, int]


def shape_sums(shape: BatchShape) -> ShapeSums:
    """The sums of a shape, in one pass over its pieces."""
    cross = 0
    square = 0
    tokens = shape.decode_count
    for prefix, extend in shape.prefill:
        cross += prefix * extend
        square += extend * extend
        tokens += extend
    return (tokens, cross, square, len(shape.prefill), shape.decode_ctx_sum,
            shape.decode_count)


def piece_sums(prefix: int, extend: int, decodes: int, decode_ctx: int) -> ShapeSums:
    """The sums of ``piece_shape``'s shape (unchecked: the caller's values are valid)."""
    if extend:
        return (extend + decodes, prefix * extend, extend * extend, 1, decode_ctx, decodes)
    return (decodes, 0, 0, 0, decode_ctx, decodes)


def piece_shape(prefix: int, extend: int, decodes: int, decode_ctx: int) -> BatchShape:
    """One prefill piece of ``extend`` tokens after ``prefix`` (none if ``extend`` is 0) beside
    ``decodes`` decode requests holding ``decode_ctx`` tokens of context."""
    return BatchShape(((prefix, extend),) if extend else (), decodes, decode_ctx)
