"""Compare a fixed prefill chunk with predictive chunking, then search one goodput point.

A notebook-style script of the Python API (docs/API.md): each ``# %%`` cell runs on its own in
an editor that knows cells, or the whole file with ``python docs/examples/compare_policies.py``
(about 30 s; tests/test_api_example.py runs it). Everything is simulated: Qwen2.5-32B at PP4 on
4xA100 40 GB PCIe, SLO TTFT 2000 ms / TPOT 200 ms (RunConfig's defaults).
"""

# %% 1. A workload: 400 requests of the Azure conversation trace, Poisson arrivals at 6 req/s
import ppsched

workload = ppsched.load_workload("azure-conv", rate=6.0, num_requests=400, seed=0)
lengths = workload.describe()
print(f"{lengths['requests']} requests over {lengths['span_s']:.0f} s, prompt p50 "
      f"{lengths['prompt_tokens']['p50']:.0f} tokens, output p50 "
      f"{lengths['output_tokens']['p50']:.0f} tokens")

# %% 2. Simulate the same arrivals under two chunk controllers
results = {}
for chunk in ("static:512", "predictive"):
    config = ppsched.RunConfig(model="qwen2.5-32b", hardware="a100-40g-pcie", parallel="pp4",
                               chunk=chunk)
    results[chunk] = ppsched.simulate(config, workload)

print(f"{'chunk':<12} {'SLO met':>8} {'p90 TTFT ms':>12} {'p90 TPOT ms':>12} {'bubble':>7}")
for chunk, result in results.items():
    s = result.summary
    print(f"{chunk:<12} {s['slo_attainment']:>8.1%} {s['ttft_ms']['p90']:>12.0f} "
          f"{s['tpot_ms']['p90']:>12.0f} {s['bubble_fraction']:>7.1%}")

# %% 3. Per-request records are a DataFrame: e.g. where the SLO misses come from
requests = results["predictive"].requests
missed = requests[(requests.ttft_ms > 2000) | (requests.tpot_ms > 200)]
print(f"predictive: {len(missed)} of {len(requests)} requests miss the SLO; their median "
      f"prompt is {missed.prompt_tokens.median():.0f} tokens "
      f"(all requests: {requests.prompt_tokens.median():.0f})")

# %% 4. The controllers themselves, as an engine builds them
context = ppsched.RunConfig(chunk="predictive", ds="on").policy_context()
controller = ppsched.chunk_controller("predictive", context)
trimmer = ppsched.decode_trimmer("on", context)
print(f"chunk controller {controller.name!r}, decode trimmer {trimmer.name!r}")

# %% 5. One sustained-goodput point at SLO scale 1.0 (docs/GOODPUT.md), with a short window:
# 20 s warm-up, 60 s measured, 20 s cool-down per run (`ppsched goodput` sizes it from the
# workload, 300 s or more measured, and verifies each point; this is a quick look).
settings = ppsched.SearchSettings(start=4.0, window=ppsched.Window(warmup_s=20.0, measure_s=60.0,
                                                                   cooldown_s=20.0))
table = ppsched.goodput("azure-conv", ["predictive", "static-512"], [1.0], settings=settings)
for row in table.itertuples():
    print(f"goodput {row.policy:<11} {row.goodput_rps:5.2f} req/s ({row.runs} runs: {row.tried})")
