"""kproto.state_machine: the transition mechanism the four protocol machines share, whose fault a
refused move is (LocalProtocolError: the caller's; RemoteProtocolError: the peer's), and the matrices
the tables are written as."""

from __future__ import annotations

import enum

import pytest

from kproto.connection import ClientConnection, ServerConnection
from kproto.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from kproto.framing import encode_response
from kproto.messages import ApiVersionsRequest, ApiVersionsResponse, MetadataResponse
from kproto.connection import ClientEvent, ClientState, ServerEvent, ServerState
from kproto.connection.lifecycle import connection_transitions
from kproto.state_machine import (
    MatrixError,
    StateMachine,
    names_of,
    read_matrix,
    transitions_by_event,
    transitions_by_state,
)


class Light(enum.Enum):
    OFF = "off"
    ON = "on"


class Press(enum.Enum):
    SWITCH_ON = "switch on"
    SWITCH_OFF = "switch off"


TABLE = {(Light.OFF, Press.SWITCH_ON): Light.ON, (Light.ON, Press.SWITCH_OFF): Light.OFF}


def test_a_listed_move_changes_the_state() -> None:
    machine = StateMachine(TABLE, Light.OFF, "lamp")
    assert machine.allows(Press.SWITCH_ON) and not machine.allows(Press.SWITCH_OFF)
    assert machine.fire(Press.SWITCH_ON) is Light.ON and machine.state is Light.ON


def test_an_unlisted_move_is_refused_and_the_state_stays() -> None:
    machine = StateMachine(TABLE, Light.OFF, "lamp")
    with pytest.raises(LocalProtocolError, match="lamp: no transition for SWITCH_OFF in OFF"):
        machine.fire(Press.SWITCH_OFF)
    with pytest.raises(RemoteProtocolError):
        machine.fire(Press.SWITCH_OFF, RemoteProtocolError)
    assert machine.state is Light.OFF


def test_both_refusals_are_protocol_errors() -> None:
    assert issubclass(LocalProtocolError, ProtocolError) and issubclass(RemoteProtocolError, ProtocolError)
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    worded = StateMachine(TABLE, Light.ON, "lamp", lambda state, event: f"{event.value} while {state.value}")
    with pytest.raises(ProtocolError, match="switch on while on"):
        worded.fire(Press.SWITCH_ON)


LAMP = """
         SWITCH_ON  SWITCH_OFF
    OFF  ON         -
    ON   -          OFF
"""


def test_a_matrix_reads_as_the_table_it_prints() -> None:
    assert transitions_by_state(Light, Press, LAMP) == TABLE
    transposed = """
                    OFF  ON
        SWITCH_ON   ON   -
        SWITCH_OFF  -    OFF
    """
    assert transitions_by_event(Light, Press, transposed) == TABLE


def test_a_wide_matrix_reads_in_parts() -> None:
    parts = """
             SWITCH_ON
        OFF  ON
        ON   -

             SWITCH_OFF
        OFF  -
        ON   OFF
    """
    assert transitions_by_state(Light, Press, parts) == TABLE


@pytest.mark.parametrize(
    "matrix, complaint",
    [
        (LAMP.replace("SWITCH_OFF", "SWITCH_UP"), "Light: unknown column 'SWITCH_UP'"),
        (LAMP.replace("ON   -          OFF", "DIM  -          OFF"), "Light: unknown row 'DIM'"),
        (LAMP.replace("OFF  ON         -", "OFF  ON         DIM"), "Light: unknown cell 'DIM'"),
        (LAMP.replace("OFF  ON         -", "OFF  ON"), "Light: row OFF has 1 cells for 2 columns"),
        (LAMP + "\n    SWITCH_ON\n    OFF  OFF\n", "Light: the cell Light.OFF × Press.SWITCH_ON is written twice"),
        (LAMP.replace("    ON   -          OFF\n", ""), "Light: no cell for Light.ON × Press.SWITCH_OFF, Light.ON × "),
    ],
)
def test_a_matrix_that_does_not_read_is_refused(matrix: str, complaint: str) -> None:
    with pytest.raises(MatrixError, match=complaint.replace(".", "\\.")):
        transitions_by_state(Light, Press, matrix)


def test_cells_from_several_enums_must_not_share_a_name() -> None:
    class Dial(enum.Enum):
        ON = "the dial's on"

    assert names_of(Light, Press)["SWITCH_ON"] is Press.SWITCH_ON
    with pytest.raises(MatrixError, match="ON is a member of both Light and Dial"):
        names_of(Light, Dial)
    table = read_matrix(LAMP, Light.__members__, Press.__members__, names_of(Light, Press), "lamp")
    assert table == TABLE


@pytest.mark.parametrize(
    "states, events, live",
    [(ClientState, ClientEvent, "IDLE AWAITING FULL"), (ServerState, ServerEvent, "IDLE OWING")],
)
def test_both_sides_of_a_connection_end_alike(states: type, events: type, live: str) -> None:
    traffic = "\n".join(
        [live]
        + [
            f"{event.name} " + " ".join("-" for _ in live.split())
            for event in events
            if event.name not in ("PEER_CLOSED", "CLOSE", "VIOLATION")
        ]
    )
    table = connection_transitions(states, events, traffic)
    ending = {
        **{(states[name], events.PEER_CLOSED): states.CLOSED for name in live.split()},
        **{(states[name], events.CLOSE): states.CLOSED for name in live.split()},
        **{(states[name], events.VIOLATION): states.FAILED for name in live.split()},
        (states.CLOSED, events.CLOSE): states.CLOSED,
        (states.FAILED, events.CLOSE): states.FAILED,
    }
    assert table == ending


def test_the_client_connection_blames_the_caller_for_sending_after_close() -> None:
    client = ClientConnection()
    client.close()
    with pytest.raises(LocalProtocolError):
        client.send(ApiVersionsRequest(), 0)


def test_the_client_connection_blames_the_peer_for_an_unasked_response() -> None:
    client = ClientConnection()
    with pytest.raises(RemoteProtocolError):
        client.receive_data(encode_response(MetadataResponse(), 0, 7))


def test_the_server_connection_blames_the_caller_for_answering_twice() -> None:
    server = ServerConnection()
    sent = ClientConnection().send(ApiVersionsRequest(), 0)
    (request,) = server.receive_data(sent.frame)
    server.send_response(request, ApiVersionsResponse())
    with pytest.raises(LocalProtocolError):
        server.send_response(request, ApiVersionsResponse())
