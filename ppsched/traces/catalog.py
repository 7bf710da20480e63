"""The named workloads: which vendored file (or generator) each name stands for, and its caveats."""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.errors import UserError


@dataclass(frozen=True)
class Entry:
    """A named workload: a vendored trace file, or a synthetic generator (file is None)."""

    name: str
    file: str | None  # relative to the data directory
    fmt: str | None  # 'azure' | 'lengths' | 'mooncake'; None for synthetic
    swap: bool = False  # swap prompt and output lengths
    max_prompt_tokens: int | None = None  # keep only the rows whose prompt is at most this
    prompt_range: tuple[int, int] | None = None  # synthetic: inclusive uniform range
    output_range: tuple[int, int] | None = None
    notes: tuple[str, ...] = ()


_SUMMARY_NOTE = ("arXiv summarization lengths (llama2 tokenizer) stand in for CNN/DailyMail: "
                 "no public CNN/DailyMail length file exists")
_SHAREGPT_NOTE = "ShareGPT lengths (llama2 tokenizer) from sarathi-serve (Apache-2.0)"

CATALOG: dict[str, Entry] = {e.name: e for e in (
    Entry("azure-conv", "traces/AzureLLMInferenceTrace_conv.csv", "azure",
          notes=("Azure LLM inference trace 2023, conversation (CC-BY 4.0)",)),
    Entry("azure-code", "traces/AzureLLMInferenceTrace_code.csv", "azure",
          notes=("Azure LLM inference trace 2023, code (CC-BY 4.0)",)),
    Entry("sharegpt", "traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "lengths",
          notes=(_SHAREGPT_NOTE,)),
    Entry("sharegpt-short", "traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "lengths",
          max_prompt_tokens=1024,
          notes=(_SHAREGPT_NOTE, "the short-prompt, decode-heavy ShareGPT that serving "
                 "benchmarks sample")),
    Entry("summarization", "traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
          "lengths", notes=(_SUMMARY_NOTE,)),
    Entry("summarization-reversed",
          "traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", "lengths",
          swap=True, notes=(_SUMMARY_NOTE, "input and output lengths swapped")),
    Entry("mooncake-synthetic", "traces/mooncake_synthetic_trace.jsonl", "mooncake",
          notes=("Mooncake synthetic trace (FAST'25, Apache-2.0): long prompts, prefix block ids",
                 )),
    Entry("synthetic-prefill", None, None, prompt_range=(512, 1024), output_range=(32, 64),
          notes=("synthetic: prompt uniform 512-1024, output uniform 32-64 tokens",)),
    Entry("synthetic-decode", None, None, prompt_range=(32, 64), output_range=(512, 1024),
          notes=("synthetic: prompt uniform 32-64, output uniform 512-1024 tokens",)),
)}

WORKLOAD_NAMES: tuple[str, ...] = tuple(CATALOG)

SYNTHETIC_DEFAULT_REQUESTS = 1000  # when neither --num-requests nor --duration bounds a generator


def lookup(name: str) -> Entry:
    try:
        return CATALOG[name]
    except KeyError:
        raise UserError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOAD_NAMES)} "
                        f"(or --trace-file PATH --format azure|lengths|mooncake)") from None
