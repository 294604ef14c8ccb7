"""``GET /approvals`` a page at a time: ``limit`` and an opaque ``cursor``, keyset-paged on the store's order.

The cursor names the last record a page *looked at* (newest first: ``created_at``, ``position``, ``id``), not an
offset, so a page is the same whatever was added or decided meanwhile. It is plain base64url JSON — it carries no
secret and grants nothing: the next page is filtered for its caller like the first.
"""

from __future__ import annotations

import base64
import binascii
import json

from agent_runtime.approvals import ApprovalRecord

DEFAULT_LIMIT = 100
MAX_LIMIT = 500


class PageError(ValueError):
    """A ``limit`` or ``cursor`` that cannot be used; ``str`` is for the client."""


def limit_of(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise PageError(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {raw!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise PageError(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {value}")
    return value


def cursor_of(record: ApprovalRecord) -> str:
    raw = json.dumps([record.created_at, record.position, record.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def after_of(cursor: str | None) -> tuple[float, int, str] | None:
    if not cursor:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        created, position, request_id = value
        if isinstance(created, bool) or isinstance(position, bool) or not isinstance(request_id, str):
            raise ValueError
        return float(created), int(position), request_id
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise PageError("cursor is not one this API gave out; start again without it") from None


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "PageError", "after_of", "cursor_of", "limit_of"]
