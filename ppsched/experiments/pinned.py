"""The pinned summary under results/pinned/: small CSVs, each with a sidecar <name>.meta.json.

BENCHMARKS.md and the README's results table are generated from these files only
(experiments/benchmarks_doc.py). A sidecar records where its figures come from: the command
that measured them, the commit and date they were measured at, and a note.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from ppsched.core.errors import UserError

PINNED_DIR = Path("results") / "pinned"
MAX_PINNED_BYTES = 20_000  # the pinned set stays small enough to track in git
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ][0-9:.]+Z?)?$")  # ISO date, a time optional
_COMMIT = re.compile(r"^[0-9a-f]{7,40}(-dirty)?$")  # -dirty: uncommitted changes on top


@dataclass(frozen=True, slots=True)
class PinnedMeta:
    title: str
    command: str
    commit: str  # abbreviated or full hash of the commit the figures were measured at
    date: str  # YYYY-MM-DD (a time after it is kept)
    note: str = ""

    def __post_init__(self) -> None:
        for field in ("title", "command"):
            if not str(getattr(self, field)).strip():
                raise UserError(f"pinned meta {field!r} is empty; expected a non-empty string")
        if not _COMMIT.match(self.commit):
            raise UserError(f"pinned meta commit {self.commit!r}: expected 7-40 lowercase hex "
                            "digits (git rev-parse --short HEAD), -dirty after them allowed")
        if not _DATE.match(self.date):
            raise UserError(f"pinned meta date {self.date!r}: expected YYYY-MM-DD (or an ISO "
                            "date and time)")

    @classmethod
    def read(cls, path: Path) -> PinnedMeta:
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{path}: expected a JSON object with title, command, commit, "
                            f"date, note ({exc})") from exc
        if not isinstance(data, dict):
            raise UserError(f"{path}: expected a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"title", "command", "commit", "date", "note"})
        missing = sorted({"title", "command", "commit", "date"} - set(data))
        if unknown or missing:
            raise UserError(f"{path}: keys {unknown or ''} unknown, {missing or ''} missing; "
                            "expected title, command, commit, date, note")
        try:
            return cls(**{k: "" if v is None else str(v) for k, v in data.items()})
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from exc

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n")


@dataclass(frozen=True, slots=True)
class PinnedTable:
    name: str  # the CSV's stem
    frame: pd.DataFrame
    meta: PinnedMeta


def read_pinned(folder: Path) -> dict[str, PinnedTable]:
    """Every <name>.csv under ``folder`` with its sidecar, by name (sorted)."""
    if not folder.is_dir():
        raise UserError(f"pinned results folder {str(folder)!r} does not exist; expected "
                        "results/pinned/ of a checkout (or run `ppsched report --pin`)")
    tables = {}
    for path in sorted(folder.glob("*.csv")):
        meta_path = path.with_suffix(".meta.json")
        if not meta_path.is_file():
            raise UserError(f"{path}: no sidecar {meta_path.name}; every pinned CSV needs one "
                            "with title, command, commit, date, note")
        size = path.stat().st_size
        if size > MAX_PINNED_BYTES:
            raise UserError(f"{path}: {size} bytes; a pinned CSV is at most "
                            f"{MAX_PINNED_BYTES} bytes (pin a summary, not the raw data)")
        tables[path.stem] = PinnedTable(path.stem, pd.read_csv(path), PinnedMeta.read(meta_path))
    for meta_path in sorted(folder.glob("*.meta.json")):
        if meta_path.name.removesuffix(".meta.json") not in tables:
            raise UserError(f"{meta_path}: sidecar without its CSV "
                            f"{meta_path.name.removesuffix('.meta.json')}.csv")
    return tables


def write_pinned(folder: Path, name: str, frame: pd.DataFrame, meta: PinnedMeta) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.csv"
    text = frame.to_csv(index=False, float_format="%.6g", lineterminator="\n")
    if len(text.encode()) > MAX_PINNED_BYTES:
        raise UserError(f"pinned {name}.csv would be {len(text.encode())} bytes; at most "
                        f"{MAX_PINNED_BYTES} (pin fewer columns or rows)")
    path.write_text(text)
    meta.write(folder / f"{name}.meta.json")
    return path
