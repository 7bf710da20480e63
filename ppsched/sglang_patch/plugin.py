"""Entry point ``sglang.srt.plugins: ppsched = ppsched.sglang_patch.plugin:load``.

SGLang calls ``load()`` in every process that loads plugins (server, tokenizer, each scheduler).
Unconfigured -> nothing is registered (stock SGLang). Bad configuration, or an SGLang other than
the one the hooks were written for (unless PPSCHED_FORCE=1) -> one WARNING line and the plugin
stays off on every rank (hooks.py tells the other ranks through the start-up agreement).
``load()`` never raises: no plugin problem may stop SGLang.
"""

from __future__ import annotations

import logging
import os

from ppsched.core.errors import UserError
from ppsched.sglang_patch.config import config_from_env

logger = logging.getLogger("ppsched.sglang_patch")


def load() -> None:
    try:
        _load()
    except Exception as exc:  # noqa: BLE001 - a plugin bug must leave SGLang stock, not dead
        logger.warning("ppsched: plugin OFF: failed while loading (%r); SGLang runs stock", exc)


def _load() -> None:
    try:
        cfg = config_from_env(os.environ)
    except UserError as exc:
        logger.warning("ppsched: plugin refuses to enable: %s; SGLang runs stock", exc)
        return
    if cfg is None:
        logger.info("ppsched: plugin installed but not configured (no PPSCHED_CHUNK/PPSCHED_DS)")
        return
    from ppsched.sglang_patch.hooks import install
    from ppsched.sglang_patch.version_guard import forced, installed_version, mismatches

    found = mismatches(installed_version())
    if found and forced(os.environ):
        logger.warning("ppsched: PPSCHED_FORCE=1: hooking an SGLang that differs from the one "
                       "the plugin was written for: %s", "; ".join(found))
    elif found:
        reason = ("SGLang differs from the one the hooks were written for: " + "; ".join(found)
                  + " (set PPSCHED_FORCE=1 to hook it anyway)")
        logger.warning("ppsched: plugin OFF: %s; SGLang runs stock", reason)
        install(cfg, off_reason=reason)
        return
    install(cfg)
    logger.info("ppsched: hooks registered (chunk=%s, ds=%s)", cfg.chunk, cfg.ds)
