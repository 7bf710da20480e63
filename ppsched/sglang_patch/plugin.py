"""Entry point ``sglang.srt.plugins: ppsched = ppsched.sglang_patch.plugin:load``.

SGLang calls ``load()`` in every process that loads plugins (server, tokenizer, each scheduler).
Unconfigured → nothing is registered (stock SGLang). Bad configuration → one error line, nothing
registered, SGLang starts stock.
"""

from __future__ import annotations

import logging
import os

from ppsched.core.errors import UserError
from ppsched.sglang_patch.config import config_from_env

logger = logging.getLogger("ppsched.sglang_patch")


def load() -> None:
    try:
        cfg = config_from_env(os.environ)
    except UserError as exc:
        logger.error("ppsched: plugin refuses to enable: %s; SGLang runs stock", exc)
        return
    if cfg is None:
        logger.info("ppsched: plugin installed but not configured (no PPSCHED_CHUNK/PPSCHED_DS)")
        return
    from ppsched.sglang_patch.hooks import install

    install(cfg)
    logger.info("ppsched: hooks registered (chunk=%s, ds=%s)", cfg.chunk, cfg.ds)
