"""Version negotiation: which version of each API a client and a broker would speak.

Since 0.10.0 a Kafka client opens every connection with ApiVersions; the broker lists, per api key, the
range of versions it serves, and the client then uses, for each API, the highest version in both its own
range and the broker's. APIs the broker does not list (or whose ranges do not meet, as when a 4.x broker
has dropped versions an old client is limited to) cannot be used at all. Brokers older than 0.10.0 cannot
answer ApiVersions, so clients are configured with the broker's release instead and look its versions up
in a table. This module does both halves of that, from data:

- a broker described by a decoded ``ApiVersionsResponse`` (or by any ``{api_key: (min, max)}`` mapping)
  is taken at its word;
- a broker described by a release string (``"0.8.2"``, ``"0.9.0"``, ``"0.10.2"``, ``"2.8"``, ``"4.1"``) is
  looked up in ``specs/BrokerReleases.json`` (loaded by :mod:`kproto.schema.releases`), which lists every
  release line from 0.8.0 to 4.1;
- the client side defaults to kproto itself (every API and version in :data:`kproto.APIS`), or is any
  mapping of ranges, e.g. what another client library supports.

Release strings name a release *line*: for 0.x the first three numbers count (``"0.10.1"``; ``"0.9"`` means
``"0.9.0"``), from 1.0 on the first two (``"2.8.1"`` and ``"2.8"`` are the same line); extra numbers are
patch releases, which never changed protocol versions.

Example::

    >>> from kproto.versions import negotiate
    >>> negotiate("0.9.0")[0]          # Produce against a 0.9.0 broker
    1
    >>> negotiate("2.8", client={3: (0, 9), 18: (0, 3)})
    {3: 9, 18: 3}
"""

from __future__ import annotations

import functools
import re
from typing import Any, Dict, Iterable, Mapping, Optional, Protocol, Tuple, Union

from kproto.errors import KprotoError
from kproto.schema.releases import BrokerRelease, load_releases

__all__ = [
    "ApiVersionsLike",
    "Broker",
    "NegotiationError",
    "UnknownReleaseError",
    "VersionRanges",
    "broker_release",
    "common_versions",
    "negotiate",
    "release_names",
    "served_versions",
    "supported_versions",
]

#: Per api key, an inclusive ``(min_version, max_version)`` range.
VersionRanges = Mapping[int, Tuple[int, int]]


class _ApiVersionRange(Protocol):
    """One entry of an ApiVersions response's ``api_keys`` list."""

    @property
    def api_key(self) -> int: ...

    @property
    def min_version(self) -> int: ...

    @property
    def max_version(self) -> int: ...


class ApiVersionsLike(Protocol):
    """What :func:`served_versions` reads from a decoded ``ApiVersionsResponse`` (kproto's, or any object
    of the same shape)."""

    @property
    def error_code(self) -> int: ...

    @property
    def api_keys(self) -> Iterable[_ApiVersionRange]: ...


#: A broker described by its release line, its ApiVersions response, or its version ranges.
Broker = Union[str, ApiVersionsLike, VersionRanges]


class UnknownReleaseError(KprotoError, LookupError):
    """A release string that is malformed or names a release line the table does not list."""


class NegotiationError(KprotoError, ValueError):
    """An ApiVersions response that cannot be negotiated against (it carries an error code)."""


_RELEASE_TEXT = re.compile(r"^\d+(\.\d+)*$")


@functools.lru_cache(maxsize=1)
def _releases() -> Dict[str, BrokerRelease]:
    return {release.name: release for release in load_releases()}


def release_names() -> Tuple[str, ...]:
    """Every release line the table knows, oldest first (``"0.8.0"`` … ``"4.1"``)."""
    return tuple(_releases())


