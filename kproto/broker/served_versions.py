"""The versions the mock broker serves, and answers fitted to them.

**One table of served versions.**  What ApiVersions advertises is what the broker truly answers, and
each part of the broker declares its share once, next to its handlers, as ``{api key: ((lowest,
highest), handler)}`` (an :data:`ApiTable`): the control plane (:mod:`kproto.broker.control`), the data
plane (:mod:`kproto.broker.data_plane`), the ZooKeeper-era offsets of :mod:`kproto.broker.core`, SASL
(:mod:`kproto.broker.sasl`, answered per connection by the server) and the group coordinator
(:data:`kproto.group.coordinator.SERVED_VERSIONS`).  :func:`served_table` merges the declarations into
the one table the broker both advertises and enforces, so a version is never written twice and never
advertised without a handler.

**Answers fitted to their version.**  Handlers fill one response shape for all versions;
:func:`fit_to_version` puts back at their defaults the fields the asked version lacks, so what is
encoded is exactly what the client will read.

Nothing here knows sockets, the cluster or the broker that owns the table.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple

from kproto import ErrorCode
from kproto.apis import APIS
from kproto.connection.server import RequestReceived
from kproto.message_base import Message
from kproto.messages import ApiVersionsResponse

__all__ = [
    "ApiTable",
    "Handler",
    "VersionTable",
    "api_versions_fallback",
    "api_versions_response",
    "bind_handlers",
    "fit_to_version",
    "served_table",
    "versions_of",
]

_C = ErrorCode

#: Api key → (lowest, highest) version served.
VersionTable = Mapping[int, Tuple[int, int]]
#: A bound request handler: the decoded request and the client's host → the response (None: no answer).
Handler = Callable[[RequestReceived, str], Awaitable[Optional[Message]]]
#: One part's declaration: api key → ((lowest, highest), the unbound method that answers it).
ApiTable = Mapping[int, Tuple[Tuple[int, int], Callable[..., Awaitable[Optional[Message]]]]]


def api_key_of(request_class: Any) -> int:
    """The api key of a generated request class (the tables of served versions are keyed by class)."""
    key: int = request_class.API_KEY
    return key


def versions_of(table: ApiTable) -> Dict[int, Tuple[int, int]]:
    """The version ranges of a part's declaration."""
    return {key: versions for key, (versions, _) in table.items()}


def bind_handlers(owner: object, table: ApiTable) -> Dict[int, Handler]:
    """Api key → ``owner``'s handler method, for the keys ``table`` declares."""
    return {key: handler.__get__(owner) for key, (_, handler) in table.items()}


def served_table(*declarations: VersionTable) -> Dict[int, Tuple[int, int]]:
    """Merge each owner's declared (lowest, highest) versions per api key into one table.

    Two declarations for one api key must meet or overlap (OffsetCommit v0 answered by the broker,
    v1+ by the coordinator): ApiVersions can only advertise one contiguous range per key, so a gap is
    a ValueError, as is a range the codecs cannot encode.
    """
    table: Dict[int, Tuple[int, int]] = {}
    for declared in declarations:
        for key, (low, high) in declared.items():
            codec = APIS[key].versions
            if not (codec.start <= low <= high < codec.stop):
                raise ValueError(
                    f"api key {key} v{low}-v{high} is outside the codecs' v{codec.start}-v{codec.stop - 1}"
                )
            if key in table:
                old_low, old_high = table[key]
                if low > old_high + 1 or high < old_low - 1:
                    raise ValueError(f"api key {key}: v{low}-v{high} and v{old_low}-v{old_high} leave a gap")
                low, high = min(low, old_low), max(high, old_high)
            table[key] = (low, high)
    return dict(sorted(table.items()))


def fit_to_version(message: Any, version: int) -> Any:
    """``message`` with every field its ``version`` lacks back at its default, in place (returned).

    Handlers fill one response shape for all versions; an encoder skips fields a version lacks only
    when the spec marks them ignorable (and refuses the others), and a decoder gives them their
    defaults, so an answer trimmed here is exactly what the client will read.  The walk per (class,
    version) is planned once: most answers have nothing to trim and cost one dictionary lookup.
    """
    if message is None:
        return message
    absent, nested = _trim_plan(type(message), version)
    if absent:
        blank = _blank(type(message))
        for name in absent:
            value = getattr(blank, name)
            if isinstance(value, list):
                value = list(value)
            elif not isinstance(value, _SHAREABLE):
                value = getattr(type(message)(), name)  # a struct: each message gets its own
            setattr(message, name, value)
    for name, is_array in nested:
        value = getattr(message, name)
        for item in value if is_array and value is not None else [value]:
            fit_to_version(item, version)
    return message


_PLANS: Dict[Tuple[type, int], Tuple[Tuple[str, ...], Tuple[Tuple[str, bool], ...]]] = {}
_BLANKS: Dict[type, Any] = {}
_SHAREABLE = (int, float, str, bytes, type(None))  # default values one blank can lend to every message


def _blank(cls: type) -> Any:
    """One default instance of ``cls``, read (never changed) for the defaults of absent fields: lists
    are copied out of it."""
    blank = _BLANKS.get(cls)
    if blank is None:
        blank = _BLANKS[cls] = cls()
    return blank


def _trim_plan(cls: type, version: int) -> Tuple[Tuple[str, ...], Tuple[Tuple[str, bool], ...]]:
    """(fields of ``cls`` absent from ``version``, present struct fields whose structs need trimming)."""
    plan = _PLANS.get((cls, version))
    if plan is None:
        absent, nested = [], []
        for info in cls.FIELDS:  # type: ignore[attr-defined]
            low, high = info.versions
            if not low <= version <= high:
                absent.append(info.name)
            elif info.struct is not None and any(_trim_plan(info.struct, version)):
                nested.append((info.name, bool(info.is_array)))
        plan = _PLANS[(cls, version)] = (tuple(absent), tuple(nested))
    return plan


def api_versions_fallback(served: VersionTable) -> ApiVersionsResponse:
    """The answer to an ApiVersions request in a version the broker does not serve: the v0 layout with
    UNSUPPORTED_VERSION and the broker's ranges, from which the client picks a version it shares."""
    return api_versions_response(served, _C.UNSUPPORTED_VERSION)


def api_versions_response(served: VersionTable, code: int = _C.NONE) -> ApiVersionsResponse:
    """An ApiVersions answer listing ``served`` with error ``code``."""
    K = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(
        error_code=code,
        throttle_time_ms=0,
        api_keys=[K(api_key=key, min_version=low, max_version=high) for key, (low, high) in served.items()],
    )
