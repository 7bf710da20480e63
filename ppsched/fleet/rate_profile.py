"""A target rate: one constant rate, or a profile over a day ("0:20,8:50,18:35": from hour 0
20 req/s, from hour 8 50 req/s, from hour 18 to midnight 35 req/s)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.core.errors import UserError

DAY_H = 24.0


@dataclass(frozen=True, slots=True)
class RateSegment:
    start_h: float
    hours: float
    rate: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise UserError(f"rate {self.rate!r} req/s from hour {self.start_h:g}: expected a "
                            "finite number > 0")
        if not (0 <= self.start_h < DAY_H and 0 < self.hours <= DAY_H):
            raise UserError(f"rate segment from hour {self.start_h!r} lasting {self.hours!r} h: "
                            "expected a start in [0, 24) and a positive length")


@dataclass(frozen=True, slots=True)
class RateProfile:
    """Segments covering one day; a constant rate is one 24-hour segment."""

    segments: tuple[RateSegment, ...]

    def __post_init__(self) -> None:
        if not self.segments:
            raise UserError("rate profile: expected at least one segment")
        total = sum(s.hours for s in self.segments)
        if abs(total - DAY_H) > 1e-9:
            raise UserError(f"rate profile covers {total:g} h: expected 24")

    @classmethod
    def constant(cls, rate: float) -> RateProfile:
        return cls((RateSegment(0.0, DAY_H, rate),))

    @classmethod
    def parse(cls, text: str) -> RateProfile:
        """'HOUR:RATE,...' with hours strictly increasing from 0; each rate holds until the next
        hour given (the last until midnight)."""
        points: list[tuple[float, float]] = []
        for raw in text.split(","):
            if not raw.strip():
                continue
            hour_text, sep, rate_text = raw.partition(":")
            try:
                hour, rate = float(hour_text), float(rate_text)
            except ValueError:
                hour = rate = math.nan
            if not sep or math.isnan(hour) or math.isnan(rate):
                raise UserError(f"--rate-profile entry {raw.strip()!r}: expected HOUR:RATE "
                                "(e.g. 8:50)")
            points.append((hour, rate))
        if not points or points[0][0] != 0:
            raise UserError(f"--rate-profile {text!r}: expected entries HOUR:RATE starting at "
                            "hour 0 (e.g. 0:20,8:50,18:35)")
        hours = [h for h, _ in points]
        if any(b <= a for a, b in zip(hours, hours[1:], strict=False)) or hours[-1] >= DAY_H:
            raise UserError(f"--rate-profile {text!r}: expected hours increasing within [0, 24)")
        ends = hours[1:] + [DAY_H]
        return cls(tuple(RateSegment(h, end - h, r)
                         for (h, r), end in zip(points, ends, strict=True)))

    @property
    def is_constant(self) -> bool:
        return len(self.segments) == 1

    @property
    def rates(self) -> tuple[float, ...]:
        """Distinct rates, highest first."""
        return tuple(sorted({s.rate for s in self.segments}, reverse=True))

    @property
    def peak(self) -> float:
        return max(s.rate for s in self.segments)

    def requests_per_day(self) -> float:
        return sum(s.rate * s.hours * 3600.0 for s in self.segments)

    def describe(self) -> str:
        if self.is_constant:
            return f"{self.segments[0].rate:g}"
        return ",".join(f"{s.start_h:g}:{s.rate:g}" for s in self.segments)
