"""SASL and TLS in captures: raw tokens after SaslHandshake v0 followed and paired, SaslAuthenticate labelled
with its mechanism, secrets redacted unless asked for; TLS recognised from its first record and reported once;
truncated exchanges and TLS/plaintext mismatches reported, never a crash."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings, strategies as st
from test_cli_usage import SAMPLES

import kproto
from kproto.capture.conversation import Exchange, Problem, SaslToken, decode_capture
from kproto.capture.sasl import REDACTED, token_facts
from kproto.capture.tls import tls_start
from kproto.pcap.writer import Side, TcpConversation, write_capture
from kproto.cli import main

MODERN = SAMPLES / "modern"
Message = Tuple[Side, bytes, float]


class Script:
    """One client connection's messages, with request/response helpers."""

    def __init__(self, port: int = 9092, client: str = "10.0.0.1") -> None:
        self.port, self.client = port, client
        self.messages: List[Message] = []
        self.clock = 1_700_000_000.0 + int(client.rsplit(".", 1)[1])  # one client after the other
        self.corr = 0

    def send(self, side: Side, data: bytes) -> "Script":
        self.clock += 0.001
        self.messages.append((side, data, self.clock))
        return self

    def exchange(self, api: str, version: int, request: Dict[str, Any], response: Optional[Dict[str, Any]]) -> "Script":
        info = kproto.APIS[api]
        self.corr += 1
        self.send(Side.CLIENT, kproto.encode_request(info.request.from_dict(request), version, self.corr, "app"))
        if response is not None:
            self.send(Side.SERVER, kproto.encode_response(info.response.from_dict(response), version, self.corr))
        return self

    def token(self, side: Side, data: bytes) -> "Script":
        return self.send(side, len(data).to_bytes(4, "big") + data)

    def handshake(self, mechanism: str, version: int = 0) -> "Script":
        return self.exchange(
            "SaslHandshake", version, {"mechanism": mechanism}, {"error_code": 0, "mechanisms": [mechanism]}
        )

    def metadata(self) -> "Script":
        return self.exchange("Metadata", 1, {"topics": []}, {"brokers": [], "topics": []})

    def conversation(self, index: int, handshake: bool = True) -> TcpConversation:
        return TcpConversation(
            (self.client, 40000 + index), ("10.0.0.10", self.port), self.messages, handshake=handshake, close=handshake
        )


def decode(
    tmp_path: Path, *scripts: Script, ports: Sequence[int] = (9092,), handshake: bool = True, **options: Any
) -> List[Any]:
    path = tmp_path / "capture.pcap"
    write_capture(path, [s.conversation(i, handshake) for i, s in enumerate(scripts)], **options)
    return list(decode_capture(path, ports=ports, sasl_records=True))


def kinds(records: List[Any]) -> List[str]:
    out = []
    for r in records:
        if isinstance(r, Exchange):
            out.append(r.api_name)
        elif isinstance(r, SaslToken):
            out.append(f"token {r.step}" + ("" if r.answered else " unanswered"))
        else:
            out.append(r.kind.value)
    return out


def client_hello(server_name: Optional[str] = "kafka-1.example.test") -> bytes:
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


# --- tokens ------------------------------------------------------------------------------------------------


def test_secrets_are_redacted_by_mechanism_unless_asked_for() -> None:
    plain = token_facts("PLAIN", b"\x00alice\x00s3cret", True)
    assert plain == {"mechanism": "PLAIN", "size": 13, "authzid": "", "username": "alice", "password": REDACTED}
    assert token_facts("PLAIN", b"\x00alice\x00s3cret", True, show_secrets=True)["password"] == "s3cret"
    final = token_facts("SCRAM-SHA-512", b"c=biws,r=abc,p=UFJPT0Y=", True)
    assert final["proof"] == REDACTED and final["nonce"] == "abc" and final["channel_binding"] == "biws"
    first = token_facts("SCRAM-SHA-256", b"n,,n=bob,r=xyz", True)
    assert first["username"] == "bob" and first["gs2_header"] == "n,,"
    bearer = token_facts("OAUTHBEARER", b"n,,\x01host=k1\x01auth=Bearer eyJhbGciOi.x.y\x01\x01", True)
    assert bearer["auth"] == f"Bearer {REDACTED}" and bearer["host"] == "k1"
    assert token_facts("GSSAPI", b"\x60\x82kerberos", True)["token"] == REDACTED
    broken = token_facts("PLAIN", b"no separators", True)
    assert "malformed" in broken and broken["token"] == REDACTED


