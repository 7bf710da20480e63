"""Metrics: per-request latency statistics, SLO attainment, goodput criterion and search."""

from ppsched.metrics.goodput import GoodputResult, goodput_search
from ppsched.metrics.jsonable import jsonable
from ppsched.metrics.summary import percentile_with_misses, percentiles, summarize

__all__ = ["GoodputResult", "goodput_search", "jsonable", "percentile_with_misses",
           "percentiles", "summarize"]
