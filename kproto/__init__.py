"""kproto: the Apache Kafka wire protocol toolkit (every API and version, 0.8.0 through 4.x).

Public names (imported lazily, so that ``python -m kproto.codegen`` can run when generated modules are
stale, and a plain ``import kproto`` stays cheap)::

    kproto.APIS                     api key / name -> ApiInfo
    kproto.encode_request(...)      size-prefixed request frame
    kproto.decode_request(frame)    -> (RequestHeader, message)
    kproto.encode_response(...)     size-prefixed response frame
    kproto.decode_response(frame, api_key, version) -> (ResponseHeader, message)
    kproto.FrameReader              incremental frame splitter with a frame-size limit
    kproto.ErrorCode                error code enum
    kproto.Message, kproto.Struct, kproto.FieldInfo   bases of the generated classes, their field rows
    kproto.backend                  "cython" or "python": which record-set core is active
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kproto.errors import BrokerError as BrokerError
from kproto.errors import DecodeError as DecodeError
from kproto.errors import EncodeError as EncodeError
from kproto.errors import KprotoError as KprotoError
from kproto.errors import LengthMismatchError as LengthMismatchError
from kproto.errors import LimitExceededError as LimitExceededError
from kproto.errors import ProtocolError as ProtocolError
from kproto.errors import UnknownApiError as UnknownApiError
from kproto.errors import UnknownVersionError as UnknownVersionError
from kproto.errors import UnsupportedVersionError as UnsupportedVersionError

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
    "FieldInfo": "kproto.message_base",
    "Message": "kproto.message_base",
    "Struct": "kproto.message_base",
    "backend": "kproto._backend",
}

__all__ = [
    "APIS",
    "DEFAULT_MAX_FRAME_SIZE",
    "ApiInfo",
    "BrokerError",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "FieldInfo",
    "FrameReader",
    "KprotoError",
    "LengthMismatchError",
    "LimitExceededError",
    "Message",
    "ProtocolError",
    "Struct",
    "UnknownApiError",
    "UnknownVersionError",
    "UnsupportedVersionError",
    "__version__",
    "backend",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]

if TYPE_CHECKING:  # pragma: no cover  (the same names, explicitly re-exported, for type checkers)
    from kproto._backend import BACKEND as backend
    from kproto._generated.error_codes import ErrorCode as ErrorCode
    from kproto.apis import APIS as APIS
    from kproto.apis import ApiInfo as ApiInfo
    from kproto.framing import DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE
    from kproto.framing import FrameReader as FrameReader
    from kproto.framing import decode_request as decode_request
    from kproto.framing import decode_response as decode_response
    from kproto.framing import encode_request as encode_request
    from kproto.framing import encode_response as encode_response
    from kproto.message_base import FieldInfo as FieldInfo
    from kproto.message_base import Message as Message
    from kproto.message_base import Struct as Struct


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
