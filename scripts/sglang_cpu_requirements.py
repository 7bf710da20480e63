"""Print sglang's non-CUDA runtime requirements, one per line, from a wheel's METADATA.

Used by setup_sglang_cpu.sh: reads Requires-Dist, evaluates environment markers for this
interpreter, skips extras, and drops torch (pinned separately) and the CUDA-only packages that
cannot install or import on a CPU machine (the list in docs/SGLANG.md of the shared docs).
"""

from __future__ import annotations

import sys
import zipfile

from packaging.requirements import Requirement

# Exact names and name prefixes (PEP 503 normalised) never installed on the CPU test venv.
DROP_EXACT = {
    "torch", "torchaudio", "torchcodec", "torchvision", "timm", "flash-attn-4", "sglang-kernel",
    "sgl-flash-mla", "tilelang", "cuda-python", "torch-memory-saver", "humming-kernels",
    "quack-kernels",
}
DROP_PREFIX = ("flashinfer", "sgl-deep-", "nvidia-", "nvshmem4py")
KEEP_DESPITE_PREFIX = {"nvidia-ml-py"}  # pure Python NVML bindings; sglang imports them


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def cpu_requirements(wheel_path: str) -> list[str]:
    with zipfile.ZipFile(wheel_path) as wheel:
        meta_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        lines = wheel.read(meta_name).decode().splitlines()
    out = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = _norm(req.name)
        if name in DROP_EXACT:
            continue
        if name.startswith(DROP_PREFIX) and name not in KEEP_DESPITE_PREFIX:
            continue
        req.marker = None
        out.append(str(req))
    return out


if __name__ == "__main__":
    print("\n".join(cpu_requirements(sys.argv[1])))
