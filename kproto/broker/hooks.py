"""Per-request hooks and per-broker latency: a test sees every request, typed, and decides its fate.

A hook is a callable given an :class:`InterceptedRequest` (the node that received it, the api, the
version, the decoded ``kproto.messages`` request and the client id) that returns None -- handle the
request as usual -- or an :class:`Intercept`: answer no sooner than ``delay`` seconds after arrival,
then answer ``error`` everywhere in the response (as :func:`kproto.broker.faults.error_response`
builds it), answer ``response`` as given, ``close`` the connection, or ``drop`` the request (no
answer; the connection answers nothing more, as a broker that hangs, until the client gives up and
closes it).  Hooks run in the order added, on the broker's loop; the first that returns an intercept
decides.  A hook that raises is logged (logger ``kproto.broker``) and its request answered
UNKNOWN_SERVER_ERROR (code -1), as Kafka answers a request whose handler failed: never a hung
connection.

Why beside :mod:`kproto.broker.faults` rather than in it: a fault is declared up front (api, topic,
count); a hook decides per request with the request in hand, which is what tests of leader moves and
coordinator failover need (fail the third Produce to node 1, delay only JoinGroup, ...).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Union

from kproto import ErrorCode
from kproto.broker.faults import error_code
from kproto.message_base import Message

__all__ = ["Hook", "Intercept", "InterceptedRequest", "RequestHooks"]

log = logging.getLogger("kproto.broker")


@dataclass(frozen=True)
class InterceptedRequest:
    """One request as a hook sees it."""

    node_id: int
    api_key: int
    api_name: str
    api_version: int
    request: Message
    client_id: Optional[str]
    correlation_id: int


@dataclass(frozen=True)
class Intercept:
    """What a hook does to a request (see the module docstring); ``error`` is a code or a name."""

    delay: float = 0.0
    error: Union[None, int, str] = None
    response: Optional[Message] = None
    close: bool = False
    drop: bool = False

    def __post_init__(self) -> None:
        if self.delay < 0:
            raise ValueError(f"delay {self.delay} is negative")
        if self.error is not None:
            error_code(self.error)  # an unknown name fails here, where the test wrote it
        if sum((self.error is not None, self.response is not None, self.close, self.drop)) > 1:
            raise ValueError("an intercept answers an error, answers a response, closes or drops: one of them")

    @property
    def code(self) -> Optional[int]:
        """``error`` as a code."""
        return None if self.error is None else error_code(self.error)


#: A request hook: None to handle the request as usual.
Hook = Callable[[InterceptedRequest], Optional[Intercept]]

_HOOK_FAILED = Intercept(error=int(ErrorCode.UNKNOWN))


class RequestHooks:
    """The hooks and per-node latencies every listener of one mock cluster consults; safe to change
    from any thread while the brokers run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: List[Hook] = []
        #: Node id → seconds every answer of that node waits after its request arrived.
        self.latency: Dict[int, float] = {}

    def add(self, hook: Hook) -> Hook:
        with self._lock:
            self._hooks = self._hooks + [hook]
        return hook

    def remove(self, hook: Hook) -> None:
        with self._lock:
            self._hooks = [h for h in self._hooks if h is not hook]

    def clear(self) -> None:
        with self._lock:
            self._hooks = []

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def run(self, request: InterceptedRequest) -> Optional[Intercept]:
        """The first intercept a hook returns for ``request`` (UNKNOWN_SERVER_ERROR when one raises)."""
        for hook in self._hooks:
            try:
                outcome = hook(request)
            except Exception:  # noqa: BLE001 - a test's hook bug answers one request, never hangs it
                log.exception(
                    "request hook %r failed on %s v%d to broker %d; answering UNKNOWN_SERVER_ERROR",
                    hook,
                    request.api_name,
                    request.api_version,
                    request.node_id,
                )
                return _HOOK_FAILED
            if outcome is not None:
                if not isinstance(outcome, Intercept):
                    log.error(
                        "request hook %r returned %r, not an Intercept or None; answering UNKNOWN_SERVER_ERROR",
                        hook,
                        outcome,
                    )
                    return _HOOK_FAILED
                return outcome
        return None
