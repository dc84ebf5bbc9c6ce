"""The one mechanism kproto's protocol state machines share: a transition table and the refusal of a
move it does not list.

Why a module of its own: the connection machines (:mod:`kproto.connection.client`,
:mod:`kproto.connection.server`) and the group machines (:mod:`kproto.group.member`, the groups of
:mod:`kproto.group.coordinator`) keep their *rules* as tables of ``(state, event) → next state``
next to their theory of operation; the code that applies a table is the same for all four and lives
here, once.  Like h11's state module, it knows no role: the rules are data, and this module only
looks them up.

Two rules it keeps:

1. A pair missing from the table is a refusal, never a silent no-op.  The state does not change.
2. Whoever asks for a move says whose fault a refusal is.  A move the *caller* requested (send, answer,
   close) is refused with :class:`~kproto.errors.LocalProtocolError`; a move forced by what the *peer*
   sent is refused with :class:`~kproto.errors.RemoteProtocolError`.  Both are
   :class:`~kproto.errors.ProtocolError`, so code that catches the base keeps working.

Sans-I/O: no sockets, clocks or threads; a machine is a value that callers move.
"""

from __future__ import annotations

import enum
from typing import Callable, Generic, Mapping, Optional, Tuple, Type, TypeVar

from kproto.errors import LocalProtocolError, ProtocolError

__all__ = ["StateMachine", "Transitions"]

S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)

#: (state, event) → next state.  A pair that is not there is a move the rules forbid.
Transitions = Mapping[Tuple[S, E], S]


def _default_refusal(name: str, state: enum.Enum, event: enum.Enum) -> str:
    return f"{name}: no transition for {event.name} in {state.name}"


class StateMachine(Generic[S, E]):
    """The current state of one machine over its transition table.

    ``name`` says which machine a refusal is about; ``refusal(state, event)`` words it (by default
    "<name>: no transition for EVENT in STATE").
    """

    __slots__ = ("table", "state", "name", "_refusal")

    def __init__(
        self, table: "Transitions[S, E]", initial: S, name: str, refusal: Optional[Callable[[S, E], str]] = None
    ) -> None:
        self.table = table
        self.state = initial
        self.name = name
        self._refusal = refusal

    def allows(self, event: E) -> bool:
        """Whether ``event`` is a legal move from the current state."""
        return (self.state, event) in self.table

    def fire(self, event: E, error: Type[ProtocolError] = LocalProtocolError) -> S:
        """Move on ``event`` and return the new state; a move the table does not list raises ``error``
        (the caller's misuse unless the move was the peer's) and leaves the state as it was."""
        try:
            self.state = self.table[(self.state, event)]
        except KeyError:
            message = (
                self._refusal(self.state, event)
                if self._refusal is not None
                else _default_refusal(self.name, self.state, event)
            )
            raise error(message) from None
        return self.state
