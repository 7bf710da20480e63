"""Workloads: vendored traces and synthetic generators, arrival processes, context capping."""

from ppsched.traces.arrivals import poisson_arrivals, replay_arrivals
from ppsched.traces.catalog import WORKLOAD_NAMES
from ppsched.traces.cli_args import add_workload_args, workload_from_args
from ppsched.traces.load import cap_context, load_workload
from ppsched.traces.readers import FORMATS, TraceTable, read_trace
from ppsched.traces.workload import Workload

__all__ = [
    "FORMATS", "WORKLOAD_NAMES", "TraceTable", "Workload", "add_workload_args", "cap_context",
    "load_workload", "poisson_arrivals", "read_trace", "replay_arrivals", "workload_from_args",
]
