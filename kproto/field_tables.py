"""Field tables: one struct's layout in one version as data, for the compiled field interpreter.

The interpreter (``kproto/_fast/_field_interpreter.pyx``) encodes and decodes the APIs that have no
specialised compiled codecs by walking these tables.  They are read off the generated classes, which the
generator derives from ``specs/``: ``FIELDS`` (wire order, versions, nullability, tags, nested classes),
the message's ``FLEXIBLE_VERSIONS`` and the defaults of each class's ``__init__``.  Built on the first
use of a (class, version), they cost an import nothing.

A table is ``(name, flexible, has_unknown, rows, other_tags)``: ``rows`` holds one
``(kind, attr, is_array, nullable, sub, tag, default_kind, default)`` per field in wire order, with
``tag`` -1 for a field in the fixed part, and ``kind`` :data:`ABSENT` for a field this version does not
carry (decoded as its default; encoded only by the pure codec when it is set).  ``other_tags`` are the
tags the struct uses in other versions only.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Set, Tuple
import importlib
from types import FunctionType

from kproto._backend import FORCED_PURE
from kproto.message_base import Struct

__all__ = ["KINDS", "ABSENT", "STRUCT", "D_VALUE", "D_LIST", "D_STRUCT", "table", "use_field_interpreter"]

#: Wire kinds of scalar fields (and array elements), as the interpreter numbers them.
KINDS = {
    "bool": 1,
    "int8": 2,
    "int16": 3,
    "uint16": 4,
    "int32": 5,
    "int64": 6,
    "float64": 7,
    "string": 8,
    "bytes": 9,
    "uuid": 10,
    "records": 11,
}
STRUCT = 12
ABSENT = 0
#: How a default is made: the value itself (immutable), a new empty list, a new default instance of a class.
D_VALUE, D_LIST, D_STRUCT = 0, 1, 2

Row = Tuple[int, str, bool, bool, Any, int, int, Any]


def _in(versions: Any, version: int) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def _default(value: Any) -> Tuple[int, Any]:
    if isinstance(value, list):
        if value:
            raise ValueError(f"a non-empty list default ({value!r}) is not a wire default")
        return D_LIST, None
    if isinstance(value, Struct):
        return D_STRUCT, type(value)
    return D_VALUE, value


def table(
    cls: Any, version: int, flexible: bool, has_unknown: bool
) -> Tuple[str, bool, bool, Tuple[Row, ...], frozenset]:
    """The table of ``cls`` (a generated struct or message class) in ``version``; ``flexible`` and
    ``has_unknown`` (whether the message has an ``unknown_tagged_fields`` attribute) are the message's."""
    defaults = cls()
    rows: List[Row] = []
    here: Set[int] = set()
    elsewhere: Set[int] = set()
    for info in cls.FIELDS:
        dkind, dvalue = _default(getattr(defaults, info.name))
        present = _in(info.versions, version)
        tag = info.tag if present and flexible and info.tag is not None else -1
        if info.tag is not None:
            (here if present else elsewhere).add(info.tag)
        if not present:
            rows.append((ABSENT, info.name, False, False, None, -1, dkind, dvalue))
            continue
        kind = STRUCT if info.struct is not None else KINDS[info.type.lstrip("[]")]
        nullable = _in(info.nullable_versions, version)
        rows.append((kind, info.name, info.is_array, nullable, info.struct, tag, dkind, dvalue))
    return cls._NAME, flexible, has_unknown, tuple(rows), frozenset(elsewhere - here)


def use_field_interpreter(classes: Iterable[Any]) -> None:
    """Compiled build: run the codecs of those message ``classes`` whose module was not compiled (their
    codecs are plain Python functions) on the field interpreter.  Nothing on the pure path
    (``KPROTO_PURE=1``, or no extension built), where the pure codecs serve."""
    if FORCED_PURE:
        return
    try:  # by name, as kproto._backend loads the other compiled modules
        bind = importlib.import_module("kproto._fast._field_interpreter").bind
    except ImportError:  # an optional extension that did not build: the pure codecs serve
        return
    for cls in classes:
        # Asked per class: where the compiled copy of kproto.message_base is not built, the classes are plain.
        if isinstance(cls.__repr__, FunctionType):  # its kproto.message_base runs from source
            continue
        codecs = cls.__dict__.get("_DECODERS")
        if codecs and all(type(fn) is FunctionType for fn in codecs.values()):
            bind(cls, table)
