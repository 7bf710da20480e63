"""The policies the experiments compare, by short name, and how each maps onto a run config."""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.errors import UserError

# Chunk sizes tried offline for the oracle-static baseline (the paper's PP_static: the best fixed
# chunk per workload, 512 or 1024 for most, 256 for CNN-Reversed on 32B).
ORACLE_CANDIDATES: tuple[int, ...] = (128, 256, 512, 1024, 2048)


@dataclass(frozen=True, slots=True)
class Policy:
    """One scheduling policy: parallelism, chunk controller spec, delay scheduling on/off.

    ``reads_slo`` is False for policies whose decisions never look at the SLO: one run of such a
    policy serves every SLO scale (the criterion is re-evaluated on its records).
    """

    key: str
    label: str
    parallel: str
    chunk: str
    ds: str = "off"
    reads_slo: bool = False

    def __post_init__(self) -> None:
        if self.ds not in ("on", "off"):
            raise UserError(f"policy {self.key!r}: ds={self.ds!r}, expected 'on' or 'off'")

    @property
    def uses_profile(self) -> bool:
        """Does a run read ALP's offline profile (predictive chunking, or DS's boundaries)? Only
        those runs get an experiment's --profile, so the others keep their cache entries."""
        return self.chunk.startswith("predictive") or self.ds == "on"


def static_policy(chunk: int, parallel: str = "pp4") -> Policy:
    return Policy(f"static-{chunk}", f"PP static:{chunk}", parallel, f"static:{chunk}")


# "oracle-static" is not a run of its own: it is the best of static_policy(c) for c in
# ORACLE_CANDIDATES, chosen per workload and rate/SLO scale (see goodput.py).
POLICIES: dict[str, Policy] = {
    "tp4": Policy("tp4", "TP4 (static:2048)", "tp4", "static:2048"),
    "static-2048": static_policy(2048),
    "oracle-static": Policy("oracle-static", "PP oracle-static", "pp4", "oracle"),
    "sglang-dynamic": Policy("sglang-dynamic", "PP sglang-dynamic", "pp4", "sglang-dynamic"),
    "greedy": Policy("greedy", "PP greedy DCP", "pp4", "greedy", reads_slo=True),
    "predictive": Policy("predictive", "PP predictive DCP", "pp4", "predictive", reads_slo=True),
    "predictive-ds": Policy("predictive-ds", "PP predictive DCP + DS", "pp4", "predictive",
                            ds="on", reads_slo=True),
}
ALL_POLICY_KEYS: tuple[str, ...] = tuple(POLICIES)
# The paper's literal variants: selectable by name, not part of "all".
POLICIES.update({
    "greedy-paper": Policy("greedy-paper", "PP greedy DCP (paper signals)", "pp4", "greedy-paper",
                           reads_slo=True),
    "predictive-paper": Policy("predictive-paper", "PP predictive DCP (paper rule)", "pp4",
                               "predictive-paper", reads_slo=True),
})
BASELINE_KEY = "static-2048"


def parse_policies(text: str) -> tuple[str, ...]:
    """Comma-separated policy keys ('all' for every one), validated, order kept, no repeats."""
    if text.strip() == "all":
        return ALL_POLICY_KEYS
    keys: list[str] = []
    for raw in text.split(","):
        key = raw.strip()
        if not key:
            continue
        if key not in POLICIES and not _is_static_key(key):
            raise UserError(f"policy {key!r}: expected one of {', '.join(POLICIES)} or "
                            "static-N (N a positive integer), comma-separated")
        if key not in keys:
            keys.append(key)
    if not keys:
        raise UserError(f"policies {text!r}: expected at least one policy name")
    return tuple(keys)


def _is_static_key(key: str) -> bool:
    prefix, _, num = key.partition("-")
    return prefix == "static" and num.isdigit() and int(num) > 0


def get_policy(key: str) -> Policy:
    if key in POLICIES:
        return POLICIES[key]
    if _is_static_key(key):
        return static_policy(int(key.split("-", 1)[1]))
    raise UserError(f"policy {key!r}: expected one of {', '.join(ALL_POLICY_KEYS)} or static-N")


def parse_floats(text: str, what: str) -> tuple[float, ...]:
    """Comma-separated positive numbers (SLO scales, rates)."""
    values: list[float] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        try:
            value = float(raw)
        except ValueError:
            raise UserError(f"{what} {raw.strip()!r}: expected a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise UserError(f"{what} {raw.strip()!r}: expected a finite number > 0")
        values.append(value)
    if not values:
        raise UserError(f"{what} {text!r}: expected a comma-separated list of numbers > 0")
    return tuple(values)
