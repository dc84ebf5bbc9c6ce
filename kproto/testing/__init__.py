"""Test helpers for code that talks to Kafka: :class:`MockBroker`, an in-memory broker.

See :mod:`kproto.broker.mock` for how to run it from synchronous or asyncio code, and
:mod:`kproto.pytest_plugin` for the ``kafka_broker`` pytest fixture built on it.
"""

from kproto.broker.faults import Fault
from kproto.broker.mock import MockBroker, StoredRecord

__all__ = ["Fault", "MockBroker", "StoredRecord"]
