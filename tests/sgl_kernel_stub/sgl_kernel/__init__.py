"""Test-only stand-in for ``sgl_kernel`` (which has no CPU wheel) in the CPU SGLang test venv.

SGLang imports ``sgl_kernel`` at module level; on the CPU path with the torch_native attention
backend only one op is actually called. It is implemented here in plain torch; any other
attribute resolves to a function that raises ``NotImplementedError(name)``, so an unexpected use
fails loudly instead of computing something wrong. ``torch.ops.sgl_kernel.convert_weight_packed``
is deliberately not registered: SGLang keys its AMX weight-packing path on it.
Never installed outside the test venv built by scripts/setup_sglang_cpu.sh.
"""

from __future__ import annotations

import torch

__version__ = "0.0.0+ppsched-cpu-test-stub"


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """Row r with [s, e) gets req_to_token[r, s:e] = the next e - s entries of out_cache_loc."""
    del pool_len  # row stride of req_to_token; torch indexing does not need it
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    rows = req_pool_indices.tolist()
    offset = 0
    for row, start, end in zip(rows, starts, ends, strict=True):
        n = end - start
        req_to_token[row, start:end] = out_cache_loc[offset:offset + n].to(req_to_token.dtype)
        offset += n


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def _missing(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel.{name} (CPU test stub)")

    _missing.__name__ = name
    return _missing
