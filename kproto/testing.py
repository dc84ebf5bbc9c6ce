"""Test helpers for code that talks to Kafka 0.8/0.9: :class:`MockBroker`, an in-memory broker.

See :mod:`kproto.broker.mock` for how to run it from synchronous or asyncio code.
"""

from kproto.broker.mock import MockBroker

__all__ = ["MockBroker"]
