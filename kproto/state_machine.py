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

A table is written as a matrix, one row per state and one column per event (or the transpose, where
that reads better), the way a protocol specification prints one: :func:`transitions_by_state` and
:func:`transitions_by_event` read it into the mapping a :class:`StateMachine` looks moves up in, and
:func:`read_matrix` reads any other two-key table the same way.  Every cell is written, ``-`` for a
refused move, so a reader sees at a glance what a state refuses, and a cell left out is an error at
import rather than a silent refusal.

Sans-I/O: no sockets, clocks or threads; a machine is a value that callers move.
"""

from __future__ import annotations

import enum
from typing import Callable, Dict, Generic, List, Mapping, Optional, Set, Tuple, Type, TypeVar

from kproto.errors import KprotoError, LocalProtocolError, ProtocolError

__all__ = [
    "StateMachine",
    "Transitions",
    "MatrixError",
    "read_matrix",
    "transitions_by_state",
    "transitions_by_event",
    "REFUSED",
    "names_of",
]

S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)
R = TypeVar("R")
C = TypeVar("C")
V = TypeVar("V")

#: The cell of a matrix that says "no entry": a move the rules refuse.
REFUSED = "-"

#: (state, event) → next state.  A pair that is not there is a move the rules forbid.
Transitions = Mapping[Tuple[S, E], S]


class MatrixError(KprotoError, ValueError):
    """A table written as a matrix that does not read: an unknown name, a row of the wrong width, or a
    cell written twice or not at all.  Raised where the table is defined, when its module is imported."""


def read_matrix(
    text: str, rows: Mapping[str, R], columns: Mapping[str, C], cells: Mapping[str, V], name: str
) -> Dict[Tuple[R, C], V]:
    """Read a two-key table written as a matrix into ``{(row, column): value}``.

    ``text`` is one or more blocks separated by blank lines (a matrix too wide for one line is printed in
    parts).  A block's first line names its columns; each further line is a row name followed by one cell
    per column, separated by white space.  A cell names a value of ``cells``, or is :data:`REFUSED`
    (``-``): no entry.  ``rows``, ``columns`` and ``cells`` map the names written to the keys and values
    (an enum's ``__members__`` fits).  Every row × column cell must be written exactly once across the
    blocks; anything else raises :class:`MatrixError` naming the table (``name``) and the place.
    """
    table: Dict[Tuple[R, C], V] = {}
    written: Set[Tuple[R, C]] = set()
    blocks: List[List[List[str]]] = [[]]
    for line in text.splitlines():
        words = line.split()
        if words:
            blocks[-1].append(words)
        elif blocks[-1]:
            blocks.append([])
    for block in blocks:
        if not block:
            continue
        header = [_look_up(columns, word, name, "column") for word in block[0]]
        for words in block[1:]:
            row = _look_up(rows, words[0], name, "row")
            if len(words) != len(header) + 1:
                raise MatrixError(f"{name}: row {words[0]} has {len(words) - 1} cells for {len(header)} columns")
            for column, word in zip(header, words[1:]):
                if (row, column) in written:
                    raise MatrixError(f"{name}: the cell {row} × {column} is written twice")
                written.add((row, column))
                if word != REFUSED:
                    table[(row, column)] = _look_up(cells, word, name, "cell")
    missing = sorted(
        f"{row} × {column}"
        for row in set(rows.values())
        for column in set(columns.values())
        if (row, column) not in written
    )
    if missing:
        raise MatrixError(f"{name}: no cell for {', '.join(missing)}")
    return table


def _look_up(names: Mapping[str, V], word: str, name: str, what: str) -> V:
    try:
        return names[word]
    except KeyError:
        raise MatrixError(f"{name}: unknown {what} {word!r}") from None


def names_of(*enums: Type[enum.Enum]) -> Dict[str, enum.Enum]:
    """The members of several enums by name, for a matrix whose cells may be any of them; a name two of
    them share would make a cell ambiguous, and raises :class:`MatrixError`."""
    names: Dict[str, enum.Enum] = {}
    for kind in enums:
        for word, member in kind.__members__.items():
            if word in names:
                raise MatrixError(f"{word} is a member of both {type(names[word]).__name__} and {kind.__name__}")
            names[word] = member
    return names


def transitions_by_state(states: Type[S], events: Type[E], matrix: str) -> Dict[Tuple[S, E], S]:
    """Read a transition table written one row per state, one column per event (see :func:`read_matrix`);
    a cell is the state the event moves to, or ``-`` where the state refuses the event."""
    return read_matrix(matrix, states.__members__, events.__members__, states.__members__, states.__name__)


def transitions_by_event(states: Type[S], events: Type[E], matrix: str) -> Dict[Tuple[S, E], S]:
    """The same as :func:`transitions_by_state` for a matrix written one row per event, one column per
    state (the narrower layout when there are more events than states, or longer state names)."""
    table = read_matrix(matrix, events.__members__, states.__members__, states.__members__, states.__name__)
    return {(state, event): target for (event, state), target in table.items()}


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
