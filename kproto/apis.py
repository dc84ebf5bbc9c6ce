"""The API table: every api key kproto knows, with its names, versions and message classes.

``APIS[0]``, ``APIS["Produce"]``, ``APIS["producer"]`` (an older name, any case) all give the same
:class:`ApiInfo`; an unknown key or name raises :class:`~kproto.errors.UnknownApiError` (a ``KeyError``
too) that lists the valid names.  The facts come from the generated classes, which come from ``specs/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, Optional, Tuple, Type, Union

from kproto._generated.registry import API_TABLE
from kproto.errors import UnknownApiError
from kproto.message_base import Message

__all__ = ["APIS", "ApiInfo", "ApiTable"]


@dataclass(frozen=True)
class ApiInfo:
    """One API: ``api_key``, ``name`` (Kafka's newest name), ``old_names``, message classes and versions."""

    api_key: int
    name: str
    old_names: Tuple[str, ...]
    request: Type[Message]
    response: Type[Message]

    @property
    def versions(self) -> range:
        """The versions kproto encodes and decodes, as a ``range``."""
        lo, hi = self.request.VALID_VERSIONS
        return range(lo, hi + 1)

    @property
    def min_version(self) -> int:
        return int(self.request.VALID_VERSIONS[0])

    @property
    def max_version(self) -> int:
        return int(self.request.VALID_VERSIONS[1])

    @property
    def flexible_versions(self) -> Optional[Tuple[int, int]]:
        """The (lowest, highest) versions with compact encodings and tagged fields, or None."""
        return self.request.FLEXIBLE_VERSIONS  # type: ignore[no-any-return]

    @property
    def deprecated_versions(self) -> Optional[Tuple[int, int]]:
        """The (lowest, highest) versions Kafka 4.0 removed (kproto still speaks them), or None."""
        return self.request.DEPRECATED_VERSIONS  # type: ignore[no-any-return]

    def is_flexible(self, version: int) -> bool:
        flexible = self.flexible_versions
        return flexible is not None and flexible[0] <= version <= flexible[1]

    def request_header_version(self, version: int) -> int:
        """Header version framing this request version (2 when flexible; ControlledShutdown v0: 0)."""
        return int(self.request.HEADER_VERSIONS[version])  # type: ignore[attr-defined]

    def response_header_version(self, version: int) -> int:
        """Header version framing this response version (1 when flexible; ApiVersions: always 0)."""
        return int(self.response.HEADER_VERSIONS[version])  # type: ignore[attr-defined]


class ApiTable(Mapping[Union[int, str], ApiInfo]):
    """A read-only mapping from api key, or from name / older name (case-insensitive), to :class:`ApiInfo`."""

    def __init__(self, infos: Tuple[ApiInfo, ...]) -> None:
        self._by_key: Dict[int, ApiInfo] = {info.api_key: info for info in infos}
        self._by_name: Dict[str, ApiInfo] = {}
        for info in infos:
            for name in (info.name,) + info.old_names:
                self._by_name[name.lower()] = info

    def __getitem__(self, key: Union[int, str]) -> ApiInfo:
        info = self._by_name.get(key.lower()) if isinstance(key, str) else self._by_key.get(key)
        if info is None:
            names = ", ".join(sorted(i.name for i in self._by_key.values()))
            what = f"api name {key!r}" if isinstance(key, str) else f"api key {key!r}"
            raise UnknownApiError(f"unknown {what}; known APIs: {names}")
        return info

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key.lower() in self._by_name
        return key in self._by_key

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._by_key))

    def __len__(self) -> int:
        return len(self._by_key)

    def __repr__(self) -> str:
        return "ApiTable(" + ", ".join(f"{k}:{v.name}" for k, v in sorted(self._by_key.items())) + ")"


APIS = ApiTable(tuple(ApiInfo(key, name, old, req, resp) for key, name, old, req, resp in API_TABLE))
