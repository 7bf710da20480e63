"""What the running SGLang server chose at start-up that the policies must know (duck-typed).

- The decode CUDA graphs: the batch sizes SGLang actually captured (``TpModelWorker.
  get_decode_cuda_graph_bs()`` / ``ModelRunner.decode_cuda_graph_capture_bs``, filled after
  capture), else the decode phase of its ``CudaGraphConfig`` (``backend``, ``bs``, ``max_bs``),
  else none. Never guessed from the GPU model.
- The PP loop's microbatch slots: ``pp_size + pp_async_batch_depth`` (SGLang's
  ``init_pp_loop_state``); a request decodes once per loop, so that is the policies' period.
"""

from __future__ import annotations

from ppsched.core.cuda_graphs import DecodeGraphs, sglang_batch_sizes
from ppsched.core.errors import UserError

DISABLED_BACKEND = "disabled"  # SGLang's Backend.DISABLED


def graphs_from_captured(batch_sizes) -> DecodeGraphs:
    """The captured decode batch sizes (any order, duplicates allowed) → DecodeGraphs."""
    sizes = sorted({int(bs) for bs in batch_sizes or ()})
    return DecodeGraphs(tuple(sizes))


def graphs_from_phase(phase) -> DecodeGraphs:
    """SGLang's decode ``PhaseConfig`` (or a dict with its keys) → what it captures.

    ``bs`` given: those sizes up to ``max_bs``; only ``max_bs``: SGLang's default ladder to it.
    Neither (the memory hook had not run): unknown → UserError, the caller must not guess.
    """
    get = phase.get if isinstance(phase, dict) else (lambda k, d=None: getattr(phase, k, d))
    if str(get("backend", "")).lower() == DISABLED_BACKEND:
        return DecodeGraphs.disabled()
    max_bs, bs = get("max_bs"), get("bs")
    if bs:
        sizes = sorted({int(b) for b in bs if max_bs is None or int(b) <= int(max_bs)})
        return DecodeGraphs(tuple(sizes))
    if max_bs:
        return DecodeGraphs(sglang_batch_sizes(int(max_bs)))
    raise UserError(f"decode CUDA graph config {phase!r}: neither bs nor max_bs set; expected "
                    "the resolved config of a started server")


def read_decode_graphs(sched, device_type: str) -> tuple[DecodeGraphs, str]:
    """(graphs, where they were read) for a started scheduler."""
    if device_type != "cuda":
        return DecodeGraphs.disabled(), f"device {device_type}: no CUDA graphs"
    worker = getattr(sched, "tp_worker", None)
    getter = getattr(worker, "get_decode_cuda_graph_bs", None)
    if callable(getter):
        return graphs_from_captured(getter()), "tp_worker.get_decode_cuda_graph_bs()"
    runner = getattr(worker, "model_runner", None)
    if runner is not None and hasattr(runner, "decode_cuda_graph_capture_bs"):
        return (graphs_from_captured(runner.decode_cuda_graph_capture_bs),
                "model_runner.decode_cuda_graph_capture_bs")
    from sglang.srt.runtime_context import get_exec  # only reached inside an SGLang process

    return graphs_from_phase(get_exec().graph.cuda_graph_config.decode), "cuda_graph_config"


def loop_slots(pp_size: int, async_batch_depth: int) -> int:
    """Microbatch slots of SGLang's PP loop; its ``running_mbs`` has this many entries."""
    if pp_size < 1 or async_batch_depth < 0:
        raise UserError(f"pp_size={pp_size}, pp_async_batch_depth={async_batch_depth}: "
                        "expected pp_size >= 1 and depth >= 0")
    return pp_size + async_batch_depth