@settings(max_examples=150, deadline=None)
@given(
    mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI", None]),
    data=st.binary(max_size=80),
    from_client=st.booleans(),
)
def test_any_token_is_described_without_leaking_or_raising(
    mechanism: Optional[str], data: bytes, from_client: bool
) -> None:
    secret = b"\x00user\x00hunter2-secret" if mechanism == "PLAIN" else b"n,,\x01auth=Bearer hunter2-secret\x01\x01"
    for token in (data, secret):
        facts = token_facts(mechanism, token, from_client)
        if from_client:
            assert "hunter2" not in json.dumps(facts, default=str)


# --- TLS records -------------------------------------------------------------------------------------------


def test_client_hello_gives_sni_and_version_and_prefixes_never_raise() -> None:
    hello = client_hello()
    start = tls_start(hello)
    assert start is not None and start.hello == "ClientHello" and start.server_name == "kafka-1.example.test"
    assert start.describe() == "TLS ClientHello (up to TLS 1.3, SNI kafka-1.example.test)"
    assert tls_start(client_hello(None)).server_name is None  # type: ignore[union-attr]
    for end in range(len(hello)):
        tls_start(hello[:end])
    assert tls_start(kproto.encode_request(kproto.APIS["Metadata"].request(topics=[]), 1, 1, "x")) is None
    assert tls_start(bytes.fromhex("1503030002022800")).content == "alert"  # type: ignore[union-attr]


# --- conversations -------------------------------------------------------------------------------------------


def test_plain_v0_raw_tokens_are_followed_then_kafka_resumes(tmp_path: Path) -> None:
    ok = Script().handshake("PLAIN").token(Side.CLIENT, b"\x00alice\x00pw").token(Side.SERVER, b"").metadata()
    refused = Script(client="10.0.0.2").handshake("PLAIN").token(Side.CLIENT, b"\x00eve\x00wrong")
    records = decode(tmp_path, ok, refused)
    assert kinds(records) == [
        "SaslHandshake",
        "token 1",
        "Metadata",
        "SaslHandshake",
        "token 1 unanswered",
        "unanswered-request",
    ]
    token = records[1]
    assert token.mechanism == "PLAIN" and token.request_token == b"\x00alice\x00pw" and token.response_token == b""
    assert "authentication fails" in records[-1].detail


def test_scram_v0_takes_two_rounds_and_gssapi_ends_at_a_kafka_request(tmp_path: Path) -> None:
    scram = (
        Script()
        .handshake("SCRAM-SHA-256")
        .token(Side.CLIENT, b"n,,n=bob,r=a")
        .token(Side.SERVER, b"r=ab,s=c2E=,i=4096")
        .token(Side.CLIENT, b"c=biws,r=ab,p=cHJvb2Y=")
        .token(Side.SERVER, b"v=c2ln")
        .metadata()
    )
    gssapi = (
        Script(client="10.0.0.2")
        .handshake("GSSAPI")
        .token(Side.CLIENT, b"\x60\x82" + bytes(40))
        .token(Side.SERVER, b"\x60" + bytes(30))
        .token(Side.CLIENT, b"")
        .token(Side.SERVER, b"\x05\x04")
        .metadata()
    )
    records = decode(tmp_path, scram, gssapi)
    assert kinds(records) == [
        "SaslHandshake",
        "token 1",
        "token 2",
        "Metadata",
        "SaslHandshake",
        "token 1",
        "token 2",
        "Metadata",
    ]


