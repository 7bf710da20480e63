"""Is there a CUDA device torch can use? (one line of why not, when not)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GpuInfo:
    count: int
    name: str
    memory_mib: int
    torch_version: str
    cuda_version: str

    def describe(self) -> dict[str, Any]:
        return {"gpus": self.count, "gpu": self.name, "memory_mib": self.memory_mib,
                "torch": self.torch_version, "cuda": self.cuda_version}


def probe_cuda(torch: Any = None) -> tuple[GpuInfo | None, str]:
    """(info, "") on a CUDA machine; (None, why not) elsewhere."""
    if torch is None:
        try:
            import torch
        except ImportError:
            return None, "torch is not installed in this Python"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA device"
    props = torch.cuda.get_device_properties(0)
    return GpuInfo(torch.cuda.device_count(), str(props.name),
                   int(props.total_memory // (1024 * 1024)), str(torch.__version__),
                   str(torch.version.cuda)), ""
