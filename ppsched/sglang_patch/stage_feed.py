"""Stage measurements: launch → (device) finish → decision log + the controller (no sglang imports).

The run_batch hook calls ``launch`` before the forward and ``finish`` after it returns;
``drain`` (also called once per turn) writes every stage whose timing is ready. Only a source
that is compute time on this device (``device_timing.learnable``) reaches ``controller.observe``;
a refused source is logged with ``learned: false`` and why, and counted.

A decode batch that replayed a CUDA graph is logged and counted but not taught to ALP: the
chunk controller only predicts stages that carry a prefill chunk, which SGLang always runs eagerly
(EXTEND forward), and ALP's offline term is an eager profile; a graph replay has no kernel-launch
gaps and a padded batch, a different staircase that would bias the eager model.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.batch import BatchShape
from ppsched.core.snapshots import Launch, StageMeasurement
from ppsched.sglang_patch import translate
from ppsched.sglang_patch.device_timing import FinishedStage, learnable
from ppsched.sglang_patch.learner import StageLearner


@dataclass(frozen=True, slots=True)
class LaunchedStage:
    """What a stage record needs, captured when the forward was launched."""

    iteration: int
    slot: int
    shape: BatchShape
    predicted_ms: float | None
    cuda_graph: bool  # the forward replayed a decode CUDA graph (SGLang's can_run_cuda_graph)
    padded_decode: int  # requests the graph computed (the captured size >= decode_count)


def forward_shape(batch) -> tuple[BatchShape, bool]:
    """The forward's composition as the cost model sees it, and whether it is a decode."""
    mode = batch.forward_mode
    is_decode = bool(mode is not None and mode.is_decode())
    n_mixed = len(batch.decoding_reqs or ()) if mode is not None and mode.is_mixed() else 0
    seq = batch.seq_lens_cpu.tolist() if batch.seq_lens_cpu is not None else None
    shape = translate.batch_shape(is_decode, batch.prefix_lens, batch.extend_lens, seq, n_mixed)
    return shape, is_decode


def note_launch(st, batch) -> tuple[BatchShape, bool] | None:
    """Rank 0 is about to run a forward for ``st.slot``: tell the controller (its SLO rule
    measures the round from these), every forward, CUDA-graph decodes included. Returns the
    shape it built (for the stage record: built once per forward), None when nobody listens. An
    error here is ours: the plugin falls back like any other (``PluginState.fail``)."""
    observe = getattr(st.controller, "observe_launch", None)
    if observe is None or st.rank != 0 or not st.active:
        return None
    try:
        built = forward_shape(batch)
        observe(Launch(st.now(), st.slot, built[0].prefill_tokens, built[0].decode_count))
    except Exception as exc:  # noqa: BLE001 - never into SGLang
        st.fail("observe launch", exc)
        return None
    return built


def launched_stage(st, batch, result, built: tuple[BatchShape, bool] | None = None
                   ) -> LaunchedStage:
    shape, is_decode = built if built is not None else forward_shape(batch)
    graph = bool(getattr(result, "can_run_cuda_graph", False)) and is_decode
    padded = st.graphs.padded(shape.decode_count) if graph else shape.decode_count
    msg = st.pending
    return LaunchedStage(st.iteration, st.slot, shape,
                         msg.predicted_stage_ms if msg is not None else None, graph, padded)


def launch(st):
    """The timer's start token, or None when measuring is off or failed."""
    if st.timer is None:
        return None
    try:
        return st.timer.begin()
    except Exception as exc:  # noqa: BLE001 - measuring must never stop serving
        _stop_measuring(st, exc)
        return None


def finish(st, batch, result, token, built: tuple[BatchShape, bool] | None = None) -> None:
    if token is None or st.timer is None:
        return
    try:
        st.timer.end(token, launched_stage(st, batch, result, built))
    except Exception as exc:  # noqa: BLE001
        _stop_measuring(st, exc)
        return
    if getattr(st.timer, "dropped", 0):  # events never completed: say so, count each
        st.warn_once("events-dropped", "CUDA stage events never completed; %d dropped",
                     st.timer.dropped)
        st.log.count("errors", st.timer.dropped)
        st.timer.dropped = 0
    drain(st)


def drain(st) -> None:
    """Record every stage whose time is known by now (never waits for the device)."""
    if st.timer is None:
        return
    try:
        for done in st.timer.poll():
            record(st, done)
    except Exception as exc:  # noqa: BLE001
        _stop_measuring(st, exc)


def record(st, done: FinishedStage) -> None:
    stage: LaunchedStage = done.payload
    shape = stage.shape
    kind = shape.kind
    source_learnable = learnable(done.source, st.device_type)
    refused = None
    if not source_learnable:
        refused = f"{done.source} is not compute time on {st.device_type}"
        st.log.count("stage_refused")
    elif stage.cuda_graph:
        refused = "cuda-graph replay (ALP models eager stages)"
    # the learner exists exactly on rank 0 with a controller (attach_learner)
    learned = refused is None and kind != "empty" and st.learner is not None and st.active
    st.log.count("stage_measurements")
    if source_learnable:
        st.recent_stage_ms.append(done.ms)  # a true stage time, whatever its regime
    if st.learner is None:
        _log_stage(None, st, done, learned, refused)
        return
    # ALP predicts (for the record), learns and logs it, off the turn
    measurement = StageMeasurement(st.now(), stage.slot, 0, shape, done.ms) if learned else None
    st.learner.submit(shape, measurement, (st, done, learned, refused))


def attach_learner(st, *, background: bool = True) -> None:
    """Rank 0 with a controller: learn stages off the turn (``learner.StageLearner``)."""
    if st.rank != 0 or st.controller is None:
        return

    def failed(exc: BaseException) -> None:
        st.warn_once("learn", "ALP learning failed (learning stops, decisions go on): %r", exc)
        st.log.count("errors")

    st.learner = StageLearner(st.controller, _log_stage, failed, background=background)


def _log_stage(alp_ms: float | None, st, done: FinishedStage, learned: bool,
               refused: str | None) -> None:
    st.log.write_later("stage", _stage_fields, done, alp_ms, learned, refused)


def _stage_fields(done: FinishedStage, alp_ms: float | None, learned: bool,
                  refused: str | None) -> dict:
    """The ``stage`` record (made by the decision log's writer thread)."""
    stage: LaunchedStage = done.payload
    shape = stage.shape
    fields = dict(iteration=stage.iteration, slot=stage.slot, mode=shape.kind,
                  batched_tokens=shape.batched_tokens, prefill_tokens=shape.prefill_tokens,
                  decode_count=shape.decode_count, decode_ctx=shape.decode_ctx_sum,
                  prefill=[list(piece) for piece in shape.prefill],
                  measured_ms=round(done.ms, 3), predicted_ms=stage.predicted_ms,
                  timing=done.source, cuda_graph=stage.cuda_graph,
                  padded_decode=stage.padded_decode, alp_ms=alp_ms, learned=learned)
    if done.wall_ms is not None:
        fields["wall_ms"] = round(done.wall_ms, 3)
    if refused:
        fields["not_learned"] = refused
    return fields


def _stop_measuring(st, exc: BaseException) -> None:
    st.warn_once("stage", "stage measurement failed (measuring stops): %r", exc)
    st.log.count("errors")
    st.timer = None
