"""On-disk cache of simulator runs keyed by what decides a run's result: the run config, the
workload spec, the bytes of the files the run reads (trace file, data directory profiles, a model
config.json given by path) and the code.

Each entry is a folder ``<root>/<key>/`` with ``requests.csv.gz`` (per-request records),
``summary.json``, ``meta.json`` (what the key was made of) and, when asked for,
``iterations.csv.gz``. Entries are written to a temporary folder and renamed, so parallel workers
never see half an entry.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from ppsched.core.requests import RequestRecord, new_request_record
from ppsched.dcp.registry import CHUNK_SPECS

CACHE_FORMAT = 2
# The driver writes every run it is sent: level 1 compresses a run's records ~4x faster than
# gzip's default 9 for a file about 8% larger (the same rows when read back).
FAST_GZIP = {"method": "gzip", "compresslevel": 1}
# Source folders whose code decides a run's result: editing any file there invalidates entries.
_FINGERPRINT_PACKAGES = ("sim", "dcp", "predictor", "delay_sched", "traces", "metrics", "core",
                         "admission")
_FINGERPRINT_FILES = ("experiments/run_config.py", "experiments/workload_spec.py")
_RECORD_FIELDS = ("req_id", "arrival_s", "prompt_tokens", "output_tokens", "first_token_s",
                  "finish_s", "rejected", "reject_reason", "slot", "retractions")


# ppsched.dcp files that only one family of chunk controllers runs. A run's key hashes its own
# family's files and none of the others', so editing one rule does not invalidate the runs of the
# other controllers (half of a goodput table is fixed-chunk runs). Every other file, dcp's signals
# and registry included, is in every key; tests/test_cache_fingerprint.py checks the import graph
# that makes this safe (a family imports no other family's file; nothing shared imports one).
CONTROLLER_FILES = {
    "static": ("dcp/static.py",),
    "greedy": ("dcp/greedy.py",),
    "predictive": ("dcp/predictive.py", "dcp/rule_base.py", "dcp/rule_paper.py",
                   "dcp/rule_slo.py", "dcp/rule_steady.py", "dcp/calibrate.py",
                   "dcp/candidate_costs.py", "dcp/prompt_window.py",
                   "dcp/queue_drain.py"),
    "sglang-dynamic": ("dcp/sglang_dynamic.py",),
}


def controller_family(chunk: object) -> str | None:
    """The CONTROLLER_FILES family a ``--chunk`` spec runs (by its name's stem: the registry
    builds every ``greedy*`` and ``predictive*`` spec with that controller); None, hashing every
    file, for a spec the registry does not list."""
    if not isinstance(chunk, str):
        return None
    if chunk.startswith("static:"):
        return "static"
    if chunk not in CHUNK_SPECS:
        return None
    return next((f for f in CONTROLLER_FILES if chunk.startswith(f)), None)


def fingerprint_files(family: str | None = None) -> list[Path]:
    """The sources a run's result depends on: every fingerprinted file, less the other
    controller families' files when ``family`` is known."""
    root = Path(__file__).resolve().parents[1]
    others = {f for name, files in CONTROLLER_FILES.items() if name != family for f in files} \
        if family is not None else set()
    paths = [p for package in _FINGERPRINT_PACKAGES for p in sorted((root / package).rglob("*.py"))]
    return [p for p in paths + [root / f for f in _FINGERPRINT_FILES]
            if p.relative_to(root).as_posix() not in others]


