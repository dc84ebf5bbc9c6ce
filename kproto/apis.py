"""The API table: every api key of the 0.8/0.9 protocol with its names, versions and message classes.

``APIS[0]``, ``APIS["Produce"]``, ``APIS["producer"]`` (an older name, any case) all give the same
:class:`ApiInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, Tuple, Type, Union

from kproto._generated.registry import API_TABLE
from kproto.message_base import Message

__all__ = ["APIS", "ApiInfo", "ApiTable"]


@dataclass(frozen=True)
class ApiInfo:
    """One API: ``api_key``, ``name`` (0.9.0 name), ``old_names``, message classes and valid versions."""

    api_key: int
    name: str
    old_names: Tuple[str, ...]
    request: Type[Message]
    response: Type[Message]

    @property
    def versions(self) -> range:
        """The versions kproto encodes and decodes, as a ``range``."""
        lo, hi = self.request.VERSIONS
        return range(lo, hi + 1)

    @property
    def min_version(self) -> int:
        return self.request.VERSIONS[0]

    @property
    def max_version(self) -> int:
        return self.request.VERSIONS[1]

    def request_header_version(self, version: int) -> int:
        """Header version framing this request version (ControlledShutdown v0 uses header v0)."""
        return self.request.HEADER_VERSIONS[version]  # type: ignore[attr-defined]


class ApiTable(Mapping[Union[int, str], ApiInfo]):
    """A read-only mapping from api key, or from name / older name (case-insensitive), to :class:`ApiInfo`."""

    def __init__(self, infos: Tuple[ApiInfo, ...]) -> None:
        self._by_key: Dict[int, ApiInfo] = {info.api_key: info for info in infos}
        self._by_name: Dict[str, ApiInfo] = {}
        for info in infos:
            for name in (info.name,) + info.old_names:
                self._by_name[name.lower()] = info

    def __getitem__(self, key: Union[int, str]) -> ApiInfo:
        if isinstance(key, str):
            return self._by_name[key.lower()]
        return self._by_key[key]

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
