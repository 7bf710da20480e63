"""Cost of the plugin's WHOLE per-turn work on PP rank 0, on fake scheduler state (no SGLang):
chunk snapshot + controller decision, decode snapshot + DS selection, the decision-log JSONL
records, the Prometheus counters (multiprocess mode, as under SGLang's --enable-metrics, when
prometheus_client is installed) and the stage measurement fed to ALP -- everything the hooks do
per microbatch turn on the deciding rank, timed together.

    python scripts/bench_plugin_overhead.py [--waiting 256] [--running 256] [--pp 4] [--components]
Run it with the SGLang venv's python to include Prometheus (it prints whether it did).
Budget: <= 50 us at 256/256 (PP4), <= 100 us at 1024/512.

The decision log's writer thread serializes the records and publishes the counters every 50 ms,
and the learner thread (``sglang_patch/learner.py``) has ALP predict and learn each stage, both
off the turn but in the same process: their cost per turn (``busy_s`` over the timed turns, the
last flush included) is printed next to the turn's figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import types


class Req:
    __slots__ = ("rid", "origin_input_ids", "output_ids", "prefix_len", "extend_end",
                 "to_finish")

    def __init__(self, rid: str, prompt: int, out: int) -> None:
        self.rid = rid
        self.origin_input_ids = [7] * prompt
        self.output_ids = [7] * out
        self.prefix_len = 0
        self.extend_end = 0
        self.to_finish = None

    def finished(self) -> bool:
        return False


class Mode:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def is_decode(self) -> bool:
        return self.kind == "decode"

    def is_extend(self) -> bool:
        return self.kind == "extend"

    def is_mixed(self) -> bool:
        return False


class Lens(list):
    def tolist(self) -> list:
        return list(self)


class Batch:
    def __init__(self, reqs: list, kind: str) -> None:
        self.reqs = reqs
        self.forward_mode = Mode(kind)
        self.decoding_reqs = None
        self.chunked_req = None
        self.prefix_lens = [0] if kind == "extend" else None
        self.extend_lens = [2048] if kind == "extend" else None
        self.seq_lens_cpu = Lens(len(r.origin_input_ids) + len(r.output_ids) for r in reqs) \
            if kind == "decode" else None


class Pool:
    def __init__(self, n: int) -> None:
        self.n = n

    def available_size(self) -> int:
        return self.n

    def evictable_size(self) -> int:
        return 0


def _fake_sglang_io() -> None:
    """decide() recognises pulled requests by SGLang's class; none are pulled here."""
    for name in ("sglang", "sglang.srt", "sglang.srt.managers", "sglang.srt.managers.io_struct"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["sglang.srt.managers.io_struct"].TokenizedGenerateReqInput = type(
        "TokenizedGenerateReqInput", (), {})


def build(waiting: int, running: int, pp: int, log_path: str):
    from ppsched.sglang_patch import stage_feed
    from ppsched.sglang_patch.agreement import Agreement
    from ppsched.sglang_patch.config import PluginConfig
    from ppsched.sglang_patch.decision_log import DecisionLog
    from ppsched.sglang_patch.preflight import ServerFacts, build_checked
    from ppsched.sglang_patch.state import PluginState

    cfg = PluginConfig(chunk="predictive", ds="on", candidates=tuple(range(128, 2049, 128)),
                       boundaries=tuple(range(8, 513, 8)), model="qwen2.5-32b",
                       decision_log=log_path)
    controller, trimmer, _ = build_checked(cfg, ServerFacts(None, None, pp, 1, 2048))
    agreement = Agreement(None, 0, 1, True)
    agreement.report(True, "bench")
    st = PluginState(cfg=cfg, rank=0, pp_size=pp, launch_chunk=2048, controller=controller,
                     trimmer=trimmer, log=DecisionLog(log_path, 0), agreement=agreement)
    st.log.metrics.set_enabled(True)
    stage_feed.attach_learner(st)  # as the plugin does on rank 0
    sched = types.SimpleNamespace()
    sched.waiting_queue = [Req(f"w{i}", 1000 + i % 500, 0) for i in range(waiting)]
    sched.chunked_req = None
    sched.running_mbs = [Batch([Req(f"r{s}-{i}", 800 + i, 40 + i % 30)
                                for i in range(running // pp)], "decode") for s in range(pp)]
    sched.last_mbs = [Batch([], "extend") for _ in range(pp)]
    sched.last_batch = None
    sched.running_batch = sched.running_mbs[0]
    sched.token_to_kv_pool_allocator = Pool(200_000)
    sched.tree_cache = Pool(0)
    sched.max_total_num_tokens = 400_000
    return st, sched


def record_stage(st, batch, ms: float) -> None:
    """The run_batch hook's stage record, with a fixed measured time (no device here)."""
    from ppsched.sglang_patch import stage_feed
    from ppsched.sglang_patch.device_timing import CPU_WALL, FinishedStage

    stage_feed.record(st, FinishedStage(stage_feed.launched_stage(st, batch, None), ms, CPU_WALL))


def turn(st, sched, decide, pp: int) -> None:
    """One microbatch turn of rank 0: what the hooks run, in their order."""
    st.iteration += 1
    st.slot = st.iteration % pp
    st.pending = None
    msg = decide(st, sched, [])
    st.pending = msg
    if msg is not None and msg.chunk is not None:  # the prefill hook's bookkeeping
        st.log.count("chunk_applied")
        st.log.write("chunk_applied", iteration=st.iteration, slot=st.slot, chunk=msg.chunk,
                     extend_tokens=msg.chunk, requests=1, split=True)
        batch = Batch([sched.waiting_queue[0]], "extend")
    else:
        batch = sched.running_mbs[st.slot]
    record_stage(st, batch, 25.0)


def measure(waiting: int, running: int, pp: int, turns: int) -> dict:
    from ppsched.sglang_patch.decide import decide

    with tempfile.TemporaryDirectory() as tmp:
        st, sched = build(waiting, running, pp, os.path.join(tmp, "decisions.jsonl"))
        for _ in range(50):  # warm-up (first snapshots, ALP's first fits)
            turn(st, sched, decide, pp)
        times = []
        st.learner.drain()
        st.log.flush()
        writer_s, learner_s = st.log.busy_s, st.learner.busy_s
        for _ in range(turns):
            for r in sched.running_mbs[(st.iteration + 1) % pp].reqs:  # decoding goes on
                r.output_ids.append(7)
            t = time.perf_counter()
            turn(st, sched, decide, pp)
            times.append(1e6 * (time.perf_counter() - t))
        st.learner.drain()  # what the threads have left to do for these turns
        st.log.flush()
        writer_us = 1e6 * (st.log.busy_s - writer_s) / turns
        learner_us = 1e6 * (st.learner.busy_s - learner_s) / turns
    times.sort()
    return {"mean": statistics.fmean(times), "p50": times[len(times) // 2],
            "p99": times[int(0.99 * len(times))], "writer": writer_us, "learner": learner_us}


def components(waiting: int, running: int, pp: int, turns: int) -> dict[str, float]:
    """Per-turn cost of each part of the turn: median call time x calls per turn (each timed
    part is wrapped, ~1 us of wrapper each; the whole turn is timed with the wrappers on)."""
    from ppsched.sglang_patch import decide as decide_mod
    from ppsched.sglang_patch import translate

    spent: dict[str, list[float]] = {}

    def timed(name: str, fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            spent.setdefault(name, []).append(1e6 * (time.perf_counter() - t))
            return out
        return wrapper

    from ppsched.sglang_patch import stage_feed

    patched = [(decide_mod, "_decide_chunk", "chunk: lazy snapshot + decide + log"),
               (decide_mod, "_decide_holds", "DS: decode set + observe + settle/select"),
               (decide_mod, "_slot_decode_set", "  decode set of the slot"),
               (translate.RequestClock, "observe_unfinished", "  observe the decode set"),
               (stage_feed, "record", "stage record (log + ALP)")]
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patched]
    for owner, attr, name in patched:
        setattr(owner, attr, timed(name, getattr(owner, attr)))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            st, sched = build(waiting, running, pp, os.path.join(tmp, "decisions.jsonl"))
            st.controller.decide = timed("controller decide", st.controller.decide)
            st.controller.observe = timed("ALP learning (learner thread)",
                                          st.controller.observe)
            st.controller.predictor.predict = timed("ALP predict (turn + learner)",
                                                    st.controller.predictor.predict)
            st.trimmer.select = timed("DS select", st.trimmer.select)
            st.log.count = timed("counters", st.log.count)
            st.log.write = timed("JSONL buffer", st.log.write)
            for i in range(50 + turns):
                if i == 50:
                    spent.clear()
                for r in sched.running_mbs[(st.iteration + 1) % pp].reqs:
                    r.output_ids.append(7)
                t = time.perf_counter()
                turn(st, sched, decide_mod.decide, pp)
                spent.setdefault("WHOLE TURN", []).append(1e6 * (time.perf_counter() - t))
            st.learner.drain()  # the learner thread's backlog, timed as it is learned
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)
    return {name: statistics.median(v) * len(v) / turns for name, v in spent.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--waiting", type=int, default=None)
    p.add_argument("--running", type=int, default=None)
    p.add_argument("--pp", type=int, default=4)
    p.add_argument("--turns", type=int, default=2000)
    p.add_argument("--components", action="store_true",
                   help="also print each part's cost per turn (median call x calls per turn)")
    a = p.parse_args()
    prom_dir = tempfile.mkdtemp(prefix="ppsched-prom-")
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", prom_dir)
    _fake_sglang_io()
    try:
        import prometheus_client  # noqa: F401
        prom = f"prometheus multiprocess ({os.environ['PROMETHEUS_MULTIPROC_DIR']})"
    except ImportError:
        prom = "NO prometheus_client: counters in memory only (run with the SGLang venv)"
    cases = [(a.waiting, a.running)] if a.waiting is not None else [(8, 16), (256, 256),
                                                                   (1024, 512)]
    print(f"whole plugin turn on PP rank 0 (predictive + DS + JSONL + counters + ALP update), "
          f"PP{a.pp}, {a.turns} turns each; {prom}")
    for waiting, running in cases:
        r = measure(waiting, running or 1, a.pp, a.turns)
        print(f"waiting {waiting:5d}  running {running:5d}:  mean {r['mean']:7.1f} us  "
              f"p50 {r['p50']:7.1f} us  p99 {r['p99']:7.1f} us   + writer thread "
              f"{r['writer']:5.1f} us/turn, learner thread {r['learner']:5.1f} us/turn")
        if a.components:
            for name, us in components(waiting, running or 1, a.pp, a.turns).items():
                print(f"    {name:40s} {us:7.1f} us/turn")


if __name__ == "__main__":
    main()
