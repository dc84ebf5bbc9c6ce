"""A mock Kafka 0.9 broker: in-memory topics, the group coordinator, fault injection, pcap recording.

* :mod:`kproto.broker.mock` -- :class:`MockBroker` (sync and async context manager) and :func:`run_broker`;
* :mod:`kproto.broker.server` -- asyncio streams around :class:`kproto.connection.ServerConnection`;
* :mod:`kproto.broker.handlers` -- what each request is answered (no sockets);
* :mod:`kproto.broker.cluster`, :mod:`kproto.broker.log`, :mod:`kproto.broker.append` -- topics,
  partition logs, offset assignment;
* :mod:`kproto.broker.faults` -- injected errors, delays and dropped connections;
* :mod:`kproto.broker.recording` -- traffic to pcap;
* :mod:`kproto.broker.cli_command` -- the ``kproto broker`` subcommand.
"""

from kproto.broker.config import BrokerConfig
from kproto.broker.faults import Fault
from kproto.broker.mock import MockBroker, run_broker

__all__ = ["BrokerConfig", "Fault", "MockBroker", "run_broker"]
