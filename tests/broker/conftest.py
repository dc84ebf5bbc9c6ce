"""What the broker tests share: a blocking client connected to the module's ``broker`` fixture.

Each module declares its own ``broker`` (the topics and settings it needs); ``client`` connects to
whichever one the requesting test sees.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from broker_client import SocketClient


@pytest.fixture
def client(broker) -> Iterator[SocketClient]:  # type: ignore[no-untyped-def]
    with SocketClient((broker.host, broker.port)) as c:
        yield c
