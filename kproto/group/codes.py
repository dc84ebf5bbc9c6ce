"""The error codes the group membership APIs answer (0.9.0 Java names, protocol.md §3.1).

Only the codes that the coordinator and member machines produce or react to are listed.  They are an
``IntEnum`` so a response's ``error_code`` is an ``int`` on the wire and readable in a ``repr``.
"""

from __future__ import annotations

import enum

__all__ = ["ErrorCode"]


class ErrorCode(enum.IntEnum):
    """Numeric error codes of the 0.9 group APIs (a subset of the full 0.9.0 table)."""

    UNKNOWN = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    GROUP_LOAD_IN_PROGRESS = 14
    GROUP_COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR_FOR_GROUP = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    GROUP_AUTHORIZATION_FAILED = 30
