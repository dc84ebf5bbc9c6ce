"""The mock broker's control plane: what a client asks before and besides moving records.

A modern client's first requests decide whether it talks to a broker at all: ApiVersions (which
versions of each api the broker serves), Metadata (brokers, topics, partitions, leaders) and
FindCoordinator (where its group or transaction lives).  Admin clients add CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs and DescribeCluster.  This module answers those, for every version in
:data:`CONTROL_PLANE_VERSIONS`, over the cluster, the broker's endpoint and its table of served
versions, which :class:`ControlPlane` is given (it never sees the broker that owns it).  Its share of
that table is declared once, with the handlers, in :attr:`ControlPlane.API_TABLE`
(:mod:`kproto.broker.served_versions` merges the shares).

Every node answers the same metadata: the running brokers, and each partition's leader, epoch,
replicas and ISR from the cluster's placements (a partition without a leader is LEADER_NOT_AVAILABLE);
FindCoordinator names the node the cluster gives a group or transactional id.  Authorisation is not
modelled (every operation is allowed and reported so when a client asks for authorised operations).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from kproto import ErrorCode
from kproto.broker.cluster import Cluster, Endpoint, valid_topic_name
from kproto.broker.config import BrokerConfig
from kproto.broker.served_versions import (
    ApiTable,
    Handler,
    VersionTable,
    api_versions_response,
    bind_handlers,
    versions_of,
)
from kproto.connection.server import RequestReceived
from kproto.message_base import Message
from kproto.messages import (
    ApiVersionsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeClusterResponse,
    DescribeConfigsResponse,
    FindCoordinatorResponse,
    MetadataResponse,
)

__all__ = ["CONTROL_PLANE_VERSIONS", "ControlPlane"]

_C = ErrorCode

# Authorised-operation bits (Kafka's AclOperation codes): everything is allowed on a mock broker.
_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # read ... alter_configs
_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # create ... idempotent_write
_OMITTED = -2147483648  # "not asked for" in an authorised-operations field
_KEY_TYPES = {0: "group", 1: "transaction"}
# KIP-511: client software names and versions a broker accepts in ApiVersions v3+.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

#: Features (name, level) ApiVersions v3+ reports as supported up to and finalized at that level.
_FEATURES = (("group.version", 1),)
_FEATURES_EPOCH = 1

# Config types and sources as DescribeConfigs v1+/v3+ report them.
_BOOLEAN, _STRING, _INT, _LONG, _LIST = 1, 2, 3, 5, 7
_DYNAMIC_TOPIC, _STATIC_BROKER, _DEFAULT = 1, 4, 5
_TOPIC_RESOURCE, _BROKER_RESOURCE = 2, 4


class ControlPlane:
    """The control-plane handlers over one cluster; ``served`` is what ApiVersions advertises and
    ``endpoint`` where Metadata and FindCoordinator send clients."""

    def __init__(self, config: BrokerConfig, cluster: Cluster, served: VersionTable, endpoint: Endpoint) -> None:
        self.config = config
        self.cluster = cluster
        self.served = served
        self.endpoint = endpoint
        #: Topic → its configs set by CreateTopics (Kafka's dynamic topic configs).
        self.topic_configs: Dict[str, Dict[str, Optional[str]]] = {}
        #: Api key → handler, for the keys of :data:`CONTROL_PLANE_VERSIONS`.
        self.handlers: Dict[int, Handler] = bind_handlers(self, self.API_TABLE)

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id (Metadata v10+, DeleteTopics v6, CreateTopics v7), given by the cluster."""
        return self.cluster.topic_ids[name]

    def _delete(self, name: str) -> uuid.UUID:
        """Remove a topic, its id and its configs; returns its id."""
        self.topic_configs.pop(name, None)
        return self.cluster.delete_topic(name)

    def _name_of(self, topic_id: uuid.UUID) -> Optional[str]:
        return self.cluster.topic_name(topic_id)

    # ---------------------------------------------------------------- ApiVersions

    async def api_versions(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        if request.api_version >= 3 and not (
            _SOFTWARE.fullmatch(req.client_software_name or "")
            and _SOFTWARE.fullmatch(req.client_software_version or "")
        ):
            return api_versions_response({}, _C.INVALID_REQUEST)
        response = api_versions_response(self.served, _C.NONE)
        # v3+: the feature levels, as a Kafka 4 broker tells them.  ``group.version`` 1 is what lets a
        # client use the KIP-848 consumer group protocol (ConsumerGroupHeartbeat).
        S, F = ApiVersionsResponse.SupportedFeatureKey, ApiVersionsResponse.FinalizedFeatureKey
        response.supported_features = [S(name=name, min_version=0, max_version=level) for name, level in _FEATURES]
        response.finalized_features_epoch = _FEATURES_EPOCH
        response.finalized_features = [
            F(name=name, min_version_level=level, max_version_level=level) for name, level in _FEATURES
        ]
        return response

    # ---------------------------------------------------------------- Metadata

    async def metadata(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        version = request.api_version
        T = MetadataResponse.MetadataResponseTopic
        P = T.MetadataResponsePartition
        B = MetadataResponse.MetadataResponseBroker
        # v0: an empty list means every topic; v1+: null means every topic, empty none.
        every = req.topics is None or (version == 0 and not req.topics)
        auto_create = version < 4 or req.allow_auto_topic_creation
        asked_ops = version >= 8 and req.include_topic_authorized_operations
        topics = []
        wanted: List[Tuple[Optional[str], Optional[uuid.UUID]]] = (
            [(name, None) for name in sorted(self.cluster.topics)]
            if every
            else list(dict.fromkeys((t.name, t.topic_id if version >= 10 else None) for t in req.topics))
        )
        for name, asked_id in wanted:
            if name is None:  # v10+: a topic named by its id
                name = self._name_of(asked_id) if asked_id is not None else None
                if name is None:
                    topics.append(
                        T(
                            error_code=_C.UNKNOWN_TOPIC_ID,
                            name=None,
                            topic_id=asked_id or uuid.UUID(int=0),
                            partitions=[],
                        )
                    )
                    continue
            partitions = self.cluster.lookup(name, create=auto_create)
            if partitions is None:
                code = _C.UNKNOWN_TOPIC_OR_PARTITION if valid_topic_name(name) else _C.INVALID_TOPIC_EXCEPTION
                topics.append(T(error_code=code, name=name, partitions=[]))
                continue
            live = self.cluster.live
            topics.append(
                T(
                    error_code=_C.NONE,
                    name=name,
                    topic_id=self.topic_id(name),
                    is_internal=False,
                    topic_authorized_operations=_TOPIC_OPERATIONS if asked_ops else _OMITTED,
                    partitions=[
                        P(
                            error_code=_C.NONE if p.leader >= 0 else _C.LEADER_NOT_AVAILABLE,
                            partition_index=i,
                            leader_id=p.leader,
                            leader_epoch=p.leader_epoch,
                            replica_nodes=list(p.replicas),
                            isr_nodes=list(p.isr),
                            offline_replicas=[n for n in p.replicas if n not in live],
                        )
                        for i, p in enumerate(self.cluster.placements[name])
                    ],
                )
            )
        cluster_ops = (
            _CLUSTER_OPERATIONS if 8 <= version <= 10 and req.include_cluster_authorized_operations else _OMITTED
        )
        return MetadataResponse(
            throttle_time_ms=0,
            brokers=[B(node_id=n, host=e.host, port=e.port, rack=None) for n, e in self._live_endpoints()],
            cluster_id=self.config.cluster_id,
            controller_id=self._controller(),
            topics=topics,
            cluster_authorized_operations=cluster_ops,
        )

    def _live_endpoints(self) -> List[Tuple[int, Endpoint]]:
        """The running brokers and where clients reach them (Kafka's metadata lists only live ones)."""
        live = [(node, self._endpoint(node)) for node in self.cluster.node_ids if node in self.cluster.live]
        return [(node, endpoint) for node, endpoint in live if endpoint is not None]

    def _endpoint(self, node: int) -> Optional[Endpoint]:
        """Where ``node`` is reached: the endpoint this plane was given for the first node, the cluster's
        for the others (None for no node)."""
        if node == self.cluster.node_ids[0]:
            return self.endpoint
        return self.cluster.endpoints.get(node)

    def _controller(self) -> int:
        live = [node for node in self.cluster.node_ids if node in self.cluster.live]
        return live[0] if live else -1

    # ---------------------------------------------------------------- FindCoordinator

    async def find_coordinator(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        version = request.api_version
        key_type = req.key_type if version >= 1 else 0
        if version < 4:
            code, message, node = self._find(key_type, req.key)
            endpoint = self._endpoint(node)
            return FindCoordinatorResponse(
                throttle_time_ms=0,
                error_code=code,
                error_message=message,
                node_id=node if endpoint else -1,
                host=endpoint.host if endpoint else "",
                port=endpoint.port if endpoint else -1,
            )
        C = FindCoordinatorResponse.Coordinator
        answers = []
        for key in req.coordinator_keys:
            code, message, node = self._find(key_type, key)
            endpoint = self._endpoint(node)
            answers.append(
                C(
                    key=key,
                    node_id=node if endpoint else -1,
                    host=endpoint.host if endpoint else "",
                    port=endpoint.port if endpoint else -1,
                    error_code=code,
                    error_message=message,
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=answers)

    def _find(self, key_type: int, key: str) -> Tuple[int, Optional[str], int]:
        """(error, message, coordinator node) for one key."""
        if key_type not in _KEY_TYPES:
            return _C.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1
        if key_type == 1 and not key:
            return _C.INVALID_REQUEST, "a transactional id cannot be empty", -1
        node = self.cluster.coordinator(key_type, key)
        if node < 0:
            return _C.GROUP_COORDINATOR_NOT_AVAILABLE, "no broker is running", -1
        return _C.NONE, None, node

    # ---------------------------------------------------------------- CreateTopics, DeleteTopics, CreatePartitions

    async def create_topics(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        version = request.api_version
        validate_only = version >= 1 and req.validate_only
        counts: Dict[str, int] = {}
        for topic in req.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        R = CreateTopicsResponse.CreatableTopicResult
        results = []
        for topic in req.topics:
            code: int
            message: Optional[str]
            if counts[topic.name] > 1:
                code, message, partitions = _C.INVALID_REQUEST, "topic named more than once in the request", 0
            else:
                code, message, partitions = self._check_new_topic(topic)
            if code == _C.NONE and not validate_only:
                self.cluster.create_topic(topic.name, partitions)
                if topic.replication_factor > 0:
                    self.cluster.set_replication(topic.name, topic.replication_factor)
                elif topic.assignments:
                    self.cluster.set_replication(topic.name, len(topic.assignments[0].broker_ids))
                self.topic_configs[topic.name] = {c.name: c.value for c in topic.configs}
            ok = code == _C.NONE
            results.append(
                R(
                    name=topic.name,
                    error_code=code,
                    error_message=message,
                    # Kafka names a topic id even for a validate-only creation (one never used).
                    topic_id=(self.topic_id(topic.name) if not validate_only else uuid.uuid4())
                    if ok
                    else uuid.UUID(int=0),
                    num_partitions=partitions if ok else -1,
                    replication_factor=self._factor(topic) if ok else -1,
                    configs=self._created_configs({c.name: c.value for c in topic.configs}) if ok else [],
                )
            )
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    def _check_new_topic(self, topic: object) -> Tuple[int, Optional[str], int]:
        name = topic.name  # type: ignore[attr-defined]
        if not valid_topic_name(name):
            return _C.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}", 0
        if name in self.cluster.topics:
            return _C.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists", 0
        if len(self.cluster.topics) >= self.cluster.max_topics:
            return _C.POLICY_VIOLATION, f"the broker holds its limit of {self.cluster.max_topics} topics", 0
        assignments = topic.assignments  # type: ignore[attr-defined]
        count = topic.num_partitions  # type: ignore[attr-defined]
        factor = topic.replication_factor  # type: ignore[attr-defined]
        if assignments:
            if count != -1 or factor != -1:
                return _C.INVALID_REQUEST, "give either assignments or a partition count and factor", 0
            if sorted(a.partition_index for a in assignments) != list(range(len(assignments))) or any(
                not self._valid_assignment(a.broker_ids, len(assignments[0].broker_ids)) for a in assignments
            ):
                return _C.INVALID_REPLICA_ASSIGNMENT, f"the brokers are {list(self.cluster.node_ids)}", 0
            count = len(assignments)
        if count == -1:
            count = self.cluster.default_partitions
        if count < 1:
            return _C.INVALID_PARTITIONS, f"{count} partitions: a topic needs at least one", 0
        if count > self.config.max_partitions_per_topic:
            return _C.INVALID_PARTITIONS, f"{count} partitions: the limit is {self.config.max_partitions_per_topic}", 0
        if factor != -1 and not 1 <= factor <= len(self.cluster.node_ids):
            return (
                _C.INVALID_REPLICATION_FACTOR,
                f"replication factor {factor}: this cluster has {len(self.cluster.node_ids)} broker(s)",
                0,
            )
        for config in topic.configs:  # type: ignore[attr-defined]
            if config.name not in self._topic_defaults():
                return _C.INVALID_CONFIG, f"unknown topic config {config.name!r}", 0
        return _C.NONE, None, count

    def _valid_assignment(self, broker_ids: Iterable[int], width: int) -> bool:
        """Replicas of one partition: distinct brokers of the cluster, as many as the first partition's."""
        ids = list(broker_ids)
        return len(ids) == width and len(set(ids)) == len(ids) and all(i in self.cluster.endpoints for i in ids)

    def _factor(self, topic: Any) -> int:
        """The replication factor a CreateTopics answer reports for a created topic."""
        if topic.replication_factor > 0:
            return int(topic.replication_factor)
        if topic.assignments:
            return len(topic.assignments[0].broker_ids)
        return self.cluster.replication_factor

    async def delete_topics(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        version = request.api_version
        asked: Iterable[Tuple[Optional[str], Optional[uuid.UUID]]] = (
            [(t.name, t.topic_id) for t in req.topics] if version >= 6 else [(n, None) for n in req.topic_names]
        )
        R = DeleteTopicsResponse.DeletableTopicResult
        results = []
        for name, topic_id in asked:
            if name is None and topic_id is not None:
                name = self._name_of(topic_id)
                if name is None:
                    results.append(
                        R(
                            name=None,
                            topic_id=topic_id,
                            error_code=_C.UNKNOWN_TOPIC_ID,
                            error_message="no topic has this id",
                        )
                    )
                    continue
            if name is None or name not in self.cluster.topics:
                results.append(
                    R(
                        name=name,
                        topic_id=topic_id or uuid.UUID(int=0),
                        error_code=_C.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message="no such topic",
                    )
                )
                continue
            tid = self._delete(name)
            results.append(R(name=name, topic_id=tid, error_code=_C.NONE))
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def create_partitions(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        R = CreatePartitionsResponse.CreatePartitionsTopicResult
        results = []
        for topic in req.topics:
            partitions = self.cluster.topics.get(topic.name)
            partitions_placed = self.cluster.placements.get(topic.name, [])
            code, message = _C.NONE, None
            if partitions is None:
                code, message = _C.UNKNOWN_TOPIC_OR_PARTITION, "no such topic"
            elif topic.count <= len(partitions):
                code, message = _C.INVALID_PARTITIONS, f"the topic already has {len(partitions)} partitions"
            elif topic.count > self.config.max_partitions_per_topic:
                code, message = _C.INVALID_PARTITIONS, f"the limit is {self.config.max_partitions_per_topic}"
            elif topic.assignments is not None and (
                len(topic.assignments) != topic.count - len(partitions)
                or any(
                    not self._valid_assignment(a.broker_ids, len(partitions_placed[0].replicas))
                    for a in topic.assignments
                )
            ):
                code, message = _C.INVALID_REPLICA_ASSIGNMENT, f"the brokers are {list(self.cluster.node_ids)}"
            if code == _C.NONE and not req.validate_only:
                self.cluster.add_partitions(topic.name, topic.count)
            results.append(R(name=topic.name, error_code=code, error_message=message))
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    # ---------------------------------------------------------------- DescribeConfigs, DescribeCluster

    def _topic_defaults(self) -> Dict[str, Tuple[str, int]]:
        """Topic config name → (default value, config type)."""
        return {
            "cleanup.policy": ("delete", _LIST),
            "compression.type": ("producer", _STRING),
            "max.message.bytes": (str(self.config.message_max_bytes), _INT),
            "message.timestamp.type": ("CreateTime", _STRING),
            "min.insync.replicas": (str(self.cluster.min_insync_replicas), _INT),
            "retention.bytes": ("-1", _LONG),
            "retention.ms": ("604800000", _LONG),
            "segment.bytes": ("1073741824", _INT),
        }

    def _broker_configs(self) -> Dict[str, Tuple[str, int]]:
        config = self.config
        return {
            "auto.create.topics.enable": (str(config.auto_create_topics).lower(), _BOOLEAN),
            "broker.id": (str(config.node_id), _INT),
            "fetch.max.bytes": (str(config.fetch_max_bytes), _INT),
            "group.max.session.timeout.ms": (str(config.coordinator.max_session_timeout_ms), _INT),
            "group.min.session.timeout.ms": (str(config.coordinator.min_session_timeout_ms), _INT),
            "max.connections": (str(config.max_connections), _INT),
            "message.max.bytes": (str(config.message_max_bytes), _INT),
            "num.partitions": (str(self.cluster.default_partitions), _INT),
            "offsets.topic.replication.factor": (str(self.cluster.replication_factor), _INT),
            "sasl.enabled.mechanisms": ("PLAIN" if config.sasl_plain_users else "", _LIST),
            "socket.request.max.bytes": (str(config.max_frame_size), _INT),
        }

    def _topic_rows(self, overrides: Mapping[str, Optional[str]]) -> List[Tuple[str, Optional[str], int, int, bool]]:
        """A topic's configs as (name, value, source, type, read only): defaults unless CreateTopics set them."""
        rows = []
        for name, (default, kind) in self._topic_defaults().items():
            changed = name in overrides
            rows.append(
                (name, overrides[name] if changed else default, _DYNAMIC_TOPIC if changed else _DEFAULT, kind, False)
            )
        return rows

    def _created_configs(self, overrides: Mapping[str, Optional[str]]) -> List[Any]:
        K = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
        return [
            K(name=n, value=v, read_only=ro, config_source=s, is_sensitive=False)
            for n, v, s, _, ro in self._topic_rows(overrides)
        ]

    async def describe_configs(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        version = request.api_version
        R = DescribeConfigsResponse.DescribeConfigsResult
        C = R.DescribeConfigsResourceResult
        results = []
        for resource in req.resources:
            keys = list(resource.configuration_keys) if resource.configuration_keys else None  # null or []: all
            rows: List[Tuple[str, Optional[str], int, int, bool]] = []
            code, message = _C.NONE, None
            if resource.resource_type == _TOPIC_RESOURCE:
                if resource.resource_name not in self.cluster.topics:
                    code, message = _C.UNKNOWN_TOPIC_OR_PARTITION, "no such topic"
                else:
                    rows = self._topic_rows(self.topic_configs.get(resource.resource_name, {}))
            elif resource.resource_type == _BROKER_RESOURCE:
                if resource.resource_name not in ["", *map(str, self.cluster.node_ids)]:
                    code, message = _C.INVALID_REQUEST, f"this cluster's brokers are {list(self.cluster.node_ids)}"
                else:
                    rows = [
                        (name, value, _STATIC_BROKER, kind, True)
                        for name, (value, kind) in self._broker_configs().items()
                    ]
            else:
                code, message = _C.INVALID_REQUEST, f"resource type {resource.resource_type} is not served"
            configs = [
                C(
                    name=name,
                    value=value,
                    read_only=read_only,
                    config_source=source,
                    is_default=version == 0 and source == _DEFAULT,
                    is_sensitive=False,
                    synonyms=[],
                    config_type=kind,
                    documentation=None,
                )
                for name, value, source, kind, read_only in rows
                if keys is None or name in keys
            ]
            results.append(
                R(
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=configs,
                )
            )
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def describe_cluster(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req: Any = request.message
        B = DescribeClusterResponse.DescribeClusterBroker
        endpoint = req.endpoint_type if request.api_version >= 1 else 1
        if endpoint != 1:  # 1: brokers; 2: controllers, which a client reaches only through KRaft
            return DescribeClusterResponse(
                throttle_time_ms=0,
                error_code=_C.UNSUPPORTED_ENDPOINT_TYPE,
                error_message="only broker endpoints are served",
                endpoint_type=endpoint,
                cluster_id=self.config.cluster_id,
                controller_id=-1,
                brokers=[],
            )
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=_C.NONE,
            endpoint_type=1,
            cluster_id=self.config.cluster_id,
            controller_id=self._controller(),
            brokers=[
                B(broker_id=n, host=e.host, port=e.port, rack=None, is_fenced=False) for n, e in self._live_endpoints()
            ],
            cluster_authorized_operations=_CLUSTER_OPERATIONS
            if req.include_cluster_authorized_operations
            else _OMITTED,
        )

    #: The control plane's share of the served table: api key → (versions, handler).
    API_TABLE: ApiTable = {
        3: ((0, 13), metadata),
        10: ((0, 6), find_coordinator),  # GroupCoordinator before v1
        18: ((0, 4), api_versions),
        19: ((0, 7), create_topics),
        20: ((0, 6), delete_topics),
        32: ((0, 4), describe_configs),
        37: ((0, 3), create_partitions),
        60: ((0, 2), describe_cluster),
    }


#: The versions this module answers, by api key.
CONTROL_PLANE_VERSIONS: VersionTable = versions_of(ControlPlane.API_TABLE)
