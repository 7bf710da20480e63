"""Where the vendored data lives: --data-dir, else $PPSCHED_DATA_DIR, else the package's own copy.

The data ships inside the package (``ppsched/data``), so a wheel install finds it with no
checkout and no environment variable; nothing is ever downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

from ppsched.core.errors import UserError

PACKAGE_DATA_DIR = Path(__file__).resolve().parents[1] / "data"
ENV_DATA_DIR = "PPSCHED_DATA_DIR"


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: override, else $PPSCHED_DATA_DIR, else the packaged ppsched/data/."""
    chosen = override or os.environ.get(ENV_DATA_DIR) or PACKAGE_DATA_DIR
    path = Path(chosen)
    if not path.is_dir():
        raise UserError(f"data directory {str(path)!r} does not exist; expected a folder with "
                        f"traces/ and profiles/ (set --data-dir or ${ENV_DATA_DIR})")
    return path
