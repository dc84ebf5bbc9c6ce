"""The text form of a decoded message: an indented tree of the JSON form (:mod:`kproto.cli.json_values`).

::

    acks: 1
    topic_data:
      - name: 'test'
        partition_data:
          - index: 0
            records: 31 bytes, 1 message
              - offset 0: key None, value b'hello'

Bytes show as Python literals cut at 64 bytes; record sets show their size, and with ``-v`` their
messages, one line each.
"""

from __future__ import annotations

from typing import Any, Iterator, List

from kproto._generated.error_codes import name_in_context
from kproto.cli.json_values import BYTES_KEY, bytes_of

__all__ = ["tree_lines"]

_MAX_SHOWN = 64


def tree_lines(value: Any, indent: int = 0) -> Iterator[str]:
    """Lines of the tree of a JSON-form message (a dict), indented by ``indent`` spaces."""
    pad = " " * indent
    for key, item in value.items():
        if isinstance(item, list) and item and isinstance(item[0], dict) and not _is_bytes(item[0]):
            yield f"{pad}{key}:"
            for element in item:
                lines = list(tree_lines(element, indent + 4))
                if lines:
                    yield f"{pad}  - {lines[0].lstrip()}"
                    yield from lines[1:]
                else:
                    yield f"{pad}  - {{}}"
        elif isinstance(item, dict) and not _is_bytes(item):
            yield f"{pad}{key}:"
            yield from tree_lines(item, indent + 2)
        elif key == "error_code" and isinstance(item, int):
            yield f"{pad}{key}: {item} ({name_in_context(item)})"
        else:
            yield f"{pad}{key}: {_leaf(item)}"
            if _is_bytes(item):
                yield from _bytes_details(item, indent + 2)


def _is_bytes(item: Any) -> bool:
    return isinstance(item, dict) and BYTES_KEY in item


def _leaf(item: Any) -> str:
    if _is_bytes(item):
        data = bytes_of(item)
        if "messages" in item or "error" in item:
            return f"{len(data)} bytes" + _record_summary(item)
        return show_bytes(data)
    if isinstance(item, list):
        return "[" + ", ".join(_leaf(v) for v in item) + "]"
    if isinstance(item, str):
        return repr(item)
    return str(item)


def _record_summary(item: Any) -> str:
    if "error" in item:
        return f", messages do not decode: {item['error']['message']}"
    count = len(item["messages"])
    tail = ", partial message at the end" if item.get("partial") else ""
    return f", {count} message{'s' if count != 1 else ''}{tail}"


def _bytes_details(item: Any, indent: int) -> Iterator[str]:
    pad = " " * indent
    for batch in item.get("batches", ()):
        yield f"{pad}batch {batch_line(batch)}"
    for message in item.get("messages", ()):  # a list, or a RecordStream decoded as it is iterated
        yield f"{pad}- {message_line(message)}"
    if item.get("messages_not_shown"):
        yield f"{pad}... {item['messages_not_shown']} more messages (--max-records)"
    if "sasl" in item:  # what a SASL token holds (kproto.cli.sasl_view)
        yield f"{pad}sasl:"
        yield from tree_lines(item["sasl"], indent + 2)
    if "consumer_protocol" in item:
        yield f"{pad}consumer_protocol:"
        yield from tree_lines(item["consumer_protocol"], indent + 2)


def message_line(message: Any) -> str:
    """One message of a record set on one line."""
    parts: List[str] = [f"offset {message['offset']}:"]
    if message["codec"] != "none":
        parts.append(f"[{message['codec']}]")
    if message["timestamp"] is not None:
        parts.append(f"timestamp {message['timestamp']},")
    parts.append(f"key {_optional_bytes(message['key'])}, value {_optional_bytes(message['value'])}")
    headers = message.get("headers")
    if headers:
        parts[-1] += ","
        parts.append("headers " + ", ".join(f"{h['key']!r}={_optional_bytes(h['value'])}" for h in headers))
    return " ".join(parts)


def batch_line(batch: Any) -> str:
    """A magic 2 batch header on one line: offsets, codec and the producer facts."""
    parts = [f"base offset {batch['base_offset']}: {batch['records_count']} records"]
    if batch["codec"] != "none":
        parts.append(batch["codec"])
    if batch["producer_id"] >= 0:
        parts.append(
            f"producer id {batch['producer_id']} epoch {batch['producer_epoch']} base sequence {batch['base_sequence']}"
        )
    if batch["transactional"]:
        parts.append("transactional")
    if batch["control"]:
        parts.append("control")
    return ", ".join(parts)


def _optional_bytes(item: Any) -> str:
    return "None" if item is None else show_bytes(bytes_of(item))


def show_bytes(data: bytes) -> str:
    """A Python bytes literal, cut at 64 bytes with the full length noted."""
    if len(data) <= _MAX_SHOWN:
        return repr(data)
    return f"{data[:_MAX_SHOWN]!r}... ({len(data)} bytes)"
