"""A mock Kafka broker that clients of 0.8 through 4.x use at their defaults: in-memory topics, the group
coordinator, idempotent and transactional producers, SASL PLAIN, fault injection, pcap recording.

* :mod:`kproto.broker.mock` -- :class:`MockBroker` (sync and async context manager) and :func:`run_broker`;
* :mod:`kproto.broker.server` -- asyncio streams around :class:`kproto.connection.ServerConnection`;
* :mod:`kproto.broker.core` -- :class:`~kproto.broker.core.BrokerCore`: what each request is answered
  (no sockets), dispatched over the one table of served versions assembled
  (:mod:`kproto.broker.served_versions`) from :mod:`kproto.broker.control` (ApiVersions, Metadata, admin
  requests), :mod:`kproto.broker.data_plane` (Produce, Fetch, ListOffsets, producer ids, transactions) and
  the group coordinator;
* :mod:`kproto.broker.cluster` -- nodes, placements (replicas, ISR, leader and epoch), coordinators and
  the controls that move them (``MockBroker(brokers=3)``);
* :mod:`kproto.broker.log`, :mod:`kproto.broker.batches`,
  :mod:`kproto.broker.append`, :mod:`kproto.broker.conversion` -- topics, partition logs of RecordBatch v2
  patched in place, 0.8/0.9 message sets validated and up-converted, down-conversion for old fetchers;
* :mod:`kproto.broker.producers`, :mod:`kproto.broker.transactions` -- idempotence and transactions;
* :mod:`kproto.broker.sasl` -- SASL PLAIN logins;
* :mod:`kproto.broker.faults` -- injected errors, delays and dropped connections;
* :mod:`kproto.broker.hooks` -- per-request hooks (typed requests in, an :class:`Intercept` out) and
  per-broker latency, for the mock cluster's tests;
* :mod:`kproto.broker.recording` -- traffic to pcap (with :mod:`kproto.pcap.writer`);
* :mod:`kproto.broker.cli_command` -- the ``kproto broker`` subcommand.
"""

from kproto.broker.config import BrokerConfig
from kproto.broker.cluster import ClusterControlError, ClusterEvent
from kproto.broker.faults import Fault
from kproto.broker.hooks import Intercept, InterceptedRequest
from kproto.broker.mock import MockBroker, run_broker

__all__ = [
    "BrokerConfig",
    "ClusterControlError",
    "ClusterEvent",
    "Fault",
    "Intercept",
    "InterceptedRequest",
    "MockBroker",
    "run_broker",
]
