"""ppsched: online pipeline-parallel scheduling for LLM serving (DCP, ALP, DS)."""

__version__ = "0.1.0"
