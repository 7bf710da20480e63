"""Chunk-size controllers (dynamic chunked prefill). Pure policy code: never imports an engine."""
