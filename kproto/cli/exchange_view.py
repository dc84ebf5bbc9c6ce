"""Exchanges and capture problems as text lines, verbose trees, and JSON records (``kproto pcap``)."""

from __future__ import annotations

import datetime
from typing import Any, Dict, Iterator, List, Optional

from kproto._generated.error_codes import name_in_context
from kproto.capture.conversation import Exchange, Problem
from kproto.cli.filter_fields import all_error_codes
from kproto.cli.json_values import bytes_json, error_json, message_json
from kproto.cli.sasl_view import label_sasl_authenticate
from kproto.cli.terminal_style import Style
from kproto.cli.tree_view import tree_lines

__all__ = [
    "EXCHANGE_KEYS",
    "PROBLEM_KEYS",
    "exchange_json",
    "problem_json",
    "exchange_line",
    "exchange_tree",
    "problem_line",
    "format_time",
]

EXCHANGE_KEYS = (
    "record",
    "connection",
    "client",
    "server",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "client_id",
    "request_time_ns",
    "response_time_ns",
    "latency_ns",
    "request_size",
    "response_size",
    "request_packet",
    "response_packet",
    "expects_response",
    "answered",
    "error_codes",
    "request_header",
    "request",
    "request_error",
    "response_header",
    "response",
    "response_error",
    "sasl_mechanism",
)
PROBLEM_KEYS = ("record", "kind", "detail", "connection", "source", "offset", "packet", "timestamp_ns", "frame")


def format_time(timestamp_ns: Optional[int]) -> str:
    """UTC wall-clock time with microseconds, ``-`` when unknown."""
    if timestamp_ns is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(timestamp_ns / 1e9, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _client_id(exchange: Exchange) -> Optional[str]:
    header = exchange.request_header
    return None if header is None else header.client_id


def exchange_json(
    exchange: Exchange, verbose: bool = False, max_records: Optional[int] = None, show_secrets: bool = False
) -> Dict[str, Any]:
    """The JSON record of an exchange (keys :data:`EXCHANGE_KEYS`, always all present); ``max_records``
    bounds the messages listed per record set with ``verbose``; SASL secrets are redacted unless
    ``show_secrets`` (:mod:`kproto.cli.sasl_view`)."""
    request, response = exchange.request, exchange.response
    record = {
        "record": "exchange",
        "connection": exchange.connection.serial,
        "client": str(exchange.client),
        "server": str(exchange.server),
        "api_key": exchange.api_key,
        "api_name": exchange.api_name,
        "api_version": exchange.api_version,
        "correlation_id": exchange.correlation_id,
        "client_id": _client_id(exchange),
        "request_time_ns": exchange.request_time_ns,
        "response_time_ns": exchange.response_time_ns,
        "latency_ns": exchange.latency_ns,
        "request_size": exchange.request_size,
        "response_size": exchange.response_size,
        "request_packet": exchange.request_packet,
        "response_packet": exchange.response_packet,
        "expects_response": exchange.expects_response,
        "answered": exchange.answered,
        "error_codes": all_error_codes(exchange),
        "request_header": None if exchange.request_header is None else exchange.request_header.to_dict(),
        "request": None if request is None else message_json(request, verbose, max_records, exchange.api_version),
        "request_error": error_json(exchange.request_error),
        "response_header": None if exchange.response_header is None else exchange.response_header.to_dict(),
        "response": None
        if response is None
        else message_json(response, verbose, max_records, _response_version(exchange)),
        "response_error": error_json(exchange.response_error),
        "sasl_mechanism": exchange.sasl_mechanism,
    }
    label_sasl_authenticate(record, exchange, show_secrets)
    return record


def problem_json(problem: Problem) -> Dict[str, Any]:
    """The JSON record of a capture problem (keys :data:`PROBLEM_KEYS`); ``frame`` holds the frame bytes
    nothing else reports (an undecodable or unpaired frame), as ``{"$bytes"}``."""
    source = None
    if problem.connection is not None and problem.direction is not None:
        source = str(problem.connection.source(problem.direction))
    return {
        "record": "problem",
        "kind": problem.kind.value,
        "detail": problem.detail,
        "connection": None if problem.connection is None else problem.connection.serial,
        "source": source,
        "offset": problem.offset,
        "packet": problem.packet,
        "timestamp_ns": problem.timestamp_ns,
        "frame": None if problem.frame is None else bytes_json(problem.frame),
    }


def exchange_line(exchange: Exchange, style: Style) -> str:
    """``time  #conn client > server  Api vN  corr=..  client=..  sizes  latency  errors``."""
    latency = exchange.latency_ns
    if not exchange.expects_response:
        outcome = "no response expected"
        timing = ""
    elif not exchange.answered:
        outcome = style("error", "unanswered")
        timing = ""
    else:
        outcome = _errors_text(exchange, style)
        timing = f"  {latency / 1e6:.3f} ms" if latency is not None else ""
    sizes = f"{exchange.request_size}B" + (f"/{exchange.response_size}B" if exchange.response_size is not None else "")
    client_id = _client_id(exchange)
    parts = [
        format_time(exchange.request_time_ns),
        f"#{exchange.connection.serial} {exchange.client} > {exchange.server}",
        style(
            "title",
            f"{exchange.api_name} v{exchange.api_version}"
            + (f" [{exchange.sasl_mechanism or 'mechanism unknown'}]" if exchange.api_key == 36 else ""),
        ),
        f"corr={exchange.correlation_id}",
        f"client={client_id!r}" if client_id is not None else "client=-",
        sizes + timing,
        outcome,
    ]
    return "  ".join(parts)


def _response_version(exchange: Exchange) -> int:
    """The version the response was read in (an ApiVersions refusal is read in v0 whatever was asked)."""
    return exchange.api_version if exchange.response_version is None else exchange.response_version


def _errors_text(exchange: Exchange, style: Style) -> str:
    failures: List[str] = []
    for what, error in (("request", exchange.request_error), ("response", exchange.response_error)):
        if error is not None:
            failures.append(style("error", f"{what} not decoded: {error}"))
    codes = all_error_codes(exchange)
    if codes:
        context = type(exchange.response).__name__ if exchange.response is not None else None
        failures.append(style("error", "errors " + ",".join(f"{name_in_context(c, context)}({c})" for c in codes)))
    return "; ".join(failures) if failures else "ok"


def exchange_tree(
    exchange: Exchange, verbose: bool = True, max_records: Optional[int] = None, show_secrets: bool = False
) -> Iterator[str]:
    """The decoded request and response under an exchange line (``pcap -v``)."""
    bodies = {
        "request": None
        if exchange.request is None
        else message_json(exchange.request, verbose, max_records, exchange.api_version),
        "response": None
        if exchange.response is None
        else message_json(exchange.response, verbose, max_records, _response_version(exchange)),
    }
    label_sasl_authenticate(bodies, exchange, show_secrets)
    for what, header in (("request", exchange.request_header), ("response", exchange.response_header)):
        body = bodies[what]
        if body is None:
            continue
        yield f"  {what}:"
        if header is not None:
            yield f"    header: {header.to_dict()}"
        yield from tree_lines(body, 4)


def problem_line(problem: Problem, style: Style) -> str:
    return style("problem", f"{format_time(problem.timestamp_ns)}  ! {problem}")
