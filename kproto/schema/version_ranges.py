"""Version ranges as the spec files write them: ``"3"``, ``"0-2"``, ``"1+"`` or ``"none"``.

An open range (``"1+"``) is closed against the highest valid version of the message that holds it when the
spec is loaded, so every range in a loaded model has both ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Optional

_RANGE = re.compile(r"^(\d+)(?:(\+)|-(\d+))?$")


class VersionRangeError(ValueError):
    """A version range string that does not parse (the loader adds file and field)."""


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions ``lo..hi``; ``hi is None`` means open-ended; empty when ``lo > hi``."""

    lo: int
    hi: Optional[int]

    NONE_TEXT = "none"

    @classmethod
    def parse(cls, text: str) -> "Versions":
        text = str(text).strip()
        if text == cls.NONE_TEXT:
            return EMPTY
        match = _RANGE.match(text)
        if not match:
            raise VersionRangeError(f"bad version range {text!r} (expected 'N', 'A-B', 'A+' or 'none')")
        lo = int(match.group(1))
        if match.group(2):
            return cls(lo, None)
        hi = int(match.group(3)) if match.group(3) is not None else lo
        if hi < lo:
            raise VersionRangeError(f"bad version range {text!r}: {hi} < {lo}")
        return cls(lo, hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.lo > self.hi

    def closed(self, highest: int) -> "Versions":
        """This range with an open end closed at ``highest``."""
        if self.empty:
            return self
        hi = highest if self.hi is None else min(self.hi, highest)
        return Versions(self.lo, hi) if self.lo <= hi else EMPTY

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int) or self.empty:
            return False
        return version >= self.lo and (self.hi is None or version <= self.hi)

    def __iter__(self) -> Iterator[int]:
        if self.hi is None:
            raise ValueError("cannot iterate an open version range")
        return iter(range(self.lo, self.hi + 1))

    def intersect(self, other: "Versions") -> "Versions":
        if self.empty or other.empty:
            return EMPTY
        lo = max(self.lo, other.lo)
        his = [h for h in (self.hi, other.hi) if h is not None]
        hi = min(his) if his else None
        if hi is not None and lo > hi:
            return EMPTY
        return Versions(lo, hi)

    def within(self, other: "Versions") -> bool:
        """True when every version of this range is in ``other``."""
        if self.empty:
            return True
        if other.empty or self.lo < other.lo:
            return False
        if other.hi is None:
            return True
        return self.hi is not None and self.hi <= other.hi

    def __str__(self) -> str:
        if self.empty:
            return self.NONE_TEXT
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


EMPTY = Versions(1, 0)
