"""Model shapes: built-in Qwen2.5 configs and any HuggingFace ``config.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ppsched.core.errors import UserError


@dataclass(frozen=True, slots=True)
class ModelConfig:
    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    gated_mlp: bool = True
    dtype_bytes: int = 2  # BF16
    max_context: int = 32768

    def __post_init__(self) -> None:
        for field_name in ("hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim",
                           "vocab", "dtype_bytes", "max_context"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or value <= 0:
                raise UserError(f"model {self.name!r}: {field_name}={value!r}, expected an int > 0")
        if self.heads % self.kv_heads:
            raise UserError(f"model {self.name!r}: heads={self.heads} not a multiple of "
                            f"kv_heads={self.kv_heads}")

    @property
    def params_per_layer(self) -> int:
        attn = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        attn += self.heads * self.head_dim * self.hidden
        mlp = (3 if self.gated_mlp else 2) * self.hidden * self.intermediate
        return attn + mlp

    @property
    def kv_bytes_per_token_per_layer(self) -> int:
        return 2 * self.kv_heads * self.head_dim * self.dtype_bytes


# Sources: Qwen/Qwen2.5-32B and Qwen/Qwen2.5-14B config.json on the HF hub (numbers from the issue).
BUILTIN_MODELS: dict[str, ModelConfig] = {
    "qwen2.5-32b": ModelConfig("qwen2.5-32b", hidden=5120, intermediate=27648, layers=64, heads=40,
                               kv_heads=8, head_dim=128, vocab=152064),
    "qwen2.5-14b": ModelConfig("qwen2.5-14b", hidden=5120, intermediate=13824, layers=48, heads=40,
                               kv_heads=8, head_dim=128, vocab=152064),
}


def model_config_file(name_or_path: str) -> Path | None:
    """The config.json a model argument names (the file, or the one in its folder); None for a
    built-in name or a path with no config.json. The run cache keys on this file's bytes."""
    if not name_or_path or name_or_path.lower() in BUILTIN_MODELS:
        return None
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    return path if path.is_file() else None


def load_model_config(name_or_path: str) -> ModelConfig:
    """A built-in name (case-insensitive) or a path to an HF ``config.json`` (or its folder)."""
    key = name_or_path.lower()
    if key in BUILTIN_MODELS:
        return BUILTIN_MODELS[key]
    path = model_config_file(name_or_path)
    if path is None:
        raise UserError(f"unknown model {name_or_path!r}: expected one of "
                        f"{sorted(BUILTIN_MODELS)} or a path to an HF config.json")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"model config {str(path)!r} is not valid JSON: {exc}") from exc
    try:
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        return ModelConfig(
            name=str(cfg.get("_name_or_path") or path.parent.name or "custom"),
            hidden=hidden,
            intermediate=int(cfg["intermediate_size"]),
            layers=int(cfg["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads", heads)),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            vocab=int(cfg["vocab_size"]),
            max_context=int(cfg.get("max_position_embeddings", 32768)),
        )
    except KeyError as exc:
        raise UserError(f"model config {str(path)!r} lacks key {exc.args[0]!r}; expected an HF "
                        "decoder config with hidden_size, intermediate_size, num_hidden_layers, "
                        "num_attention_heads, vocab_size") from exc
