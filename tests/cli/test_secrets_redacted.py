"""No SASL secret reaches any command's default output; ``--show-secrets`` shows them.

The inputs hold three logins: PLAIN through SaslAuthenticate, PLAIN as a raw token after SaslHandshake
v0, and SCRAM-SHA-256 (whose secret on the wire is the client proof).  They are given to ``decode`` and
``hexdump`` as bare frames (no connection context) and to ``pcap``, ``groups`` and ``report`` as a
capture; every output is searched for each secret in clear, in hex (plain and spaced) and in base64 (of
the secret and of the token that carries it).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import List, Tuple

import pytest

import kproto
from kproto.pcap.writer import Side, TcpConversation, write_capture
from test_cli_usage import run_kproto

# subprocesses of the kproto command: run once, on the compiled build (see conftest.py)
pytestmark = pytest.mark.cli_process

APIS = kproto.APIS
PLAIN_PASSWORD = b"Pa55-w0rd-in-clear"
RAW_PASSWORD = b"Raw-t0ken-passw0rd"
SCRAM_PROOF = b"c2NyYW0tcHJvb2YtdGhhdC1pcy1zZWNyZXQ="
PLAIN_TOKEN = b"\x00alice\x00" + PLAIN_PASSWORD
RAW_TOKEN = b"\x00bob\x00" + RAW_PASSWORD
SCRAM_FINAL = b"c=biws,r=clientnonceservernonce,p=" + SCRAM_PROOF
BROKEN_PASSWORD = b"Br0ken-frame-passw0rd"
BROKEN_TOKEN = b"\x00dave\x00" + BROKEN_PASSWORD
SECRETS = [
    (PLAIN_PASSWORD, PLAIN_TOKEN),
    (RAW_PASSWORD, RAW_TOKEN),
    (SCRAM_PROOF, SCRAM_FINAL),
    (BROKEN_PASSWORD, BROKEN_TOKEN),
]


def forms(secret: bytes, token: bytes) -> List[str]:
    """Every way an output could spell ``secret``."""
    out = [
        secret.decode(),
        secret.hex(),
        " ".join(f"{b:02x}" for b in secret),
        base64.b64encode(secret).decode(),
        base64.b64encode(token).decode(),
    ]
    # base64 of the token inside a larger byte string starts at any of three alignments
    for shift in range(3):
        out.append(base64.b64encode(b"\x00" * shift + token).decode()[4:-4])
    return out


def broken_authenticate() -> bytes:
    """A SaslAuthenticate v1 request whose body does not decode (five bytes of garbage after it)."""
    frame = kproto.encode_request(APIS["SaslAuthenticate"].request(auth_bytes=BROKEN_TOKEN), 1, 7, "app")
    payload = frame[4:] + b"\xff" * 5
    return len(payload).to_bytes(4, "big") + payload


def raw(token: bytes) -> bytes:
    return len(token).to_bytes(4, "big") + token


def logins() -> List[List[Tuple[Side, bytes]]]:
    """The client and server frames of three connections, each one login then a Metadata request."""
    hs, auth, meta = APIS["SaslHandshake"], APIS["SaslAuthenticate"], APIS["Metadata"]
    C, S = Side.CLIENT, Side.SERVER
    plain = [
        (C, kproto.encode_request(hs.request(mechanism="PLAIN"), 1, 1, "app")),
        (S, kproto.encode_response(hs.response(mechanisms=["PLAIN"]), 1, 1)),
        (C, kproto.encode_request(auth.request(auth_bytes=PLAIN_TOKEN), 2, 2, "app")),
        (S, kproto.encode_response(auth.response(auth_bytes=b""), 2, 2)),
    ]
    v0 = [
        (C, kproto.encode_request(hs.request(mechanism="PLAIN"), 0, 1, "app")),
        (S, kproto.encode_response(hs.response(mechanisms=["PLAIN"]), 0, 1)),
        (C, raw(RAW_TOKEN)),
    ]
    scram = [
        (C, kproto.encode_request(hs.request(mechanism="SCRAM-SHA-256"), 1, 1, "app")),
        (S, kproto.encode_response(hs.response(mechanisms=["SCRAM-SHA-256"]), 1, 1)),
        (C, kproto.encode_request(auth.request(auth_bytes=b"n,,n=carol,r=clientnonce"), 2, 2, "app")),
        (S, kproto.encode_response(auth.response(auth_bytes=b"r=clientnonceservernonce,s=c2FsdA==,i=4096"), 2, 2)),
        (C, kproto.encode_request(auth.request(auth_bytes=SCRAM_FINAL), 2, 3, "app")),
        (S, kproto.encode_response(auth.response(auth_bytes=b"v=c2VydmVyLXNpZ25hdHVyZQ=="), 2, 3)),
    ]
    metadata = (C, kproto.encode_request(meta.request(topics=None), 1, 9, "app"))
    return [plain + [metadata], v0 + [metadata], scram + [metadata]]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    where = tmp_path_factory.mktemp("secrets")
    frames = where / "frames.bin"
    frames.write_bytes(b"".join(data for conn in logins() for _, data in conn) + broken_authenticate())
    pcap = where / "logins.pcap"
    conversations = []
    for i, conn in enumerate(logins()):
        messages = [(side, data, 1_700_000_000 + i + k / 100) for k, (side, data) in enumerate(conn)]
        conversations.append(TcpConversation(("10.0.0.1", 40000 + i), ("10.0.0.2", 9092), messages))
    write_capture(pcap, conversations)
    return frames, pcap


def outputs(frames: Path, pcap: Path, tmp: Path, *extra: str) -> List[Tuple[str, str]]:
    out = []
    for command, source in (("decode", frames), ("hexdump", frames), ("pcap", pcap), ("groups", pcap)):
        for fmt in ("text", "json"):
            proc = run_kproto(command, source, "--format", fmt, *(extra if command != "groups" else ()))
            assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")
            out.append((f"{command} {fmt}", proc.stdout.decode(errors="replace")))
    decoded = run_kproto("decode", frames, "-v", "--format", "jsonl", *extra).stdout.decode()
    out.append(("decode -v jsonl", decoded))
    return out


def test_no_secret_in_any_default_output(inputs: Tuple[Path, Path], tmp_path: Path) -> None:
    frames, pcap = inputs
    texts = outputs(frames, pcap, tmp_path)
    pytest.importorskip("plotly", reason="the HTML report needs plotly (the report extra)")
    html = tmp_path / "report.html"
    run_kproto("report", pcap, "-o", html, "--no-progress", check_code=0)
    texts.append(("report", html.read_text()))
    for name, text in texts:
        for secret, token in SECRETS:
            for form in forms(secret, token):
                assert form not in text, f"{name} shows a secret ({form!r})"
    decoded = {name: text for name, text in texts}
    assert "<redacted>" in decoded["decode text"] and "<redacted>" in decoded["hexdump text"]
    assert "username: 'alice'" in decoded["decode text"] and "username: 'bob'" in decoded["decode text"]
    assert "raw SASL PLAIN token (after SaslHandshake v0)" in decoded["hexdump text"]
    assert "request SaslAuthenticate v1, correlation id 7" in decoded["decode text"]
    document = json.loads(decoded["decode json"])
    tokens = [f for f in document["records"] if f.get("kind") == "sasl_token"]
    assert [t["raw_body"]["sasl"]["username"] for t in tokens] == ["bob"]


def test_show_secrets_shows_them(inputs: Tuple[Path, Path], tmp_path: Path) -> None:
    frames, pcap = inputs
    texts = dict(outputs(frames, pcap, tmp_path, "--show-secrets"))
    assert PLAIN_PASSWORD.decode() in texts["decode text"] and RAW_PASSWORD.decode() in texts["decode text"]
    assert " ".join(f"{b:02x}" for b in PLAIN_TOKEN[:12]) in texts["hexdump text"]  # one row of the dump
    for name in ("decode json", "pcap json"):
        assert base64.b64encode(PLAIN_TOKEN).decode() in texts[name], name
