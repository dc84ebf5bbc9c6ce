"""Fuzz harness: the mock broker's request handling (``ServerConnection`` + ``BrokerCore``), no sockets.

The input is what a client sends on one connection: any number of request frames, fed to a fresh
``ServerConnection`` in chunks (byte 0 of the input picks the chunk size; the rest is the stream).  Each
decoded request goes to a fresh ``BrokerCore`` (topic ``test`` with 2 partitions, one message already
appended, auto-creation on), on one connection, in order, the way ``BrokerServer`` drives them; the
group coordinator keeps its state across the requests of one input, so sequences of JoinGroup /
SyncGroup / Heartbeat / OffsetCommit reach its state machine.  Fetch long polls are cut to 0 ms and a
request the coordinator parks (waiting for other members) ends the input after 5 ms, since responses go
out in order.

Oracles: ``receive_data`` raises only ``KprotoError`` (a broken size prefix); ``handle`` raises only
``ProtocolError``, and only for api keys outside the broker's served table (it closes the connection);
every api key and version the table advertises is answered (SaslHandshake and SaslAuthenticate by a
per-connection :class:`~kproto.broker.sasl.SaslSession`, as the server does) (a readable version outside it with
UNSUPPORTED_VERSION); an ApiVersions request in a version nobody can read gets the v0 fallback; every answer
encodes (``send_response``), decodes again with ``decode_response`` for the request's api and version
and equals the message the handler built; an ``acks=0`` Produce gets no answer and every other request
one.  The broker's own budgets hold (docs/reliability.md): a Fetch answer carries at most
``fetch_max_bytes`` of records, a Produce decompresses at most ``produce_decompression_budget``, a
Metadata answer lists each topic once and the cluster never holds more than ``max_topics``.  Budget:
64·n + 1 MiB, 1 s CPU.

    python fuzz/fuzz_broker_requests.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.oracles import Budget, fail, known_issue, message_value, outcome  # noqa: E402

NAME = "broker_requests"
PARK_TIMEOUT_S = 0.005
# A compressed Produce is appended on a worker thread: give it time to come back.
PRODUCE_TIMEOUT_S = 1.0
FETCH_MAX_BYTES = 1 << 17
DECOMPRESSION_BUDGET = 1 << 18
MAX_TOPICS = 64
_env = None


def setup() -> None:
    global _env
    from kproto.broker.config import BrokerConfig
    from kproto.broker.core import BrokerCore
    from kproto.connection.server import BadRequest, ClientClosed, RequestReceived, ServerConnection
    from kproto.errors import KprotoError, ProtocolError
    from kproto.framing import decode_response
    from kproto.records import encode_message_set

    _env = dict(
        BrokerConfig=BrokerConfig,
        BrokerCore=BrokerCore,
        BadRequest=BadRequest,
        ClientClosed=ClientClosed,
        RequestReceived=RequestReceived,
        ServerConnection=ServerConnection,
        KprotoError=KprotoError,
        ProtocolError=ProtocolError,
        decode_response=decode_response,
        preload=encode_message_set([(b"k", b"v")]),
        loop=asyncio.new_event_loop(),
    )


def new_core():
    e = _env
    core = e["BrokerCore"](
        e["BrokerConfig"](
            max_frame_size=1 << 20,
            max_fetch_bytes=1 << 16,
            fetch_max_bytes=FETCH_MAX_BYTES,
            produce_decompression_budget=DECOMPRESSION_BUDGET,
            max_topics=MAX_TOPICS,
        )
    )
    core.bind("127.0.0.1", 9092)
    core.cluster.create_topic("test", 2)
    return core


def one_input(data: bytes) -> None:
    if _env is None:
        setup()
    if not data:
        return
    with Budget(len(data), what="mock broker", data=data):
        _env["loop"].run_until_complete(_session(data))


async def _session(data: bytes) -> None:
    e = _env
    core = new_core()
    from kproto.broker.sasl import SaslSession

    core.fuzz_sasl = SaslSession({"test": "test"})  # SASL is per connection, answered beside the core
    conn = e["ServerConnection"](max_frame_size=1 << 20)
    step = 1 + data[0] * 4
    stream = data[1:]
    for at in range(0, len(stream), step):
        res = outcome(
            conn.receive_data,
            stream[at : at + step],
            allowed=(e["KprotoError"],),
            what="ServerConnection.receive_data",
            data=data,
        )
        if res[0] == "error":
            return
        for event in res[1]:
            if isinstance(event, e["BadRequest"]):
                if _fallback(core, event, data):
                    continue  # answered in the v0 layout; the connection goes on
                return  # the server answers what came before, then closes
            if not await _answer(core, conn, event, data):
                return
    outcome(conn.receive_data, b"", allowed=(e["KprotoError"],), what="receive_data(b'')", data=data)


def _fallback(core, event, data: bytes) -> bool:
    """An ApiVersions request in an unknown version: its v0 fallback must encode and decode."""
    from kproto.apis import APIS
    from kproto.broker.served_versions import api_versions_fallback
    from kproto.framing import encode_response

    header = event.header
    if header is None or header.api_key != 18 or header.api_version in APIS[18].versions:
        return False
    frame = encode_response(api_versions_fallback(core.served), 0, header.correlation_id)
    back = outcome(
        _env["decode_response"], frame, 18, 0, allowed=(), what="decode of the ApiVersions fallback", data=data
    )[1]
    if back[1].error_code != 35 or len(back[1].api_keys) != len(core.served):
        raise fail(f"the ApiVersions fallback is wrong: {back[1]!r:.300}", data)
    return True


async def _answer(core, conn, request, data: bytes) -> bool:
    """Handle one request like BrokerServer does; False when the connection would stop here."""
    e = _env
    msg = request.message
    if request.api_key == 1:
        msg.max_wait_ms = 0  # no long polls in a fuzzer
    decompressed_before = core.produce_decompressed_bytes
    try:
        timeout = PRODUCE_TIMEOUT_S if request.api_key == 0 else PARK_TIMEOUT_S
        if request.api_key == 17:
            response = core.fuzz_sasl.handshake(msg.mechanism, request.api_version)
        elif request.api_key == 36:
            response = core.fuzz_sasl.authenticate(bytes(msg.auth_bytes))
        else:
            response = await asyncio.wait_for(core.handle(request, "/127.0.0.1"), timeout)
    except asyncio.TimeoutError:
        return False  # parked by the coordinator: later responses would have to wait for it
    except e["ProtocolError"] as exc:
        if request.api_key in core.served:
            raise fail(
                f"api {request.api_key} v{request.api_version} is advertised but closed the connection: {exc}", data
            ) from exc
        return False
    except Exception as exc:  # noqa: BLE001
        raise fail(
            f"BrokerCore.handle(api {request.api_key} v{request.api_version}) raised {type(exc).__name__}: {exc}", data
        ) from exc
    _check_budgets(core, request, response, core.produce_decompressed_bytes - decompressed_before, data)
    if not request.expects_response:
        if response is not None:
            raise fail(f"an acks=0 Produce was answered with {response!r:.200}", data)
        return True
    if response is None:
        raise fail(f"api {request.api_key} v{request.api_version} expects a response, the handler gave None", data)
    from kproto.errors import UnsupportedVersionError

    sent = outcome(
        conn.send_response,
        request,
        response,
        allowed=(UnsupportedVersionError,) if known_issue("B1") else (),
        what="send_response",
        data=data,
    )
    if sent[0] == "error":
        return False  # known issue B1 (fuzz/oracles.py)
    frame = sent[1]
    back = outcome(
        e["decode_response"],
        frame,
        request.api_key,
        request.api_version,
        allowed=(),
        what="decode_response of the broker's answer",
        data=data,
    )[1]
    if message_value(back[1]) != message_value(response) or back[0].correlation_id != request.correlation_id:
        raise fail(
            f"the broker's answer does not decode to itself:\n  built:   {response!r:.300}\n"
            f"  decoded: {back[1]!r:.300}",
            data,
        )
    return True


def _check_budgets(core, request, response, decompressed: int, data: bytes) -> None:
    if decompressed > DECOMPRESSION_BUDGET:
        raise fail(f"one Produce decompressed {decompressed} bytes, over its budget of {DECOMPRESSION_BUDGET}", data)
    if len(core.cluster.topics) > MAX_TOPICS:
        raise fail(f"the cluster holds {len(core.cluster.topics)} topics, over max_topics {MAX_TOPICS}", data)
    if response is None:
        return
    if request.api_key == 1:
        total = sum(len(p.records.raw) for t in response.responses for p in t.partitions if p.records is not None)
        if total > FETCH_MAX_BYTES:
            raise fail(f"a Fetch answer carries {total} record bytes, over fetch_max_bytes {FETCH_MAX_BYTES}", data)
    elif request.api_key == 3:
        names = [t.name for t in response.topics if t.name is not None]  # None: a topic id nobody has
        if len(names) != len(set(names)):
            raise fail("a Metadata answer lists a topic twice", data)


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
