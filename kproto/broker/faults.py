"""Fault injection for the mock broker: per api key, answer an error code, delay, or drop the connection.

A :class:`Fault` applies to the next ``times`` requests of one api (``times=None``: until removed), in
any version the broker reads, optionally only to requests that name one topic (and partition).  Faults
of one api are used in the order they were injected; each counts the requests it ``fired`` on.  A
targeted fault answers the whole request that names its target (every partition of it gets the error),
which keeps a faulted Produce from storing anything.  :class:`FaultPlan` is shared between the thread
that injects and the broker's event loop, hence the lock.  Unknown api names and error names are
refused with the list of valid ones.

A ``delay`` is a latency, not a stall: a faulted request is answered no sooner than ``delay`` seconds
after it arrived, so requests a client pipelines wait out their delays together, as they would on a
slow network or a busy broker (responses still leave in request order).

:func:`error_response` builds the response a broker sends when ``code`` applies to everything a request
asks about, for any api: it folds the request into the groups, topics and partitions it names
(:func:`kproto.message_facts.scope_tree`, which reads the specs' entity types) and mirrors them into the
response class's ``FIELDS``:

* every ``errorCode`` field, at every level, is ``code``;
* an array whose elements carry a ``groupId``/``topicName``/``partitionIndex`` field gets one element per
  group/topic/partition the request named at that level (so Produce answers per partition, Metadata per
  topic, DescribeGroups per group); other arrays are empty;
* a ``groupId``/``topicName``/``partitionIndex``/``transactionalId``/``producerId`` field repeats the request's
  value for its scope; a ``brokerId`` field is -1 (no broker), as Kafka answers when it has none to name;
* a nullable struct stays null; everything else keeps the class default.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from kproto import ErrorCode
from kproto.apis import APIS
from kproto.message_base import Message
from kproto.message_facts import (
    BROKER,
    ERROR,
    PARTITION,
    SCOPE_ENTITIES,
    TOPIC,
    Scope,
    entities,
    scope_tree,
    struct_has_entity,
)

__all__ = ["Fault", "FaultPlan", "error_code", "error_response"]


@dataclass
class Fault:
    """What to do to requests of ``api_key`` (naming ``topic``/``partition`` when set): answer no sooner
    than ``delay`` seconds after arrival, then drop the connection (``drop``), answer ``error`` (an error
    code) instead of handling the request, or handle it.  ``fired`` counts the requests it applied to;
    ``times`` is how many more it will apply to (None: no limit)."""

    api_key: int
    error: Optional[int] = None
    delay: float = 0.0
    drop: bool = False
    times: Optional[int] = 1
    topic: Optional[str] = None
    partition: Optional[int] = None
    fired: int = 0

    def matches(self, request: Message, version: Optional[int]) -> bool:
        """Whether ``request`` names this fault's topic (and partition)."""
        if self.topic is None:
            return True
        for entity in entities(request, version):
            if self.partition is None:
                if entity.kind == TOPIC and entity.value == self.topic:
                    return True
            elif entity.kind == PARTITION and entity.topic == self.topic and entity.value == self.partition:
                return True
        return False


def error_code(error: Union[int, str]) -> int:
    """``error`` (a code or a name such as ``"NOT_LEADER_FOR_PARTITION"``) as a known error code; anything
    else is a ValueError listing the valid names."""
    if isinstance(error, str) and error in ErrorCode.__members__:
        return int(ErrorCode[error])
    if not isinstance(error, str) and int(error) in ErrorCode._value2member_map_:
        return int(error)
    valid = ", ".join(code.name for code in ErrorCode)
    raise ValueError(f"unknown Kafka error {error!r}; known errors: {valid}")


