"""The facts about one captured exchange that ``kproto pcap`` prints and filters on.

Topics, partitions, groups and error codes are gathered from wherever they appear in the request and
the response, by field name:

* topics: ``topic``/``topic_name`` fields, and ``name`` in the elements of ``topics``/``topic_data``/
  ``responses`` arrays (where the 0.9 schemas call the topic ``name``);
* partitions: ``partition``, ``partition_index``, ``index`` (Produce) and ``partition_indexes``;
* groups: ``group_id`` fields and the GroupCoordinator request's ``key``;
* error codes: every non-zero ``error_code`` of the response.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from kproto.capture.conversation import Exchange

__all__ = ["ExchangeFacts", "FIELD_NAMES", "all_error_codes", "collect_names"]

_TOPIC_KEYS = frozenset({"topic", "topic_name"})
_TOPIC_ARRAYS = frozenset({"topics", "topic_data", "responses"})
_PARTITION_KEYS = frozenset({"partition", "partition_index", "index"})
_GROUP_KEYS = frozenset({"group_id"})


class ExchangeFacts:
    """Values of the filter fields for one exchange (computed once, on first use)."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.topics: Set[str] = set()
        self.partitions: Set[int] = set()
        self.groups: Set[str] = set()
        self.error_codes: Set[int] = set()
        for message in (exchange.request, exchange.response):
            if message is not None:
                collect_names(message.to_dict(), self, None)
        if exchange.api_key == 10 and exchange.request is not None:  # GroupCoordinator: the group is "key"
            self.groups.add(exchange.request.key)
        if exchange.response is not None:
            _collect_errors(exchange.response.to_dict(), self.error_codes)

    @property
    def failed(self) -> bool:
        """A request or response that did not decode."""
        return self.exchange.request_error is not None or self.exchange.response_error is not None

    @property
    def unanswered(self) -> bool:
        return self.exchange.expects_response and not self.exchange.answered

    @property
    def latency_ms(self) -> Optional[float]:
        latency = self.exchange.latency_ns
        return None if latency is None else latency / 1e6

    def field(self, name: str) -> Any:
        """The value (or set of values) of a filter field; KeyError for unknown names."""
        ex = self.exchange
        header = ex.request_header
        values: Dict[str, Any] = {
            "api": ex.api_name,
            "api_key": ex.api_key,
            "api_version": ex.api_version,
            "version": ex.api_version,
            "correlation_id": ex.correlation_id,
            "client_id": None if header is None else header.client_id,
            "connection": ex.connection.serial,
            "client": str(ex.client),
            "server": str(ex.server),
            "port": {ex.client.port, ex.server.port},
            "request_size": ex.request_size,
            "response_size": ex.response_size,
            "latency_ms": self.latency_ms,
            "topic": self.topics,
            "partition": self.partitions,
            "group": self.groups,
            "error": self.error_codes,
            "failed": self.failed,
            "answered": ex.answered,
            "unanswered": self.unanswered,
        }
        return values[name]


#: Names the filter language accepts.
FIELD_NAMES = (
    "api", "api_key", "api_version", "version", "correlation_id", "client_id", "connection", "client", "server",
    "port", "request_size", "response_size", "latency_ms", "topic", "partition", "group", "error", "failed",
    "answered", "unanswered",
)


def collect_names(value: Any, facts: ExchangeFacts, parent: Optional[str]) -> None:
    """Add the topics, partitions and groups found in a ``to_dict()`` tree to ``facts``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _TOPIC_KEYS and isinstance(item, str):
                facts.topics.add(item)
            elif key == "name" and parent in _TOPIC_ARRAYS and isinstance(item, str):
                facts.topics.add(item)
            elif key in _PARTITION_KEYS and isinstance(item, int):
                facts.partitions.add(item)
            elif key == "partition_indexes" and isinstance(item, list):
                facts.partitions.update(i for i in item if isinstance(i, int))
            elif key in _GROUP_KEYS and isinstance(item, str):
                facts.groups.add(item)
            elif isinstance(item, list):
                for element in item:
                    collect_names(element, facts, key)
            elif isinstance(item, dict):
                collect_names(item, facts, key)


def _collect_errors(value: Any, out: Set[int]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code" and isinstance(item, int):
                if item:
                    out.add(item)
            elif isinstance(item, (list, dict)):
                _collect_errors(item, out)
    elif isinstance(value, list):
        for element in value:
            if isinstance(element, (list, dict)):
                _collect_errors(element, out)


def all_error_codes(exchange: Exchange) -> List[int]:
    """The distinct non-zero error codes of an exchange's response, sorted."""
    out: Set[int] = set()
    if exchange.response is not None:
        _collect_errors(exchange.response.to_dict(), out)
    return sorted(out)
