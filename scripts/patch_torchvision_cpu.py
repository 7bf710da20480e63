"""Make torchvision 0.28.0 importable next to CPU torch 2.13.0 (test venv only).

Its ``_meta_registrations.py`` registers two fake kernels with unguarded
``@torch.library.register_fake("torchvision::...")``; when the compiled ops do not load against
this torch, import fails with ``operator torchvision::nms does not exist``. Guard them on
``torchvision.extension._has_ops()`` like the file's own ``register_meta`` does. Idempotent.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

OLD = '@torch.library.register_fake("torchvision::'
NEW = '@_register_fake_if_ops("torchvision::'
HELPER = '''

def _register_fake_if_ops(name):  # patched by ppsched scripts/patch_torchvision_cpu.py
    if torchvision.extension._has_ops():
        return torch.library.register_fake(name)
    return lambda fn: fn
'''
ANCHOR = "import torchvision.extension  # noqa: F401\n"


def main() -> int:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        print("torchvision is not installed", file=sys.stderr)
        return 1
    path = pathlib.Path(spec.origin).parent / "_meta_registrations.py"
    text = path.read_text()
    if NEW in text:
        return 0
    if OLD not in text or ANCHOR not in text:
        print(f"{path}: layout not recognised; expected torchvision 0.28.0", file=sys.stderr)
        return 1
    text = text.replace(ANCHOR, ANCHOR + HELPER, 1).replace(OLD, NEW)
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
