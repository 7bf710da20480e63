"""Write a word-level HF tokenizer for the tiny test model, offline (no hub): id i <-> "t{i}"
(0-2: <unk>, <s>, </s>).

Run with the SGLang test venv's python (needs tokenizers and transformers):
    python scripts/make_offline_tokenizer.py MODEL_DIR [--vocab 1024]
With it, the CPU server can run without --skip-tokenizer-init, so text clients such as
``python -m sglang.bench_serving`` measure real TTFT/ITL (they report 0 against a server that
streams no text). Decoding ids and encoding the text back gives the same ids.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("--vocab", type=int, default=1024)
    args = parser.parse_args(argv)

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # Special tokens are matched anywhere in a text, so none may be a prefix of a word.
    special = {0: "<unk>", 1: "<s>", 2: "</s>"}  # the tiny Qwen2's bos 1, eos 2
    vocab = {special.get(i, f"t{i}"): i for i in range(args.vocab)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with single spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.save_pretrained(args.out_dir)
    if (Path(args.out_dir) / "config.json").exists():
        parser.error(f"{args.out_dir} has a config.json: write the tokenizer to its own folder")
    config_path = Path(args.out_dir) / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2))

    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(args.out_dir)
    ids = [5, 17, 1000, 3, 1, 171, 2, 12]
    assert loaded.encode(loaded.decode(ids), add_special_tokens=False) == ids
    assert loaded.encode("The capital city", add_special_tokens=False) == [0, 0, 0]  # unknown
    return 0


if __name__ == "__main__":
    sys.exit(main())