def test_sasl_authenticate_carries_the_mechanism_and_is_redacted_in_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (
        Script()
        .handshake("PLAIN", version=1)
        .exchange("SaslAuthenticate", 2, {"auth_bytes": b"\x00alice\x00pa55word"}, {"error_code": 0, "auth_bytes": b""})
    )
    path = tmp_path / "auth.pcap"
    write_capture(path, [script.conversation(0)])
    exchanges = [r for r in decode_capture(path) if isinstance(r, Exchange)]
    assert [e.sasl_mechanism for e in exchanges] == [None, "PLAIN"]
    for extra in ([], ["-v"]):
        assert main(["pcap", str(path), "--no-progress", "--format", "jsonl", *extra]) == 0
        out = capsys.readouterr().out
        assert "pa55word" not in out and "cGE1NXdvcmQ" not in out  # neither in clear nor in base64
        auth = json.loads(out.splitlines()[1])["request"]["auth_bytes"]
        assert auth == {
            "redacted": True,
            "size": 15,
            "sasl": {"mechanism": "PLAIN", "size": 15, "authzid": "", "username": "alice", "password": REDACTED},
        }
    assert main(["pcap", str(path), "--no-progress", "-v", "--show-secrets"]) == 0
    assert "'pa55word'" in capsys.readouterr().out


def test_truncated_sasl_exchanges_are_problems(tmp_path: Path) -> None:
    cut = Script().handshake("PLAIN").send(Side.CLIENT, (40).to_bytes(4, "big") + b"\x00alice\x00")
    records = decode(tmp_path, cut)
    assert kinds(records) == ["SaslHandshake", "stream-ended-inside-frame"]
    gap = (
        Script().handshake("SCRAM-SHA-256").token(Side.CLIENT, b"n,,n=bob,r=" + b"x" * 3000).token(Side.SERVER, b"r=1")
    )
    records = decode(tmp_path, gap, mss=1000, impairments={0: _drop_packet(5)})
    assert "capture-gap" in kinds(records) and all(isinstance(r, (Exchange, Problem, SaslToken)) for r in records)


def _drop_packet(index: int) -> Any:
    from kproto.pcap.writer import Impairments

    return Impairments(drop={index})


def test_tls_is_reported_once_per_connection_and_mismatches_are_named(tmp_path: Path) -> None:
    hello = client_hello()
    records_after = bytes.fromhex("1703030020") + bytes(32)
    tls = Script().send(Side.CLIENT, hello).send(Side.SERVER, bytes.fromhex("160303000402000000"))
    for _ in range(20):
        tls.send(Side.CLIENT, records_after).send(Side.SERVER, records_after)
    to_plaintext = Script(client="10.0.0.2").send(Side.CLIENT, hello)  # the broker closes without answering
    to_tls_port = (
        Script(port=9093, client="10.0.0.3")
        .exchange("ApiVersions", 3, {"client_software_name": "a", "client_software_version": "1"}, None)
        .send(Side.SERVER, bytes.fromhex("15030300020250"))
    )
    records = decode(tmp_path, tls, to_plaintext, to_tls_port, ports=(9092, 9093))
    problems = [r for r in records if isinstance(r, Problem)]
    assert [p.kind.value for p in problems] == ["tls-encrypted", "tls-encrypted", "tls-mismatch", "tls-mismatch"]
    assert "SNI kafka-1.example.test" in problems[0].detail
    assert "does not speak TLS" in problems[2].detail and "expects TLS" in problems[3].detail
    assert not [r for r in records if isinstance(r, Exchange) and r.answered]


def test_tls_caught_mid_stream_is_one_problem(tmp_path: Path) -> None:
    data = bytes.fromhex("1703030030") + bytes(48)
    script = Script()
    for _ in range(10):
        script.send(Side.CLIENT, data).send(Side.SERVER, data)
    records = decode(tmp_path, script, handshake=False)
    assert kinds(records) == ["tls-encrypted"] and "handshake not captured" in records[0].detail


def test_samples_of_todays_logins(capsys: pytest.CaptureFixture[str]) -> None:
    for name, secret in (
        ("kafka-python-sasl-plain-v0.pcap", "alice-secret"),
        ("librdkafka-sasl-plain.pcap", "alice-secret"),
    ):
        assert main(["pcap", str(MODERN / name), "--no-progress", "-v"]) == 0
        out = capsys.readouterr().out
        assert secret not in out and "username: 'alice'" in out or "username='alice'" in out
    assert main(["pcap", str(MODERN / "tls-loopback.pcap"), "--no-progress", "--format", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["kind"] for r in lines if r["record"] == "problem"] == ["tls-encrypted"]
    assert lines[-1]["failures"] == 0
