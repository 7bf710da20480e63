"""SGLang plugin: DCP, delay scheduling and stage timing inside stock SGLang 0.5.23.

Loaded through the ``sglang.srt.plugins`` entry point (``plugin.load``) in every scheduler
process; inert unless configured by ``PPSCHED_*`` environment variables (see config.py and
docs/SGLANG_PLUGIN.md). Only hooks.py and plugin.py import sglang; the rest is engine-free.
"""
