"""kproto: the Apache Kafka 0.8/0.9 wire protocol toolkit.

Public names (imported lazily, so that ``python -m kproto.codegen`` can run when generated modules are
stale, and a plain ``import kproto`` stays cheap)::

    kproto.APIS                     api key / name -> ApiInfo
    kproto.encode_request(...)      size-prefixed request frame
    kproto.decode_request(frame)    -> (RequestHeader, message)
    kproto.encode_response(...)     size-prefixed response frame
    kproto.decode_response(frame, api_key, version) -> (ResponseHeader, message)
    kproto.FrameReader              incremental frame splitter with a frame-size limit
    kproto.ErrorCode                error code enum
    kproto.backend                  "cython" or "python": which record-set core is active
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if os.environ.get("KPROTO_PURE") == "1":
    from kproto.source_first import install as _install_source_first

    _install_source_first()

from kproto.errors import (
    BrokerError,
    DecodeError,
    EncodeError,
    KprotoError,
    LengthMismatchError,
    LimitExceededError,
    ProtocolError,
    UnsupportedVersionError,
)

__version__ = "0.1.0"

_LAZY = {
    "APIS": "kproto.apis",
    "ApiInfo": "kproto.apis",
    "encode_request": "kproto.framing",
    "decode_request": "kproto.framing",
    "encode_response": "kproto.framing",
    "decode_response": "kproto.framing",
    "FrameReader": "kproto.framing",
    "DEFAULT_MAX_FRAME_SIZE": "kproto.framing",
    "ErrorCode": "kproto._generated.error_codes",
    "backend": "kproto._backend",
}

__all__ = sorted(list(_LAZY) + [
    "BrokerError", "DecodeError", "EncodeError", "KprotoError", "LengthMismatchError", "LimitExceededError", "ProtocolError",
    "UnsupportedVersionError", "__version__",
])

if TYPE_CHECKING:  # pragma: no cover
    from kproto._generated.error_codes import ErrorCode
    from kproto.apis import APIS, ApiInfo
    from kproto.framing import (
        DEFAULT_MAX_FRAME_SIZE,
        FrameReader,
        decode_request,
        decode_response,
        encode_request,
        encode_response,
    )


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'kproto' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(module_name)
    value = getattr(module, "BACKEND") if name == "backend" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return __all__
