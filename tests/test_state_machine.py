"""kproto.state_machine: the transition mechanism the four protocol machines share, and whose fault a
refused move is (LocalProtocolError: the caller's; RemoteProtocolError: the peer's)."""

from __future__ import annotations

import enum

import pytest

from kproto.connection import ClientConnection, ServerConnection
from kproto.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from kproto.framing import encode_response
from kproto.messages import ApiVersionsRequest, ApiVersionsResponse, MetadataResponse
from kproto.state_machine import StateMachine


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
