"""Session grants: an approval "for this session" that lets later calls run without a new pause — narrowly.

A grant is made in the transaction that approves a request with scope ``session`` and is bound to that
request's conversation (A2A context), its owner, its tool, who could decide it (a later call that a rule
gives other approvers is not covered: a grant never lets one set of approvers decide for another) and, by
default, the approved call's exact arguments; the approver may instead name one path argument and a glob
over it (``{"argument": "path", "glob": "/srv/reports/**"}``), which then covers any call of that tool whose
normalised path matches (the other arguments are free). A grant ends at ``grantTTL`` after it was made. A
call that runs under a grant is recorded like any other approval (``source: grant``, who granted it), so the
audit, the REST list and the ToolApproval (phase ``Granted``) show it.

:func:`covers` is pure; the rest reads and writes the ``gatehouse_grants`` table inside the caller's
transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from agent_runtime.approvals.tables import grants
from agent_runtime.contract.agent_config import ApproversConfig
from agent_runtime.contract.globs import glob_match

_ACTIVE = select(grants).where(
    grants.c.context_id == bindparam("context_id"), grants.c.owner == bindparam("owner"),
    grants.c.server == bindparam("server"), grants.c.tool == bindparam("tool"), grants.c.expires_at > bindparam("now"),
    grants.c.approvers_json == bindparam("approvers_json"),
).order_by(grants.c.created_at)


@dataclass(frozen=True)
class GrantTerms:
    """What an approver grants beyond the call itself: a glob over one path argument (None: the exact arguments)."""

    argument: str | None = None
    glob: str | None = None


@dataclass(frozen=True)
class Grant:
    id: str
    context_id: str
    owner: str
    server: str
    tool: str
    args_hash: str | None
    argument: str | None
    glob: str | None
    approvers_json: str  # the granting request's approvers ("" none), compared with a later call's
    granted_by: str
    request_id: str
    created_at: float
    expires_at: float

    def describe(self) -> str:
        what = f"{self.argument} matching {self.glob}" if self.glob else "the same arguments"
        return f"session grant {self.id} by {self.granted_by} for {self.tool} with {what} (approved with {self.request_id})"


def covers(grant: Grant, tool: str, args: dict[str, Any], hashed: str) -> bool:
    """Whether ``grant`` covers a call of ``tool`` with ``args`` (``hashed``: their canonical hash)."""
    if grant.tool != tool:
        return False
    if grant.glob is None or grant.argument is None:
        return grant.args_hash == hashed
    value = args.get(grant.argument)
    return isinstance(value, str) and bool(value) and glob_match(grant.glob, value)


def terms_problem(terms: GrantTerms, args: dict[str, Any]) -> str:
    """Why a glob grant cannot be made for a call with ``args`` ("" when it can): the glob must name a string
    argument of the call and cover the call being approved."""
    if terms.glob is None and terms.argument is None:
        return ""
    if not terms.glob or not terms.argument:
        return "a grant's glob needs both 'argument' (the name of a path argument) and 'glob'"
    value = args.get(terms.argument)
    if not isinstance(value, str):
        return f"the call has no string argument {terms.argument!r} for the grant's glob"
    if not glob_match(terms.glob, value):
        return f"the grant's glob {terms.glob!r} does not cover the approved call's {terms.argument}={value!r}"
    return ""


def approvers_key(approvers: ApproversConfig | None) -> str:
    return approvers.model_dump_json() if approvers is not None else ""


def make(
    conn: Connection, *, context_id: str, owner: str, server: str | None, tool: str, args_hash: str, terms: GrantTerms,
    approvers: ApproversConfig | None, granted_by: str, request_id: str, now: float, ttl: float,
) -> Grant:
    """Write a grant (inside the approving transaction)."""
    glob = terms.glob if terms.argument else None
    grant = Grant(
        id=f"grant-{uuid.uuid4().hex[:16]}", context_id=context_id, owner=owner, server=server or "", tool=tool,
        args_hash=None if glob else args_hash, argument=terms.argument if glob else None, glob=glob,
        approvers_json=approvers_key(approvers), granted_by=granted_by, request_id=request_id, created_at=now,
        expires_at=now + ttl,
    )
    conn.execute(grants.insert().values(**grant.__dict__))
    return grant


def horizon(conn: Connection) -> float:
    """When the last grant stored ends (0.0: there is none): no grant covers any call from then on."""
    return float(conn.execute(select(func.max(grants.c.expires_at))).scalar() or 0.0)


def find(conn: Connection, *, context_id: str, owner: str, server: str | None, tool: str, args: dict[str, Any],
         hashed: str, approvers: ApproversConfig | None, now: float) -> Grant | None:
    """The oldest unexpired grant of ``owner`` in ``context_id`` that covers this call (whose ``approvers`` the
    policy just chose), if any."""
    params = {"context_id": context_id, "owner": owner, "server": server or "", "tool": tool, "now": now,
              "approvers_json": approvers_key(approvers)}
    for row in conn.execute(_ACTIVE, params):
        grant = Grant(**row._mapping)
        if covers(grant, tool, args, hashed):
            return grant
    return None


__all__ = ["Grant", "GrantTerms", "covers", "find", "horizon", "make", "terms_problem"]