def broker_release(release: str) -> BrokerRelease:
    """The table entry for ``release`` (``"0.9"``, ``"0.9.0.1"``, ``"3.9"``, ``"3.9.0"`` …).

    Raises :class:`UnknownReleaseError` for a malformed string or a line the table lacks (a release newer
    than the newest listed one is *not* guessed at: its versions are unknown).
    """
    text = release.strip() if isinstance(release, str) else release
    if not isinstance(text, str) or not _RELEASE_TEXT.match(text):
        raise UnknownReleaseError(f"{release!r} is not a Kafka release such as '0.9.0' or '2.8'")
    parts = [int(p) for p in text.split(".")]
    if parts[0] == 0:
        parts = (parts + [0, 0])[:3]
    else:
        parts = (parts + [0])[:2]
    line = ".".join(map(str, parts))
    table = _releases()
    if line not in table:
        known = list(table)
        raise UnknownReleaseError(
            f"no broker release line {line!r} (from {release!r}) in the releases table; known: "
            f"{known[0]} .. {known[-1]} ({', '.join(known)})"
        )
    return table[line]


def supported_versions() -> Dict[int, Tuple[int, int]]:
    """kproto's own side: every api key it encodes and decodes, with its version range."""
    from kproto.apis import APIS

    return {info.api_key: (info.min_version, info.max_version) for info in APIS.values()}


def served_versions(broker: Broker) -> Dict[int, Tuple[int, int]]:
    """The broker's version ranges, as ``{api_key: (min, max)}``, from whichever description is given.

    An ApiVersions response whose ``error_code`` is not 0 raises :class:`NegotiationError`: such a response
    (typically UNSUPPORTED_VERSION, 35) only tells the client which ApiVersions version to retry with.
    """
    if isinstance(broker, str):
        return dict(broker_release(broker).apis)
    if isinstance(broker, Mapping):
        return {int(key): _checked_range(key, value) for key, value in broker.items()}
    error_code = getattr(broker, "error_code", None)
    entries = getattr(broker, "api_keys", None)
    if error_code is None or entries is None:
        raise TypeError(f"expected a release string, an ApiVersionsResponse or a mapping, not {type(broker).__name__}")
    if error_code != 0:
        raise NegotiationError(
            f"the ApiVersions response carries error code {error_code}; retry ApiVersions "
            "with a version the broker lists before negotiating"
        )
    out: Dict[int, Tuple[int, int]] = {}
    for entry in entries:
        out[entry.api_key] = _checked_range(entry.api_key, (entry.min_version, entry.max_version))
    return out


def common_versions(broker: Broker, client: Optional[VersionRanges] = None) -> Dict[int, Tuple[int, int]]:
    """Per api key, the range of versions both ``client`` (default: kproto) and ``broker`` hold; APIs either
    side lacks, or whose ranges do not meet, are absent.

    ``broker`` is a release string, a decoded ``ApiVersionsResponse`` or a ``{api_key: (min, max)}``
    mapping; ``client`` a mapping of the same shape.
    """
    theirs = served_versions(broker)
    ours = supported_versions() if client is None else served_versions(client)
    common: Dict[int, Tuple[int, int]] = {}
    for key in sorted(theirs.keys() & ours.keys()):
        lo = max(theirs[key][0], ours[key][0])
        hi = min(theirs[key][1], ours[key][1])
        if lo <= hi:
            common[key] = (lo, hi)
    return common


def negotiate(broker: Broker, client: Optional[VersionRanges] = None) -> Dict[int, int]:
    """The version of each API that ``client`` (default: kproto) and ``broker`` would use: the highest
    version both hold (see :func:`common_versions` for the arguments; APIs without one are absent)."""
    return {key: hi for key, (_, hi) in common_versions(broker, client).items()}


def _checked_range(key: Any, value: Any) -> Tuple[int, int]:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise TypeError(f"api key {key}: expected a (min, max) pair, got {value!r}") from None
    if not (isinstance(lo, int) and isinstance(hi, int)):
        raise TypeError(f"api key {key}: version bounds must be integers, got {value!r}")
    return (lo, hi)
