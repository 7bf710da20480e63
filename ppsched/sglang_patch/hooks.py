"""The hooks on SGLang 0.5.23's scheduler. Imported only inside an SGLang process.

Flow per microbatch turn (every PP rank runs the same loop in lockstep):
  ingest_requests (AROUND): count the turn, find its slot, clear the pending decision.
    _pull_raw_reqs (AFTER, PP rank 0 / TP rank 0 only): decide chunk + held set for this turn and
      append a PpschedDecision to the pulled list; SGLang broadcasts it to TP peers and relays it
      to the next PP stage with the requests, and every rank dispatches it to ``_on_decision``.
  get_next_batch_to_run (AROUND): merge this slot's held requests back first.
  get_new_batch_prefill (AROUND): use the decided chunk as ``chunked_prefill_size``.
  update_running_batch (AROUND): split the decided held set off (KV kept), decode the rest.
  run_batch (AROUND): time the stage on its device (stage_feed.py); stages are logged and fed
    to the controller (rank 0) when their timing is ready, possibly a few turns later.
  _collect_inflight_batches / _pp_microbatches_drained (AFTER): held requests count as in flight.
"""

from __future__ import annotations

import logging

from ppsched.sglang_patch import holds, stage_feed
from ppsched.sglang_patch.agreement import Agreement, fingerprint, over_torch_store
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decide import decide
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.device_timing import (
    device_type_of,
    forward_stream_of,
    intra_op_threads,
    timer_for,
)
from ppsched.sglang_patch.metrics import PluginMetrics
from ppsched.sglang_patch.preflight import ServerFacts, build_checked
from ppsched.sglang_patch.serving_stack import loop_slots, read_decode_graphs
from ppsched.sglang_patch.state import PluginState, PpschedDecision

logger = logging.getLogger("ppsched.sglang_patch")

SCHED = "sglang.srt.managers.scheduler.Scheduler."
RECEIVER = ("sglang.srt.managers.scheduler_components.request_receiver."
            "SchedulerRequestReceiver._pull_raw_reqs")

_CFG: PluginConfig | None = None
_OFF_REASON: str | None = None
STATE: PluginState | None = None


