"""How a Kafka connection ends: the part of the transition table both sides share.

A client connection and a server connection differ in what they carry (one sends requests and reads
responses, the other the reverse), but they end the same way, so that rule is written here once:

* in every live state, the peer closing (``PEER_CLOSED``) or the caller closing (``CLOSE``) moves the
  connection to ``CLOSED``, and a rule broken by the peer (``VIOLATION``) moves it to ``FAILED``;
* ``CLOSED`` and ``FAILED`` take nothing but ``CLOSE``, which leaves them as they are (closing twice is
  harmless; a failed connection stays failed).

Both sides also word a refused move the same way (:func:`connection_machine`).

Each side's module writes only its traffic: the matrix of the events that carry requests and responses
× its live states.
"""

from __future__ import annotations

import enum
from typing import Dict, Tuple, Type, TypeVar

from kproto.state_machine import StateMachine, Transitions, read_matrix

__all__ = ["ENDED_STATES", "ENDING_EVENTS", "connection_transitions", "connection_machine"]

S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)

#: The states a connection ends in, by name; every other state is live.
ENDED_STATES = ("CLOSED", "FAILED")
#: The events that end a connection, by name; every other event is traffic.
ENDING_EVENTS = ("PEER_CLOSED", "CLOSE", "VIOLATION")


def connection_transitions(states: Type[S], events: Type[E], traffic: str) -> Dict[Tuple[S, E], S]:
    """The whole transition table of one side of a connection.

    ``traffic`` is a matrix (:func:`kproto.state_machine.read_matrix`) with one row per traffic event and
    one column per live state, each cell the next state or ``-``; ``states`` and ``events`` must
    have the members :data:`ENDED_STATES` and :data:`ENDING_EVENTS` name.  The ending (the module
    docstring) is added for every live state.
    """
    live = {name: state for name, state in states.__members__.items() if name not in ENDED_STATES}
    carried = {name: event for name, event in events.__members__.items() if name not in ENDING_EVENTS}
    table = {
        (state, event): target
        for (event, state), target in read_matrix(traffic, carried, live, states.__members__, states.__name__).items()
    }
    closed, failed = states["CLOSED"], states["FAILED"]
    peer_closed, close, violation = (events[name] for name in ENDING_EVENTS)
    for state in live.values():
        table[(state, peer_closed)] = closed
        table[(state, close)] = closed
        table[(state, violation)] = failed
    table[(closed, close)] = closed
    table[(failed, close)] = failed
    return table


def connection_machine(table: "Transitions[S, E]", initial: S, name: str) -> StateMachine[S, E]:
    """A connection's :class:`~kproto.state_machine.StateMachine` over ``table``, refusing a move with
    "<what the event is>: not allowed while the connection is <STATE>"."""
    return StateMachine(table, initial, name, _refusal)


def _refusal(state: enum.Enum, event: enum.Enum) -> str:
    return f"{event.value}: not allowed while the connection is {state.name}"
