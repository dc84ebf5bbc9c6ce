"""What the broker tests share: a blocking client connected to the module's ``broker`` fixture.

Each module declares its own ``broker`` (the topics and settings it needs); ``client`` connects to
whichever one the requesting test sees.
"""

from __future__ import annotations

from typing import Iterator, Tuple

import peer_programs
import pytest
from broker_client import SocketClient


@pytest.fixture
def client(broker) -> Iterator[SocketClient]:  # type: ignore[no-untyped-def]
    with SocketClient((broker.host, broker.port)) as c:
        yield c


@pytest.fixture(scope="session")
def java_scenarios(tmp_path_factory: pytest.TempPathFactory) -> Tuple[str, str]:
    """(java, classpath) of ``tests/java/JavaClientScenarios.java``, compiled once per session."""
    return peer_programs.java_scenarios(tmp_path_factory.mktemp("java-classes"))


@pytest.fixture(scope="session")
def go_peers(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The ``tests/go`` program, built once per session."""
    return peer_programs.go_peers(tmp_path_factory.mktemp("go-peers"))
