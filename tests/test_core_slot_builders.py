"""The records an engine builds per microbatch or per request through the slot descriptors
(``core/slot_builders.py``) are the dataclasses' own values, still frozen; a builder whose class
changed fails at import."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppsched.core.batch import BatchShape
from ppsched.core.requests import RequestRecord, new_request_record
from ppsched.core.slot_builders import slot_setters
from ppsched.core.snapshots import Launch, StageMeasurement, new_launch, new_stage_measurement


@given(st.floats(0, 1e4), st.integers(0, 7), st.integers(0, 7), st.integers(1, 4096),
       st.integers(0, 512), st.floats(1e-3, 1e3))
def test_the_builders_make_the_dataclasses_values(now, slot, stage, tokens, decodes, ms):
    shape = BatchShape(((0, tokens),), decodes, decodes * 100)
    measurement = new_stage_measurement(now, slot, stage, shape, ms)
    assert measurement == StageMeasurement(now, slot, stage, shape, ms)
    assert type(measurement) is StageMeasurement
    launch = new_launch(now, slot, tokens, decodes)
    assert launch == Launch(now, slot, tokens, decodes) and type(launch) is Launch
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.slot = slot + 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        measurement.measured_ms = ms + 1.0  # type: ignore[misc]


@given(st.integers(0, 10**6), st.floats(0, 1e4), st.integers(1, 10**5), st.integers(1, 10**4),
       st.one_of(st.just(math.nan), st.floats(0, 1e4)), st.booleans(), st.integers(-1, 7),
       st.integers(0, 3))
def test_the_request_record_builder_makes_the_dataclasses_value(req_id, arrival, prompt, output,
                                                                first, rejected, slot, retr):
    values = (req_id, arrival, prompt, output, first, first + 1.0, rejected,
              "admission" if rejected else "", slot, retr)
    record = new_request_record(*values)
    assert repr(record) == repr(RequestRecord(*values)) and type(record) is RequestRecord
    assert record.tpot_ms == RequestRecord(*values).tpot_ms or math.isnan(record.tpot_ms)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.slot = slot + 1  # type: ignore[misc]


def test_a_builder_for_a_changed_class_fails_at_import():
    with pytest.raises(ImportError, match="Launch changed"):
        slot_setters(Launch, ("now_s", "slot", "prefill_tokens"))  # a field missing
    with pytest.raises(ImportError, match="BatchShape changed"):  # validates in __post_init__
        slot_setters(BatchShape, ("prefill", "decode_count", "decode_ctx_sum"))
