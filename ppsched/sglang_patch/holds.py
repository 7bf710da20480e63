"""Accounting of decided holds: every decided hold is applied or dropped with a reason (no sglang
imports).

Rank 0 decides a hold set at the pull of a turn, before SGLang has built that turn's batch; the
hold applies only if the slot then runs a decode batch. Every rank settles the turn after
``get_next_batch_to_run`` and, for a hold it did not apply, writes ``hold_dropped`` (iteration,
slot, rids, reason) and counts ``holds_dropped``; rank 0 counts ``hold_decisions``. All ranks
build the same batches, so they drop alike.

Reasons: ``prefill-turn`` (the slot ran a prefill; its decodes do not run this turn, so there is
nothing to hold), ``mixed-prefill`` (``--enable-mixed-chunk``: the decodes ride inside the
prefill batch; DS does not trim them there, the chunk decision sizes that batch, as in the
simulator), ``no-batch`` (the slot ran nothing), and from the decode hook ``inactive`` (after a
fallback), ``none-live`` (every rid finished, aborting or gone), ``would-hold-all`` (holding
them would leave the slot empty), ``slot-already-held``.
"""

from __future__ import annotations

APPLIED = "applied"


def note(st, outcome: str) -> None:
    """The decode hook's outcome for this turn's decided hold: APPLIED or why not."""
    st.hold_outcome = outcome


def settle(st, plan) -> None:
    """After the turn's batch is built: log and count a decided hold that was not applied."""
    msg = st.pending
    outcome, st.hold_outcome = st.hold_outcome, None
    if msg is None or not msg.hold_rids or outcome == APPLIED:
        return
    try:
        reason = outcome or _reason_from_batch(getattr(plan, "batch_to_run", None))
    except Exception as exc:  # noqa: BLE001 - accounting must never stop serving
        reason = f"unknown ({exc!r:.200})"
    st.log.count("holds_dropped")
    st.log.write("hold_dropped", iteration=st.iteration, slot=st.slot,
                 rids=sorted(msg.hold_rids), reason=reason)


def _reason_from_batch(batch) -> str:
    if batch is None:
        return "no-batch"
    mode = getattr(batch, "forward_mode", None)
    if mode is not None and mode.is_extend():
        mixed = mode.is_mixed() or bool(getattr(batch, "decoding_reqs", None))
        return "mixed-prefill" if mixed else "prefill-turn"
    return "not-applied"
