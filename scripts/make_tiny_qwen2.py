"""Write a tiny random Qwen2 model (safetensors + config.json) for CPU SGLang tests.

Run with the SGLang test venv's python (needs torch and transformers):
    python scripts/make_tiny_qwen2.py OUT_DIR [--dtype float32|bfloat16] [--seed N]
        [--shape tiny|qwen2.5-0.5b]
Tiny shape: vocab 1024, hidden 128, 4 layers, 4 heads, 2 KV heads. Weights are drawn with a larger
initializer range than usual so greedy argmax has clear winners: outputs must not flip on the
last-bit differences between chunkings (the plugin may change timing, never tokens).
"""

from __future__ import annotations

import argparse
import sys

SHAPES = {
    "tiny": dict(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2),
    # Qwen2.5-0.5B's config.json dimensions (vocab 151936 kept: the LM head is real work).
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--shape", default="tiny", choices=sorted(SHAPES),
                        help="tiny (CPU tests) or qwen2.5-0.5b (Qwen2.5-0.5B's layer shapes, "
                        "random weights, for `ppsched gpu-check`)")
    args = parser.parse_args(argv)

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(args.seed)
    config = Qwen2Config(**SHAPES[args.shape], max_position_embeddings=args.context,
                         initializer_range=0.2, tie_word_embeddings=False,
                         torch_dtype=args.dtype, bos_token_id=1, eos_token_id=2)
    model = Qwen2ForCausalLM(config).to(getattr(torch, args.dtype))
    model.save_pretrained(args.out, safe_serialization=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