class FaultPlan:
    """The faults waiting to fire, per api key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: Dict[int, List[Fault]] = {}
        #: Api key → requests a fault applied to so far.
        self.fired: Dict[int, int] = {}

    def inject(
        self,
        api: Union[int, str],
        *,
        error: Union[None, int, str] = None,
        delay: float = 0.0,
        drop: bool = False,
        times: Optional[int] = 1,
        topic: Optional[str] = None,
        partition: Optional[int] = None,
    ) -> Fault:
        """Add a fault for ``api`` (an api key or a name such as ``"Produce"``; an unknown one is a
        KeyError listing the valid names); ``error`` is a code or an error name."""
        info = APIS[api]
        code = None if error is None else error_code(error)
        if code is None and not drop and delay <= 0:
            raise ValueError("a fault needs an error, a delay or drop=True")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (or None for every request)")
        if partition is not None and topic is None:
            raise ValueError("a partition is targeted with its topic")
        fault = Fault(info.api_key, code, float(delay), drop, times, topic, partition)
        with self._lock:
            self._faults.setdefault(info.api_key, []).append(fault)
        return fault

    def take(self, api_key: int, request: Optional[Message] = None, version: Optional[int] = None) -> Optional[Fault]:
        """The first fault of ``api_key`` that applies to ``request`` (any, when None), counted as fired."""
        with self._lock:
            faults = self._faults.get(api_key)
            if not faults:
                return None
            for fault in faults:
                if request is None or fault.matches(request, version):
                    break
            else:
                return None
            fault.fired += 1
            self.fired[api_key] = self.fired.get(api_key, 0) + 1
            if fault.times is not None:
                fault.times -= 1
                if fault.times == 0:
                    faults.remove(fault)
            return fault

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults.clear()


def error_response(api_key: int, request: Message, code: int, version: Optional[int] = None) -> Message:
    """The response to ``request`` in which ``code`` applies everywhere (see the module docstring).

    ``version``: the version it will be encoded in; fields that version cannot carry keep their defaults
    (an encoder refuses a value in a field its version lacks).  None fills every field, which suits only
    messages whose fields all span every version.
    """
    if api_key not in APIS:
        raise ValueError(f"no error response for api key {api_key}")
    return _mirror(APIS[api_key].response, [scope_tree(request, version)], code, version)


def _find(scope: Scope, kind: str) -> List[Scope]:
    """The scopes of ``kind`` nearest below ``scope`` (not below another scope of that kind)."""
    found: List[Scope] = []
    for child in scope.children:
        if child.kind == kind:
            found.append(child)
        else:
            found += _find(child, kind)
    return found


def _chains(scope: Scope, kinds: List[str]) -> List[List[Scope]]:
    """Nested scopes below ``scope`` matching ``kinds`` in order: a struct with a topic and a partition
    field gets one element per partition of each topic."""
    if not kinds:
        return [[]]
    return [[s] + rest for s in _find(scope, kinds[0]) for rest in _chains(s, kinds[1:])]


def _value(path: List[Scope], kind: str) -> Any:
    """The request's value of entity ``kind`` for the innermost scope of ``path`` that has one."""
    for scope in reversed(path):
        if scope.kind == kind:
            return scope.value
        if kind in scope.values:
            return scope.values[kind]
    return None


def _mirror(cls: Any, path: List[Scope], code: int, version: Optional[int]) -> Any:
    kwargs: Dict[str, Any] = {}
    for info in cls.FIELDS:
        if version is not None and not info.versions[0] <= version <= info.versions[1]:
            continue
        if info.struct is not None:
            if not info.is_array:
                if info.nullable_versions is None or (
                    version is not None and not info.nullable_versions[0] <= version <= info.nullable_versions[1]
                ):
                    kwargs[info.name] = _mirror(info.struct, path, code, version)
                continue  # a nullable struct (a cursor, a leader hint) stays null in an error response
            kinds = [k for k in SCOPE_ENTITIES if struct_has_entity(info.struct, k)]
            chains = _chains(path[-1], kinds) if kinds else []
            kwargs[info.name] = [_mirror(info.struct, path + chain, code, version) for chain in chains]
        elif info.is_array:
            continue
        elif info.entity_type == ERROR:
            kwargs[info.name] = code
        elif info.entity_type == BROKER:
            kwargs[info.name] = -1
        elif info.entity_type is not None:
            value = _value(path, info.entity_type)
            if value is not None:
                kwargs[info.name] = value
    return cls(**kwargs)
