"""``ppsched gpu-check``: the plugin's GPU claims, checked on the GPU in one command.

Steps (each bounded in time, each a section of DIR/report.md and DIR/report.json):
1. probe: torch sees CUDA (else one line, exit 1: nothing here can be checked on a CPU).
2. profile: ``profile collect`` on this GPU → fit → boundary detection (``profile.py``).
3. event-vs-sync: the plugin's own ``EventTimer`` (events read by polling, as in the scheduler)
   against a synchronized wall measurement of the same stage forward; ≤ 5 % apart
   (``stage_forward.py``). Launch-to-return time is reported beside them.
4. serve: SGLang with the plugin at ``--pp-size`` = the GPU count on a random-weight
   Qwen2.5-shaped model made locally, predictive (+ DS when PP ≥ 2), a short replay; the
   decision log must show ``cuda-event`` stage records, the graph cap among DS's boundaries,
   and ALP's MAPE on those real iterations (``serve.py``, ``alp_replay.py``).
"""
