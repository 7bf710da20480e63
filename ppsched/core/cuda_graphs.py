"""SGLang's decode CUDA graphs: which batch sizes are captured, and what a batch is padded to.

Source: SGLang 0.5.23 (installed wheel, Apache-2.0), read for facts only:
- cap: ``srt/arg_groups/memory_hook.py`` ``handle_gpu_memory_settings`` sets the default
  ``cuda_graph_config.decode.max_bs`` from the GPU's memory (nvidia-smi MiB) and TP degree:
  < 20 GiB: 8; < 35 GiB: 48 (tp < 4) / 160; < 60 GiB (A100-40GB, L40): 32 / 160;
  < 160 GiB (A100-80GB, H100, H200): 256 / 512; otherwise 512. A default cap larger than
  ``--max-running-requests`` is lowered to it.
- sizes: ``srt/arg_groups/cuda_graph_hook.py`` ``generate_decode_cuda_graph_batch_sizes``:
  [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, cap + 1, 32), kept
  up to the cap, plus the cap itself.
- use: ``srt/model_executor/runner/decode_cuda_graph_runner.py`` ``can_run_graph`` replays a
  graph when the decode batch size is <= the largest captured size, padded to the smallest
  captured size >= the batch (``_pad_to_bucket``); larger batches run eagerly. Only pure decode
  batches replay graphs (a batch with a prefill chunk is an EXTEND forward, always eager).

Engine-free: the simulator and the delay scheduler's boundary detection both read this.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ppsched.core.errors import UserError

_GIB_MIB = 1024  # SGLang compares nvidia-smi MiB against multiples of 1024


def sglang_default_cap(gpu_mem_mib: float, tp_size: int) -> int:
    """SGLang 0.5.23's default decode graph cap for a GPU of ``gpu_mem_mib`` MiB at ``tp_size``."""
    if not gpu_mem_mib > 0:
        raise UserError(f"gpu_mem_mib={gpu_mem_mib!r}: expected > 0")
    if tp_size < 1:
        raise UserError(f"tp_size={tp_size!r}: expected >= 1")
    small_tp = tp_size < 4
    if gpu_mem_mib < 20 * _GIB_MIB:
        return 8
    if gpu_mem_mib < 35 * _GIB_MIB:
        return 48 if small_tp else 160
    if gpu_mem_mib < 60 * _GIB_MIB:
        return 32 if small_tp else 160
    if gpu_mem_mib < 160 * _GIB_MIB:
        return 256 if small_tp else 512
    return 512


def sglang_batch_sizes(cap: int) -> tuple[int, ...]:
    """The captured decode batch sizes for ``cap`` (no speculative decoding, padding on)."""
    if cap < 1:
        raise UserError(f"decode graph cap={cap!r}: expected >= 1")
    ladder = ([1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16))
              + list(range(512, cap + 1, 32)))
    sizes = [bs for bs in ladder if bs <= cap]
    if cap not in sizes:
        sizes.append(cap)
    return tuple(sizes)


@dataclass(frozen=True, slots=True)
class DecodeGraphs:
    """Captured decode batch sizes, ascending; empty means CUDA graphs are off (all eager)."""

    batch_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        sizes = self.batch_sizes
        if any(not isinstance(bs, int) or bs < 1 for bs in sizes):
            raise UserError(f"decode graph batch sizes {sizes!r}: expected positive integers")
        if list(sizes) != sorted(set(sizes)):
            raise UserError(f"decode graph batch sizes {sizes!r}: expected strictly ascending")

    @classmethod
    def disabled(cls) -> DecodeGraphs:
        return cls(())

    @classmethod
    def sglang_default(cls, gpu_mem_mib: float, tp_size: int,
                       max_running_requests: int | None = None) -> DecodeGraphs:
        """What SGLang 0.5.23 captures by default on this GPU and TP degree."""
        cap = sglang_default_cap(gpu_mem_mib, tp_size)
        if max_running_requests is not None:
            if max_running_requests < 1:
                raise UserError(f"max_running_requests={max_running_requests!r}: expected >= 1")
            cap = min(cap, max_running_requests)
        return cls(sglang_batch_sizes(cap))

    @property
    def enabled(self) -> bool:
        return bool(self.batch_sizes)

    @property
    def cap(self) -> int:
        """Largest captured batch size; 0 when graphs are off."""
        return self.batch_sizes[-1] if self.batch_sizes else 0

    def is_graph(self, batch: int) -> bool:
        """Whether a pure decode batch of ``batch`` requests replays a captured graph."""
        return 1 <= batch <= self.cap

    def padded(self, batch: int) -> int:
        """The batch size actually computed: the smallest captured size >= batch, or the batch
        itself when it runs eagerly (above the cap, graphs off, or empty)."""
        if batch < 0:
            raise UserError(f"decode batch={batch!r}: expected >= 0")
        if not self.is_graph(batch):
            return batch
        return self.batch_sizes[bisect.bisect_left(self.batch_sizes, batch)]

    def describe(self) -> dict[str, object]:
        return {"enabled": self.enabled, "cap": self.cap, "batch_sizes": list(self.batch_sizes)}