@lru_cache(maxsize=8)
def code_fingerprint(family: str | None = None) -> str:
    """Hash of the simulator/policy/trace sources, so results from older code are not reused;
    with a controller ``family``, only that family's controller files count."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in fingerprint_files(family):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=256)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    del mtime_ns, size  # key only: an edited file is hashed again
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def file_hash(path: str | os.PathLike[str]) -> str:
    """Hash of a file's bytes (memoised per path, mtime and size)."""
    stat = Path(path).stat()
    return _file_hash(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


def tree_hash(root: Path) -> str:
    """Hash of every file's relative path and bytes under root (missing root: 'absent')."""
    if not root.is_dir():
        return "absent"
    root = root.resolve()  # once: the files under it need no path resolution of their own
    files = sorted((Path(folder, name).relative_to(root), os.path.join(folder, name))
                   for folder, _, names in os.walk(root) for name in names
                   if os.path.isfile(os.path.join(folder, name)))
    digest = hashlib.sha256()
    for relative, path in files:
        stat = os.stat(path)
        digest.update(str(relative).encode())
        digest.update(_file_hash(path, stat.st_mtime_ns, stat.st_size).encode())
    return digest.hexdigest()[:16]


def content_fingerprint(config: dict[str, Any], workload: dict[str, Any]) -> dict[str, str]:
    """Hashes of the files a run reads: the trace (catalog entry or --trace-file), the data
    directory's profiles/ (the cost model's input; resolved like the run resolves it, so
    $PPSCHED_DATA_DIR counts), ALP's profile JSON given by path and a model config.json given by
    path."""
    from ppsched.core.models import model_config_file
    from ppsched.core.paths import data_dir as resolve_data_dir
    from ppsched.traces.catalog import CATALOG

    out: dict[str, str] = {}
    wl_dir = resolve_data_dir(workload.get("data_dir"))
    if workload.get("trace_file"):
        out["trace"] = file_hash(workload["trace_file"])
    else:
        entry = CATALOG.get(str(workload.get("name")))
        if entry is not None and entry.file is not None:
            out["trace"] = file_hash(wl_dir / entry.file)
    out["profiles"] = tree_hash(Path(resolve_data_dir(config.get("data_dir"))) / "profiles")
    if config.get("profile_path"):
        out["alp_profile"] = file_hash(config["profile_path"])
    model_file = model_config_file(str(config.get("model", "")))
    if model_file is not None:
        out["model_file"] = file_hash(model_file)
    return out


def run_key(config: dict[str, Any], workload: dict[str, Any], fingerprint: str | None = None,
            *, stop: dict[str, Any] | None = None) -> str:
    """``stop``: the early-stop rule a run ends on; a run to the end has none, and no stop
    entry in its key."""
    payload = {"format": CACHE_FORMAT, "config": config, "workload": workload,
               "files": content_fingerprint(config, workload),
               "code": code_fingerprint(controller_family(config.get("chunk")))
               if fingerprint is None else fingerprint}
    if stop is not None:
        payload["stop"] = stop
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class CachedRun:
    key: str
    records: tuple[RequestRecord, ...]
    summary: dict[str, Any]
    path: Path

    def iterations(self) -> pd.DataFrame | None:
        path = self.path / "iterations.csv.gz"
        return pd.read_csv(path) if path.is_file() else None


class RunCache:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def entry(self, key: str) -> Path:
        return self.root / key

    def has(self, key: str, *, need_iterations: bool = False) -> bool:
        path = self.entry(key)
        if not (path / "summary.json").is_file():
            return False
        return not need_iterations or (path / "iterations.csv.gz").is_file()

    def get(self, key: str, *, need_iterations: bool = False) -> CachedRun | None:
        if not self.has(key, need_iterations=need_iterations):
            return None
        path = self.entry(key)
        try:
            summary = json.loads((path / "summary.json").read_text())
            records = records_from_frame(pd.read_csv(path / "requests.csv.gz",
                                                     keep_default_na=False, na_values=[""]))
        except (OSError, ValueError, KeyError):
            return None  # a damaged entry is recomputed, never trusted
        return CachedRun(key, records, summary, path)

    def put(self, key: str, records: list[RequestRecord] | tuple[RequestRecord, ...],
            summary: dict[str, Any], meta: dict[str, Any],
            iterations: pd.DataFrame | None = None) -> CachedRun:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        (tmp / "requests.csv.gz").write_bytes(gzip.compress(
            records_csv(records).encode(), compresslevel=FAST_GZIP["compresslevel"]))
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1, default=_json_default))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
        if iterations is not None:
            iterations.to_csv(tmp / "iterations.csv.gz", index=False, compression=FAST_GZIP)
        final = self.entry(key)
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:  # another worker won the race with an identical entry
            shutil.rmtree(tmp, ignore_errors=True)
        return CachedRun(key, tuple(records), summary, final)


def _number(value: float) -> str:
    return "" if value != value else repr(value)  # NaN: an empty cell, as pandas writes it


def records_csv(records: list[RequestRecord] | tuple[RequestRecord, ...]) -> str:
    """The records as the cache's requests.csv: ``records_to_frame(records).to_csv(index=False)``
    read back alike, written row by row (the driver writes one per run: half pandas' time)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_RECORD_FIELDS)
    writer.writerows([(r.req_id, _number(r.arrival_s), r.prompt_tokens, r.output_tokens,
                       _number(r.first_token_s), _number(r.finish_s), r.rejected,
                       r.reject_reason, r.slot, r.retractions) for r in records])
    return out.getvalue()


def records_to_frame(records: list[RequestRecord] | tuple[RequestRecord, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: [getattr(r, name) for r in records] for name in _RECORD_FIELDS})


def records_from_frame(frame: pd.DataFrame) -> tuple[RequestRecord, ...]:
    cols = {name: frame[name].tolist() for name in _RECORD_FIELDS}
    out = []
    for i in range(len(frame)):
        reason = cols["reject_reason"][i]
        out.append(new_request_record(
            int(cols["req_id"][i]), float(cols["arrival_s"][i]), int(cols["prompt_tokens"][i]),
            int(cols["output_tokens"][i]), float(cols["first_token_s"][i]),
            float(cols["finish_s"][i]), bool(cols["rejected"][i]),
            "" if not isinstance(reason, str) else reason, int(cols["slot"][i]),
            int(cols["retractions"][i])))
    return tuple(out)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)
