"""The ``exchanges`` table's view of :mod:`kproto.capture.message_facts` (topics, error codes)."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from kproto.capture.message_facts import message_facts

__all__ = ["ExchangeFacts", "exchange_facts"]


class ExchangeFacts(NamedTuple):
    """What the ``exchanges`` table records about the contents of a request and its response."""

    topics: List[str]
    error_code: Optional[int]
    partition_errors: List[Dict[str, Any]]


def exchange_facts(request: Any, response: Any) -> ExchangeFacts:
    """Topics named by ``request`` and ``response`` (decoded messages or ``None``) and the response's
    error codes, as the ``exchanges`` table stores them."""
    facts = message_facts(request, response)
    return ExchangeFacts(sorted(facts.topics), facts.error_code, facts.partition_errors)