def install(cfg: PluginConfig, off_reason: str | None = None) -> None:
    """Register the hooks; with ``off_reason`` (the version guard said no) only the start-up
    hook, which reports the refusal so every other rank stays off too."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    global _CFG, _OFF_REASON
    _CFG, _OFF_REASON = cfg, off_reason
    around, after = HookType.AROUND, HookType.AFTER
    if off_reason is not None:
        HookRegistry.register(SCHED + "init_request_dispatcher", _after_init_refused, after)
        return
    HookRegistry.register(SCHED + "init_request_dispatcher", _after_init_dispatcher, after)
    HookRegistry.register(SCHED + "ingest_requests", _around_ingest, around)
    HookRegistry.register(RECEIVER, _after_pull, after)
    HookRegistry.register(SCHED + "get_next_batch_to_run", _around_next_batch, around)
    HookRegistry.register(SCHED + "get_new_batch_prefill", _around_prefill, around)
    HookRegistry.register(SCHED + "update_running_batch", _around_decode, around)
    HookRegistry.register(SCHED + "run_batch", _around_run_batch, around)
    HookRegistry.register(SCHED + "_collect_inflight_batches", _after_inflight, after)
    HookRegistry.register(SCHED + "_pp_microbatches_drained", _after_drained, after)


# ---- set-up -------------------------------------------------------------------------------

def _after_init_dispatcher(result, sched) -> None:
    """Enable on this rank, or stay stock; report to the start-up agreement either way.

    Nothing here may raise into SGLang: a bad setting, a missing file or an unwritable log only
    turns the plugin off (on every rank, through the agreement), never the server."""
    global STATE
    try:
        from sglang.srt.runtime_context import get_parallel

        par = get_parallel()
        rank = int(par.pp_rank)
    except Exception as exc:  # noqa: BLE001
        logger.warning("ppsched: plugin OFF: cannot read SGLang's parallel layout (%r); SGLang "
                       "runs stock", exc)
        return None
    metrics = _metrics_or_none(rank)
    agreement = over_torch_store()
    cfg = _CFG
    try:
        launch_chunk = int(sched.chunked_prefill_size or 0)
        args = sched.server_args
        device_type = device_type_of(sched)
        graphs, graphs_from = read_decode_graphs(sched, device_type)
        slots = loop_slots(int(par.pp_size), int(getattr(par, "pp_async_batch_depth", 0) or 0))
        facts = ServerFacts(model_path=getattr(args, "model_path", None),
                            context_length=getattr(args, "context_length", None),
                            pp_size=int(par.pp_size), tp_size=int(par.tp_size),
                            launch_chunk=launch_chunk,
                            dynamic_chunking=getattr(sched, "dynamic_chunk_sizer", None)
                            is not None, graphs=graphs, loop_slots=slots)
        # Only rank 0 decides; the other ranks build the policies too so a bad setting fails
        # the same way everywhere.
        controller, trimmer, ctx = build_checked(cfg, facts)
        log = DecisionLog(cfg.decision_log, rank, metrics)
        state = PluginState(cfg=cfg, rank=rank, pp_size=int(par.pp_size),
                            launch_chunk=launch_chunk, controller=controller, trimmer=trimmer,
                            log=log, agreement=agreement, device_type=device_type,
                            graphs=graphs, loop_slots=slots,
                            timer=timer_for(device_type, getattr(sched, "device_module", None),
                                            forward_stream_of(sched),
                                            intra_op_threads=intra_op_threads()
                                            if device_type == "cpu" else None))
        stage_feed.attach_learner(state)
        from sglang.utils import TypeBasedDispatcher

        sched._request_dispatcher += TypeBasedDispatcher([(PpschedDecision, _on_decision)])
    except Exception as exc:  # noqa: BLE001 - whatever goes wrong here, SGLang must start stock
        # One WARNING per server: the deciding rank says it (with this reason) for everyone.
        if agreement.decider:
            logger.warning("ppsched: plugin OFF on every rank: it cannot enable on PP rank %d: "
                           "%s; SGLang runs stock", rank, exc)
        else:
            logger.info("ppsched: cannot enable on PP rank %d: %s (the deciding rank turns the "
                        "plugin off on every rank)", rank, exc)
        _report(agreement, False, f"PP rank {rank}: {exc}"[:400])
        return None
    STATE = state
    state.sched = sched
    state.log.write("start", config=cfg.to_dict(), launch_chunk=launch_chunk,
                    controller=getattr(controller, "name", None),
                    trimmer=getattr(trimmer, "name", None), pp_size=state.pp_size,
                    loop_slots=slots, device=device_type, timing=state.timer.source,
                    cuda_graphs=graphs.describe(), cuda_graphs_from=graphs_from,
                    ds_boundaries=list(ctx.boundaries) if ctx.boundaries else None)
    logger.info("ppsched: plugin ready on PP rank %d: chunk=%s ds=%s launch_chunk=%d (acts once "
                "every rank agrees)", rank, cfg.chunk, cfg.ds, launch_chunk)
    _report(agreement, True, fingerprint(cfg.to_dict()))
    _poll_agreement(state)
    return None


def _after_init_refused(result, sched) -> None:
    """The version guard refused: export the gauge at 0 and tell the agreement (never raises)."""
    try:
        from sglang.srt.runtime_context import get_parallel

        rank = int(get_parallel().pp_rank)
        metrics = _metrics_or_none(rank)
        reason = f"PP rank {rank}: {_OFF_REASON}"[:400]
        _report(over_torch_store(), False, reason)
        if _CFG is not None and _CFG.decision_log and metrics is not None:
            log = DecisionLog(_CFG.decision_log, rank, metrics)  # the log says why, too
            log.write("disabled", iteration=-1, reason=reason)
            log.flush()
    except Exception as exc:  # noqa: BLE001
        logger.warning("ppsched: could not report the refusal (%r)", exc)
    return None


def _metrics_or_none(rank: int) -> PluginMetrics | None:
    try:
        return PluginMetrics(rank)
    except Exception as exc:  # noqa: BLE001 - metrics are optional
        logger.warning("ppsched: no Prometheus series (%r)", exc)
        return None


def _report(agreement: Agreement, ok: bool, detail: str) -> None:
    try:
        agreement.report(ok, detail)
    except Exception as exc:  # noqa: BLE001 - the decider then times out: off everywhere
        logger.warning("ppsched: could not report to the start-up agreement (%r)", exc)


def _poll_agreement(st: PluginState) -> bool:
    """True once every rank agreed; sets the gauge and says so once when the verdict lands."""
    ag = st.agreement
    if ag.verdict is not None:
        return ag.verdict
    try:
        verdict = ag.poll()
    except Exception as exc:  # noqa: BLE001 - a store problem turns the plugin off, not SGLang
        ag.verdict, ag.reason = False, f"agreement failed: {exc!r}"
        verdict = False
    if verdict is None:
        return False
    if verdict:
        st.log.metrics.set_enabled(True)
        st.log.write("enabled", iteration=st.iteration, config=st.cfg.to_dict())
        logger.info("ppsched: plugin ON (every rank agreed) on PP rank %d", st.rank)
    else:
        st.active = False
        st.log.write("disabled", iteration=st.iteration, reason=ag.reason)
        if ag.decider:
            logger.warning("ppsched: plugin OFF on every rank: %s; SGLang runs stock",
                           ag.reason)
        else:
            logger.info("ppsched: plugin off on PP rank %d (%s)", st.rank, ag.reason)
    return verdict


def _on_decision(msg: PpschedDecision) -> None:
    st = STATE
    if st is None:
        return None
    if msg.iteration != st.iteration:
        st.warn_once("iter", "decision for iteration %d arrived at iteration %d on rank %d",
                     msg.iteration, st.iteration, st.rank)
    st.pending = msg
    if msg.fallback and st.active:
        st.active = False
        st.log.count("fallbacks")
        logger.error("ppsched: rank 0 fell back (%s); PP rank %d stops applying decisions",
                     msg.reason, st.rank)
        st.log.write("fallback", iteration=st.iteration, slot=st.slot, where="relayed",
                     error=msg.reason)
    return None


# ---- per-turn bookkeeping -----------------------------------------------------------------

def _around_ingest(orig, sched, *args, **kwargs):
    st = STATE
    if st is not None:
        stage_feed.drain(st)  # stages the device finished since the last turn
        ag = st.agreement
        if ag is not None and ag.verdict is None:
            # every turn (rate-limited): a verdict lands on idle turns too; _after_pull gates
            _poll_agreement(st)
        st.iteration += 1
        st.pending = None
        st.hold_outcome = None
        mbs = getattr(sched, "running_mbs", None)
        if mbs:
            slot = st.iteration % len(mbs)
            if mbs[slot] is not sched.running_batch:  # identity is the truth if they disagree
                found = [i for i, b in enumerate(mbs) if b is sched.running_batch]
                if found:
                    st.warn_once("slot", "slot counter drifted (%d vs %d)", slot, found[0])
                    slot = found[0]
            st.slot = slot
    return orig(sched, *args, **kwargs)


def _after_pull(result, receiver):
    st = STATE
    if st is None or result is None or st.rank != 0 or not st.active:
        return None
    if st.agreement is not None and not _poll_agreement(st):  # none until all can apply it
        return None
    try:
        msg = decide(st, st.sched, result)
    except Exception as exc:  # noqa: BLE001 - any policy error must not stop serving
        st.fail("decide", exc)
        msg = PpschedDecision(st.iteration, st.slot, fallback=True, reason=repr(exc)[:500])
    if msg is not None:
        result.append(msg)
    return None


# ---- applying (deterministic on every rank) ----------------------------------------------

def _around_next_batch(orig, sched, *args, **kwargs):
    st = STATE
    if st is not None and st.held:
        try:
            held = st.held.pop(st.slot, None)
            if held is not None:
                running = kwargs["running_batch"] if "running_batch" in kwargs else args[0]
                if running.is_empty():
                    running = held  # never merge into an empty batch (stale tensors)
                else:
                    _align_for_merge(running, held)
                    running.merge_batch(held)
                if "running_batch" in kwargs:
                    kwargs["running_batch"] = running
                else:
                    args = (running, *args[1:])
        except Exception as exc:  # noqa: BLE001
            st.fail("merge held requests", exc)
    plan = orig(sched, *args, **kwargs)
    if st is not None:
        holds.settle(st, plan)  # a decided hold that did not apply is logged with why
    return plan


def _align_for_merge(running, held) -> None:
    """Give the held batch the per-request lists merge_batch concatenates onto the running one."""
    if running.multimodal_inputs is not None and held.multimodal_inputs is None:
        held.multimodal_inputs = [getattr(r, "multimodal_inputs", None) for r in held.reqs]


def _around_prefill(orig, sched, running_batch, *args, **kwargs):
    st = STATE
    msg = st.pending if st is not None else None
    if msg is None or msg.chunk is None or not st.active:
        return orig(sched, running_batch, *args, **kwargs)
    saved = sched.chunked_prefill_size
    sched.chunked_prefill_size = msg.chunk
    try:
        plan = orig(sched, running_batch, *args, **kwargs)
    finally:
        sched.chunked_prefill_size = saved
    try:
        batch = plan.batch_to_run
        if batch is not None:
            st.log.count("chunk_applied")
            st.log.write("chunk_applied", iteration=st.iteration, slot=st.slot, chunk=msg.chunk,
                         extend_tokens=int(batch.extend_num_tokens or 0),
                         requests=len(batch.reqs), split=sched.chunked_req is not None)
    except Exception as exc:  # noqa: BLE001 - logging only
        st.warn_once("log-prefill", "could not log a prefill batch: %r", exc)
    return plan


def _around_decode(orig, sched, batch, *args, **kwargs):
    st = STATE
    msg = st.pending if st is not None else None
    if msg is None or not msg.hold_rids:
        return orig(sched, batch, *args, **kwargs)
    if not st.active or st.slot in st.held:
        holds.note(st, "inactive" if not st.active else "slot-already-held")
        return orig(sched, batch, *args, **kwargs)
    try:
        wanted = set(msg.hold_rids)
        finishing = set(map(id, sched._reqs_finishing_inflight(batch) or ()))
        hold_idx, keep_idx = [], []
        for i, r in enumerate(batch.reqs):
            live = not r.finished() and id(r) not in finishing
            if live and r.rid in wanted and r.to_finish is None:
                hold_idx.append(i)
            else:
                keep_idx.append(i)
        live_kept = [i for i in keep_idx if not batch.reqs[i].finished()]
        holds.note(st, holds.APPLIED if hold_idx and live_kept
                   else "would-hold-all" if hold_idx else "none-live")
        if hold_idx and live_kept:  # never hold all of a slot's requests
            held_reqs = [batch.reqs[i] for i in hold_idx]
            held = sched._build_hisparse_decode_batch(held_reqs)
            if batch.multimodal_inputs is not None:  # per-request list kept by extend batches
                held.multimodal_inputs = [batch.multimodal_inputs[i] for i in hold_idx]
            st.held[st.slot] = held
            batch.filter_batch(keep_indices=keep_idx)
            batch.batch_is_full = False
            st.log.count("hold_turns")
            st.log.count("held_requests", len(held_reqs))
            st.log.write("hold_applied", iteration=st.iteration, slot=st.slot,
                         held=sorted(r.rid for r in held_reqs), running=len(keep_idx))
            if st.rank == 0:
                for r in held_reqs:
                    t = st.clock.get(r.rid)
                    if t is not None:
                        t.held_streak += 1
        if st.rank == 0:
            held_ids = {r.rid for r in st.held.get(st.slot, ()).reqs} \
                if st.slot in st.held else set()
            for r in batch.reqs:
                t = st.clock.get(r.rid)
                if t is not None and r.rid not in held_ids:
                    t.held_streak = 0
    except Exception as exc:  # noqa: BLE001 - deterministic, so every rank fails alike
        st.fail("hold requests", exc)
    return orig(sched, batch, *args, **kwargs)


# ---- measuring (stage_feed.py: device-true timing, read when ready) -----------------------

def _around_run_batch(orig, sched, batch, *args, **kwargs):
    st = STATE
    if st is None or getattr(st.agreement, "verdict", None) is False:  # off everywhere: stock
        return orig(sched, batch, *args, **kwargs)
    built = stage_feed.note_launch(st, batch)
    token = stage_feed.launch(st)
    result = orig(sched, batch, *args, **kwargs)
    stage_feed.finish(st, batch, result, token, built)
    return result


# ---- held requests count as in flight -----------------------------------------------------

def _after_inflight(result, sched):
    st = STATE
    if st is None or not st.held:
        return None
    return [*result, *st.held.values()]


def _after_drained(result, sched):
    st = STATE
    if st is not None and st.held and any(not b.is_empty() for b in st.held.values()):
        return False
    return None
