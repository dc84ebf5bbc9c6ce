"""The schema model loaded from ``specs/``: versions, fields, structs, messages, APIs, error codes."""

from kproto.schema.loader import SpecError, default_spec_dir, load_specs
from kproto.schema.model import (
    ApiSpec,
    ErrorCodeSpec,
    FieldSpec,
    MessageSpec,
    SchemaSet,
    StructSpec,
    TypeRef,
    UpstreamSpec,
    snake_case,
)
from kproto.schema.version_ranges import Versions

__all__ = [
    "ApiSpec",
    "ErrorCodeSpec",
    "FieldSpec",
    "MessageSpec",
    "SchemaSet",
    "SpecError",
    "StructSpec",
    "TypeRef",
    "UpstreamSpec",
    "Versions",
    "default_spec_dir",
    "load_specs",
    "snake_case",
]
