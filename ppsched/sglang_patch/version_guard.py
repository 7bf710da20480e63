"""Is the installed SGLang the one the hooks were written for? Checked before any hook registers.

The hooks wrap private scheduler methods of SGLang 0.5.23 and call them with their parameters by
position; another version may rename, move or reshape them, and a hook applied to the wrong
shape would corrupt scheduling rather than fail. So: the version must match and every hooked
function must exist with the parameter names below; otherwise the plugin stays off (one
WARNING line) unless forced with PPSCHED_FORCE=1 (``ppsched serve --force``).
"""

from __future__ import annotations

import inspect
import pkgutil
from collections.abc import Callable, Mapping

SUPPORTED_SGLANG = "0.5.23"
FORCE_ENV = "PPSCHED_FORCE"

# Fully-qualified target -> its parameter names in SGLANG_VERSION (read from the installed wheel).
_SCHED = "sglang.srt.managers.scheduler.Scheduler."
EXPECTED: dict[str, tuple[str, ...]] = {
    _SCHED + "init_request_dispatcher": ("self",),
    _SCHED + "ingest_requests": ("self", "stop_at_pause"),
    _SCHED + "get_next_batch_to_run": ("self", "running_batch", "last_batch"),
    _SCHED + "get_new_batch_prefill": ("self", "running_batch"),
    _SCHED + "update_running_batch": ("self", "batch"),
    _SCHED + "run_batch": ("self", "batch", "pp_proxy_tensors"),
    _SCHED + "_collect_inflight_batches": ("self",),
    _SCHED + "_pp_microbatches_drained": ("self",),
    ("sglang.srt.managers.scheduler_components.request_receiver."
     "SchedulerRequestReceiver._pull_raw_reqs"): ("self",),
}


def forced(environ: Mapping[str, str]) -> bool:
    return environ.get(FORCE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _params(target: str, resolve: Callable[[str], object]) -> tuple[str, ...] | str:
    try:
        fn = resolve(target)
    except Exception as exc:  # noqa: BLE001 - any import/attribute failure is a mismatch
        return f"missing ({type(exc).__name__})"
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:
        return f"no signature ({exc})"


def mismatches(version: str | None, resolve: Callable[[str], object] = pkgutil.resolve_name,
               expected: Mapping[str, tuple[str, ...]] = EXPECTED) -> list[str]:
    """Human-readable differences between the installed SGLang and the one hooked; [] = match."""
    found = []
    if version != SUPPORTED_SGLANG:
        found.append(f"sglang {version or 'not installed'} (the hooks are for "
                     f"{SUPPORTED_SGLANG})")
    for target, params in expected.items():
        got = _params(target, resolve)
        if got != params:
            shown = got if isinstance(got, str) else f"({', '.join(got)})"
            found.append(f"{target.rsplit('.', 2)[-2]}.{target.rsplit('.', 1)[-1]}{shown} "
                         f"expected ({', '.join(params)})")
    return found


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return None
