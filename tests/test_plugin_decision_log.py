"""The decision log's writer: records built off the turn, NaN as null, a bad record dropped."""

import json
import math

from ppsched.sglang_patch.decision_log import DecisionLog


def _fields(a, b):
    return {"a": a, "pair": b}


def test_records_built_by_the_writer_nan_as_null_bad_ones_dropped(tmp_path):
    path = tmp_path / "log.jsonl"
    log = DecisionLog(str(path), 3)
    log.write("plain", x=1.5, bad=math.nan, nested={"v": [math.inf, 2]})
    log.write_later("later", _fields, 7, (1, 2))
    log.write("unserializable", obj=object())
    log.write_later("broken", _fields, 1)  # the builder raises: dropped, the rest written
    log.write("after", y=2)
    log.flush()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["plain", "later", "after"]
    plain, later, after = records
    assert plain["x"] == 1.5 and plain["bad"] is None and plain["nested"] == {"v": [None, 2]}
    assert later["a"] == 7 and later["pair"] == [1, 2] and later["rank"] == 3
    assert after["y"] == 2 and log.busy_s > 0
