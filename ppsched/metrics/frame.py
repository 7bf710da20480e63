"""Request records as a table: one row per request, latencies derived (requests.csv's columns)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ppsched.core.requests import RequestRecord

REQUEST_COLUMNS: tuple[str, ...] = (
    "id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens", "ttft_ms",
    "tpot_ms", "e2e_ms", "slot", "retractions", "rejected", "reject_reason")


def requests_frame(records: Sequence[RequestRecord]) -> pd.DataFrame:
    """One row per request with derived latencies (NaN where undefined, e.g. rejected)."""
    rows = [(r.req_id, r.arrival_s, r.first_token_s, r.finish_s, r.prompt_tokens,
             r.output_tokens, r.ttft_ms, r.tpot_ms, r.e2e_ms, r.slot, r.retractions,
             bool(r.rejected), r.reject_reason) for r in records]
    return pd.DataFrame(rows, columns=list(REQUEST_COLUMNS))
