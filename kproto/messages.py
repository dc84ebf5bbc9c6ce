"""Every message class kproto knows, generated from ``specs/``.

``<ApiName>Request`` / ``<ApiName>Response`` for every API (Kafka's newest names), the same classes under
the older names Kafka used (``GroupCoordinatorRequest is FindCoordinatorRequest``), the frame headers,
and the consumer protocol's embedded schemas.  Nested structs are attributes of their message class
(``ProduceRequest.TopicProduceData.PartitionProduceData``).  The list of names is generated with the
classes (``kproto/_generated/registry.py``), so a new spec file needs no edit here.
"""

from kproto._generated.registry import *  # noqa: F401,F403  (its __all__ is the generated list of classes)
from kproto._generated.registry import __all__ as _GENERATED
from kproto.message_base import FieldInfo as FieldInfo
from kproto.message_base import Message as Message
from kproto.message_base import Struct as Struct

__all__ = sorted(_GENERATED + ["FieldInfo", "Message", "Struct"])
