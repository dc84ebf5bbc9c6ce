"""Test helpers for code that talks to Kafka.

* :class:`MockBroker` -- an in-memory broker, or with ``brokers=N`` a cluster whose brokers stop and
  start and whose leaders and coordinators move (see :mod:`kproto.broker.mock` for running it from
  synchronous or asyncio code, docs/broker.md for the cluster); :class:`Intercept` is what its request
  hooks return, :class:`ClusterControlError` what a control naming nothing real raises;
* :class:`ApacheKafka` -- a real Apache Kafka cluster started from jars (:mod:`kproto.testing.apache_kafka`);
* :mod:`kproto.testing.jars` -- Maven artifacts resolved once into a cache, the classpath of Java peers.

:mod:`kproto.pytest_plugin` builds the ``kafka_broker`` pytest fixture on the first two.
"""

from kproto.broker.cluster import ClusterControlError
from kproto.broker.faults import Fault
from kproto.broker.hooks import Intercept, InterceptedRequest
from kproto.broker.mock import MockBroker, StoredRecord
from kproto.testing.apache_kafka import ApacheKafka, BrokerStartError

__all__ = [
    "ApacheKafka",
    "BrokerStartError",
    "ClusterControlError",
    "Fault",
    "Intercept",
    "InterceptedRequest",
    "MockBroker",
    "StoredRecord",
]
