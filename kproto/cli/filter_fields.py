"""The fields of one captured exchange that ``kproto pcap --filter`` expressions read.

Topics, partitions, groups and error codes come from :mod:`kproto.message_facts` (the walk the
Spark tables use too); this module adds the exchange's own fields and the filter's field names.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from kproto.capture.conversation import Exchange
from kproto.message_facts import message_facts

__all__ = ["FilterFields", "FIELD_NAMES", "all_error_codes"]


class FilterFields:
    """Values of the filter fields for one exchange (computed once, on first use)."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        facts = message_facts(exchange.request, exchange.response)
        self.topics: Set[str] = facts.topics
        self.partitions: Set[int] = facts.partitions
        self.groups: Set[str] = facts.groups
        self.error_codes: Set[int] = facts.error_codes

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
    "api",
    "api_key",
    "api_version",
    "version",
    "correlation_id",
    "client_id",
    "connection",
    "client",
    "server",
    "port",
    "request_size",
    "response_size",
    "latency_ms",
    "topic",
    "partition",
    "group",
    "error",
    "failed",
    "answered",
    "unanswered",
)


def all_error_codes(exchange: Exchange) -> List[int]:
    """The distinct non-zero error codes of an exchange's response, sorted."""
    return sorted(message_facts(None, exchange.response).error_codes)
