"""The durable approvals table and the only code that changes it.

Exactly-once is enforced by the database, not by process memory, so it holds across restarts and replicas:

- :meth:`ApprovalService.decide` moves every named request from ``pending`` to its resolution in ONE
  transaction with conditional updates (``WHERE status = 'pending'``). If any of them was decided already
  (another channel won, or the message is a replay) the transaction rolls back and :class:`AlreadyDecided`
  says who decided what; nothing changes.
- :meth:`ApprovalService.claim_execution` moves an approved call from ``exec_state`` none to started right
  before the tool runs (again a conditional update, committed before the tool is called), after checking
  the arguments' hash. A second claim — a replay, a duplicate resume, a restart after the tool started — is
  refused, so an approved call runs at most once. :meth:`ApprovalService.finish_execution` records that the
  tool returned (done) and what its result said (approvals/execution.py: ran, failed, unknown, not sent; announced as
  ``executed``), so a refused claim can say truthfully whether the call ran or was cut short.

Every change also writes its audit event (approvals/audit.py) in the same transaction; votes are their own record.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select, update
from sqlalchemy.exc import OperationalError, ProgrammingError

from agent_runtime.approvals import audit, execution, schema
from agent_runtime.approvals import grants as grant_rows
from agent_runtime.approvals import votes as vote_rows
from agent_runtime.approvals.deciders import lookup as deciders_lookup
from agent_runtime.approvals.deciders import record as deciders_record
from agent_runtime.approvals.events import ApprovalEvents
from agent_runtime.approvals.records import ApprovalRecord, ApprovalStatus, Resolution, args_hash
from agent_runtime.approvals.tables import approvals, deciders, metadata, mirrored_objects
from agent_runtime.contract import redaction
from agent_runtime.contract.agent_config import ApproversConfig, RedactConfig
from agent_runtime.contract.authority import Judgement, Vote, judge
from agent_runtime.contract.edits import EditPlan
from agent_runtime.infra.database import Database
from agent_runtime.infra.fresh_ids import FreshIds
from agent_runtime.infra.prepared import Prepared, mappings

# The statements of the request path, built once (bind parameters): building a statement per call cost more
# than running it on sqlite; the writes are Prepared (agent_runtime/infra/prepared.py). (An UPDATE's parameters must not
# be named like a column.)
_ORDER = (approvals.c.created_at, approvals.c.position)
_TASKS = select(approvals).where(approvals.c.task_id == bindparam("task_id")).order_by(*_ORDER)
_FOR_TASK = Prepared(_TASKS)
_PENDING_FOR_TASK = Prepared(_TASKS.where(approvals.c.status == "pending"))
_BY_ID = Prepared(select(approvals).where(approvals.c.id == bindparam("request_id")))
_PENDING_IN_CONTEXT = select(approvals).where(
    approvals.c.context_id == bindparam("context_id"), approvals.c.status == "pending",
    approvals.c.requested_by == bindparam("owner"),
)
_LOCK = Prepared(select(approvals).where(approvals.c.id == bindparam("request_id")).with_for_update())
_DECIDE = Prepared(
    update(approvals)
    .where(approvals.c.id == bindparam("w_id"), approvals.c.task_id == bindparam("w_task_id"))
    .where(approvals.c.status == "pending")
    .values(status=bindparam("new_status"), reason=bindparam("new_reason"), scope=bindparam("new_scope"),
            source=bindparam("new_source"), decided_at=bindparam("new_decided_at"))
)
_EXPIRED = (
    select(approvals).where(approvals.c.status == "pending", approvals.c.expires_at <= bindparam("now"))
    .order_by(approvals.c.expires_at).limit(bindparam("limit"))
)
_BY_CALL = Prepared(select(approvals).where(approvals.c.call_id == bindparam("call_id")))
_FINISH = Prepared(
    update(approvals).where(approvals.c.call_id == bindparam("w_call_id"), approvals.c.exec_state == "started")
    .values(exec_state="done", exec_outcome=bindparam("new_outcome"), exec_error=bindparam("new_error"),
            executed_at=bindparam("new_at"))
)
_EDIT = (
    update(approvals).where(approvals.c.id == bindparam("w_id"), approvals.c.status == "pending")
    .values(args_json=bindparam("new_args_json"), args_hash=bindparam("new_args_hash"), hint=bindparam("new_hint"),
            approvers_json=bindparam("new_approvers_json"), original_args_json=bindparam("new_original_args_json"),
            edited_by=bindparam("new_edited_by"))
)
_INSERT = Prepared(approvals.insert())
# Abandon a request that did not run: still pending, decided approved but never claimed, or timed out (not a denial:
# what people decided stays as they decided it). A claim (exec_state) and this exclude each other.
_ABANDON = Prepared(
    update(approvals)
    .where(approvals.c.id == bindparam("w_id"), approvals.c.exec_state == "none",
           or_(approvals.c.status == "pending", approvals.c.status == "approved", approvals.c.status == "expired"))
    .values(status="abandoned", reason=bindparam("new_reason"), decided_at=bindparam("new_at"))
)
_CLAIM = Prepared(
    update(approvals).where(approvals.c.call_id == bindparam("w_call_id"), approvals.c.exec_state == "none")
    .values(exec_state="started")
)


class AlreadyDecided(Exception):
    """A decision for requests that are no longer pending. ``str(exc)`` is what the client is told."""

    def __init__(self, records: Sequence[ApprovalRecord]) -> None:
        self.records = list(records)
        details = "; ".join(r.describe_decision() for r in records) or "nothing is pending on this task"
        super().__init__(f"Already decided: {details}. Nothing was run again.")


class ArgumentsChanged(Exception):
    """A vote cast on arguments that are no longer the request's (an approver edited them since the voter looked).
    ``str(exc)`` is what the voter is told; nothing was written."""

    def __init__(self, record: ApprovalRecord) -> None:
        self.record = record
        super().__init__(
            f"The arguments of {record.id} ({record.tool}) were edited by {record.edited_by or 'an approver'} since you saw "
            f"them (args_hash is now {record.args_hash}): look at the request again. Nothing was decided."
        )


@dataclass(frozen=True)
class Voted:
    """One vote's effect: the request after it, and what the authority function said."""

    record: ApprovalRecord
    judgement: Judgement

    @property
    def decided(self) -> bool:
        """This vote made the outcome final."""
        return self.judgement.counted and self.judgement.tally.outcome != "pending"


@dataclass(frozen=True)
class Claim:
    """The answer to "may this approved call run now?"; ``problem`` says why not."""

    record: ApprovalRecord | None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


def _row_to_record(m: Mapping[str, Any]) -> ApprovalRecord:
    return ApprovalRecord(
        id=m["id"], task_id=m["task_id"], context_id=m["context_id"], confirmation_id=m["confirmation_id"],
        call_id=m["call_id"], tool=m["tool"], server=m["server"], args=json.loads(m["args_json"]),
        args_hash=m["args_hash"], hint=m["hint"], created_at=m["created_at"], expires_at=m["expires_at"],
        position=m["position"], status=m["status"], scope=m["scope"], reason=m["reason"], source=m["source"],
        decided_at=m["decided_at"], exec_state=m["exec_state"], requested_by=m["requested_by"] or "",
        approvers=ApproversConfig.model_validate_json(m["approvers_json"]) if m["approvers_json"] else None,
        redact=RedactConfig.model_validate_json(m["redact_json"]) if m["redact_json"] else None,
        original_args=json.loads(m["original_args_json"]) if m["original_args_json"] else None,
        edited_by=m["edited_by"] or "", exec_outcome=m["exec_outcome"] or None, exec_error=m["exec_error"] or "",
        executed_at=m["executed_at"],
    )


def _record_to_row(r: ApprovalRecord) -> dict[str, Any]:
    return {
        "id": r.id, "task_id": r.task_id, "context_id": r.context_id, "confirmation_id": r.confirmation_id,
        "call_id": r.call_id, "tool": r.tool, "server": r.server, "args_json": json.dumps(r.args),
        "args_hash": r.args_hash, "hint": r.hint, "created_at": r.created_at, "expires_at": r.expires_at,
        "position": r.position, "status": r.status, "scope": r.scope, "reason": r.reason, "source": r.source,
        "decided_at": r.decided_at, "exec_state": r.exec_state, "requested_by": r.requested_by,
        "approvers_json": r.approvers.model_dump_json() if r.approvers is not None else None,
        "redact_json": r.redact.model_dump_json() if r.redact is not None else None,
        "original_args_json": json.dumps(r.original_args) if r.original_args is not None else None,
        "edited_by": r.edited_by, "exec_outcome": r.exec_outcome or "", "exec_error": r.exec_error,
        "executed_at": r.executed_at,
    }


def _already_claimed(conn: Connection, call_id: str) -> str:
    """What a refused claim tells the model: the call ran, or it was cut short and its effect is unknown."""
    row = _BY_CALL.first(conn, {"call_id": call_id})
    if row is not None and row["exec_state"] == "done":
        return "this approved call was already executed; it was not run again"
    return (
        "this approved call was started once already and never reported back (the runtime restarted while it ran, "
        "or another replica is running it); it was not run again, so whether it took effect is unknown: check "
        "before asking for it again"
    )


class _Lost(Exception):
    def __init__(self, ids: list[str]) -> None:
        self.ids = ids


class ApprovalService:
    def __init__(
        self, db: Database, clock: Callable[[], float] = time.time, events: ApprovalEvents | None = None,
        fresh: FreshIds | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self.events = events or ApprovalEvents()
        self._fresh = fresh  # contexts with nothing stored yet (agent_runtime/infra/fresh_ids.py)
        # sqlite (one process writes): when the last grant ends (grants.horizon); no lookup before a pause after it.
        # None: unknown (Postgres, where other replicas make grants too): always look.
        self._grants_until: float | None = None

    async def create_tables(self) -> int:
        """Create what is missing and upgrade an older state (approvals/schema.py); returns the version found."""
        await self._db.create_tables(metadata)
        try:
            version = await self._db.run(schema.upgrade)
        except (OperationalError, ProgrammingError):
            version = await self._db.run(schema.upgrade)  # another replica added the same column at the same moment
        if self._db.sqlite:
            self._grants_until = await self._db.run(grant_rows.horizon, write=False)
        return version

    async def add_pending(self, records: Sequence[ApprovalRecord], rules: Mapping[str, str] | None = None) -> None:
        """Store new pending requests; ``rules``: the policy rule that gated each (``{request_id: rule}``, audit)."""
        if records:
            await self._db.run(self.pending_writes(records, rules))
            await self.added(records)

    def pending_writes(
        self, records: Sequence[ApprovalRecord], rules: Mapping[str, str] | None = None,
    ) -> Callable[[Connection], None]:
        """:meth:`add_pending`'s writes, for a caller to run inside a transaction of its own (the turn's session
        flush: one commit for both); announce them with :meth:`added` once committed."""
        if self._fresh is not None:
            for r in records:
                self._fresh.written(r.context_id)
        rows = [_record_to_row(r) for r in records]

        def write(conn: Connection) -> None:
            _INSERT(conn, rows)
            audit.requested(conn, records, rules or {})

        return write

    async def added(self, records: Sequence[ApprovalRecord]) -> None:
        """New pending requests were committed (:meth:`pending_writes`): tell the listeners (the mirror, metrics)."""
        await self.events.publish("requested", records)

    async def _select(self, stmt: Any, params: dict[str, Any] | None = None) -> list[ApprovalRecord]:
        return await self._db.run(lambda conn: [_row_to_record(m) for m in mappings(conn, stmt, params)], write=False)

    async def for_task(self, task_id: str, *, pending_only: bool = False) -> list[ApprovalRecord]:
        return await self._select(_PENDING_FOR_TASK if pending_only else _FOR_TASK, {"task_id": task_id})

    async def get(self, request_id: str) -> ApprovalRecord | None:
        found = await self._select(_BY_ID, {"request_id": request_id})
        return found[0] if found else None

    async def by_status(
        self, status: str | None = None, limit: int = 500, after: tuple[float, int, str] | None = None,
    ) -> list[ApprovalRecord]:
        """Newest first (then by position in the pause, then id); ``status`` None lists every state. ``after``: the
        ``(created_at, position, id)`` of the last record of the previous page (keyset paging: stable while requests
        are added or decided meanwhile)."""
        stmt = select(approvals)
        if status is not None:
            stmt = stmt.where(approvals.c.status == status)
        if after is not None:
            created, position, request_id = after
            c = approvals.c
            stmt = stmt.where(or_(
                c.created_at < created,
                and_(c.created_at == created, or_(c.position > position, and_(c.position == position, c.id > request_id))),
            ))
        order = (approvals.c.created_at.desc(), approvals.c.position, approvals.c.id)
        return await self._select(stmt.order_by(*order).limit(limit))

    async def pending_in_context(self, context_id: str, owner: str) -> list[ApprovalRecord]:
        """``owner``'s pending requests in ``context_id`` (another principal's context id shows nothing)."""
        if self._fresh is not None and context_id in self._fresh:
            return []
        return await self._select(_PENDING_IN_CONTEXT, {"context_id": context_id, "owner": owner})

    async def decide(
        self, task_id: str, resolutions: dict[str, Resolution], source: str, known: Sequence[ApprovalRecord] = (),
        also: Callable[[Connection, float], None] | None = None, by: str = "",
    ) -> list[ApprovalRecord]:
        """Resolve every named pending request of ``task_id`` at once, or none (:class:`AlreadyDecided`).

        ``known``: the caller's copies of the pending records, returned updated instead of re-reading them.
        ``also(conn, decided_at)``: more writes committed in the same transaction, only when the decision wins
        (who decided, an idempotency key); if it raises, nothing is decided. ``by``: who decided, for the audit
        (the principal who canceled the task; none for a timeout).
        """
        now = self._clock()

        def transaction(conn: Connection) -> None:
            lost = []
            for request_id, res in resolutions.items():
                changed = _DECIDE(conn, {
                    "w_id": request_id, "w_task_id": task_id, "new_status": res.status, "new_reason": res.reason,
                    "new_scope": res.scope, "new_source": source, "new_decided_at": now,
                })
                if changed != 1:
                    lost.append(request_id)
                else:
                    audit.decided(conn, request_id, now, status=res.status, source=source, by=by, reason=res.reason)
            if lost:
                raise _Lost(lost)  # rolls the whole transaction back
            if also is not None:
                also(conn, now)

        try:
            await self._db.run(transaction)
        except _Lost as exc:
            records = {r.id: r for r in await self.for_task(task_id)}
            raise AlreadyDecided([records[i] for i in exc.ids if i in records]) from None
        mine = {r.id: r for r in known if r.status == "pending"}
        if all(i in mine for i in resolutions):
            decided = [
                replace(mine[i], status=res.status, reason=res.reason, scope=res.scope, source=source, decided_at=now)
                for i, res in resolutions.items()
            ]
        else:
            records = {r.id: r for r in await self.for_task(task_id)}
            decided = [records[i] for i in resolutions]
        await self.events.publish("decided", decided, source)
        return decided

    async def vote(
        self, task_id: str, votes: dict[str, Vote], *, scope: str = "once",
        also: Callable[[Connection, float, list[Voted]], None] | None = None,
        grant: grant_rows.GrantTerms | None = None, grant_ttl: float = 3600.0,
        edits: Mapping[str, EditPlan] | None = None, seen: Mapping[str, str] | None = None,
        planners: Mapping[str, Callable[[ApprovalRecord], EditPlan | None]] | None = None,
    ) -> list[Voted]:
        """Cast one vote on each named pending request of ``task_id`` (``{request_id: vote}``), judged by
        :func:`agent_runtime.contract.authority.judge`, in ONE transaction: every vote is recorded (counted or refused,
        approvals/votes.py), and a request whose tally is final is decided (with who decided) like
        :meth:`decide`. A request that is no longer pending raises :class:`AlreadyDecided` and nothing is
        written. ``scope`` (once or session) applies to an approval this makes final; a session approval also
        makes a grant (approvals/grants.py: the exact arguments, or ``grant``'s glob) lasting ``grant_ttl``.
        ``also(conn, decided_at, results)`` runs in the same transaction (an idempotency key storing the answer),
        whatever the judgement. ``edits``: approvals with changed arguments (:mod:`agent_runtime.contract.edits`, checked by the
        caller against the policy); see :meth:`_edit`. ``planners``: edits planned inside this transaction from the
        locked request (``planner(record) -> EditPlan | None``; what it raises rolls everything back): the channels that
        show redacted arguments get their real values back against the record as it stands, never a copy read before
        (:class:`~agent_runtime.server.decide_one.DecideOne`). ``seen``: the arguments' hash each voter saw
        (``{request_id: args_hash}``); a request whose arguments differ now raises :class:`ArgumentsChanged`, and
        nothing is written.
        """
        now = self._clock()

        def transaction(conn: Connection) -> list[Voted]:
            results: list[Voted] = []
            lost: list[str] = []
            for request_id, cast in votes.items():
                row = _LOCK.first(conn, {"request_id": request_id})  # serialises votes on one request
                if row is None or row["task_id"] != task_id or row["status"] != "pending":
                    lost.append(request_id)
                    continue
                record = _row_to_record(row)
                if seen is not None and request_id in seen and seen[request_id] != record.args_hash:
                    raise ArgumentsChanged(record)  # rolls the whole transaction back
                # Without approvers one counted vote decides, so a pending request has none counted yet: nothing to read.
                earlier = vote_rows.for_request(conn, request_id) if record.approvers is not None else []
                plan = (edits or {}).get(request_id)
                if planners is not None and request_id in planners:
                    plan = planners[request_id](record)
                if plan is not None:
                    refused = self._edit(conn, record, cast, plan, now)
                    if refused is not None:
                        results.append(Voted(record, refused))
                        continue
                    record = replace(record, args=plan.args, args_hash=args_hash(record.tool, plan.args), hint=plan.hint,
                                     approvers=plan.approvers, original_args=record.requested_args,
                                     edited_by=cast.principal)
                    earlier = []  # cast on the arguments before the edit: they no longer count (approvals/votes.py)
                judgement = judge(record.approvers, record.requested_by, vote_rows.counted(earlier), cast)
                vote_rows.write(conn, request_id, vote_rows.CastVote(cast, now, judgement.counted, judgement.refused),
                                record.args_hash)
                tally = judgement.tally
                if judgement.counted and tally.outcome != "pending":
                    status: ApprovalStatus = "approved" if tally.outcome == "approved" else "denied"
                    reason = tally.denied_by.reason if tally.denied_by is not None else cast.reason
                    _DECIDE(conn, {
                        "w_id": request_id, "w_task_id": task_id, "new_status": status, "new_reason": reason,
                        "new_scope": scope if status == "approved" else "once", "new_source": cast.channel,
                        "new_decided_at": now,
                    })
                    deciders_record(conn, request_id, tally.decided_by, now)
                    audit.decided(conn, request_id, now, status=status, source=cast.channel, by=tally.decided_by, reason=reason)
                    if status == "approved" and scope == "session":
                        made = grant_rows.make(
                            conn, context_id=record.context_id, owner=record.requested_by, server=record.server,
                            tool=record.tool, args_hash=record.args_hash, terms=grant or grant_rows.GrantTerms(),
                            approvers=record.approvers, granted_by=tally.decided_by, request_id=request_id, now=now,
                            ttl=grant_ttl,
                        )
                        if self._grants_until is not None:  # set before commit: too late a horizon only costs lookups
                            self._grants_until = max(self._grants_until, made.expires_at)
                    record = replace(record, status=status, reason=reason, source=cast.channel, decided_at=now,
                                     scope=scope if status == "approved" else "once")
                results.append(Voted(record, judgement))
            if lost:
                raise _Lost(lost)
            if also is not None:
                also(conn, now, results)
            return results

        try:
            results = await self._db.run(transaction)
        except _Lost as exc:
            records = {r.id: r for r in await self.for_task(task_id)}
            raise AlreadyDecided([records[i] for i in exc.ids if i in records]) from None
        decided = [v.record for v in results if v.decided]
        if decided:
            await self.events.publish("decided", decided, decided[0].source)
        channel = next(iter(votes.values())).channel if votes else ""
        await self.events.publish("voted", [v.record for v in results if not v.decided], channel)
        return results

    async def refuse_vote(self, request_id: str, vote: Vote, note: str) -> ApprovalRecord | None:
        """Record ``vote`` on a pending request as not counted, with why (an edit the policy refused, seen by a channel
        that must answer through the record, such as kubectl); None when the request is not pending."""
        now = self._clock()

        def transaction(conn: Connection) -> ApprovalRecord | None:
            row = _LOCK.first(conn, {"request_id": request_id})
            if row is None or row["status"] != "pending":
                return None
            record = _row_to_record(row)
            vote_rows.write(conn, request_id, vote_rows.CastVote(vote, now, False, note), record.args_hash)
            return record

        record = await self._db.run(transaction)
        if record is not None:
            await self.events.publish("voted", [record], vote.channel)
        return record

    @staticmethod
    def _edit(
        conn: Connection, record: ApprovalRecord, cast: Vote, plan: EditPlan, now: float,
    ) -> Judgement | None:
        """Apply an edit inside :meth:`vote`'s transaction, or refuse it (the judgement, recorded as a vote that did not
        count): only a person who may decide the request as it stands may change its arguments. The request keeps the
        model's arguments (``original_args``) and who edited; votes counted so far stop counting (they approved other
        arguments, approvals/votes.py); the audit gets an ``edited`` event with what changed and both arguments' hashes."""
        judgement = judge(record.approvers, record.requested_by, [], cast)  # may this person decide it at all?
        if not judgement.counted:
            note = f"the edit was not applied: {judgement.refused}"
            vote_rows.write(conn, record.id, vote_rows.CastVote(cast, now, False, note), record.args_hash)
            return replace(judgement, refused=note)
        new_hash = args_hash(record.tool, plan.args)
        conn.execute(_EDIT, {
            "w_id": record.id, "new_args_json": json.dumps(plan.args), "new_args_hash": new_hash, "new_hint": plan.hint,
            "new_approvers_json": plan.approvers.model_dump_json() if plan.approvers is not None else None,
            "new_original_args_json": json.dumps(record.requested_args), "new_edited_by": cast.principal,
        })
        audit.edited(conn, record.id, now, by=cast.principal, channel=cast.channel,
                     reason=f"changed {', '.join(plan.changed)}; arguments sha256 {record.args_hash} -> {new_hash}")
        return None

    async def grant_for(
        self, context_id: str, owner: str, server: str | None, tool: str, args: dict[str, Any],
        approvers: ApproversConfig | None,
    ) -> grant_rows.Grant | None:
        """The unexpired session grant that covers this call (with these ``approvers``), if any (approvals/grants.py)."""
        hashed, now = args_hash(tool, args), self._clock()
        if self._grants_until is not None and now >= self._grants_until:
            return None  # every grant this database holds has ended
        return await self._db.run(lambda conn: grant_rows.find(
            conn, context_id=context_id, owner=owner, server=server, tool=tool, args=args, hashed=hashed,
            approvers=approvers, now=now,
        ), write=False)

    async def record_granted(
        self, grant: grant_rows.Grant, *, task_id: str, call_id: str, tool: str, server: str | None,
        args: dict[str, Any], hint: str, approvers: ApproversConfig | None = None, redact: RedactConfig | None = None,
        rule: str = "",
    ) -> ApprovalRecord:
        """A call that runs now under ``grant``: recorded as approved (``source: grant``, decided by who granted it)
        and claimed for execution, like an approved call about to run; announced as ``decided``."""
        now = self._clock()
        record = ApprovalRecord(
            id=f"apr-{uuid.uuid4().hex[:16]}", task_id=task_id, context_id=grant.context_id, confirmation_id="",
            call_id=call_id or f"granted-{uuid.uuid4().hex[:16]}", tool=tool, server=server, args=dict(args),
            args_hash=args_hash(tool, args), hint=hint, created_at=now, expires_at=now, status="approved",
            scope="session", reason=f"under {grant.describe()}", source="grant", decided_at=now, exec_state="started",
            requested_by=grant.owner, approvers=approvers, redact=redact,
        )

        def write(conn: Connection) -> None:
            _INSERT(conn, [_record_to_row(record)])
            deciders_record(conn, record.id, grant.granted_by, now)
            audit.granted(conn, record, grant.granted_by, rule)

        await self._db.run(write)
        await self.events.publish("decided", [record], "grant")
        return record

    async def deciders_of(self, request_ids: Sequence[str]) -> dict[str, str]:
        """Who decided each request, where that was recorded (approvals/deciders.py)."""
        return await deciders_lookup(self._db, request_ids)

    async def counted_votes(self, request_ids: Sequence[str]) -> dict[str, list[Vote]]:
        """The counted votes so far, per request (for the pause payload's ``approvers``)."""
        found = await vote_rows.lookup(self._db, request_ids)
        return {request_id: vote_rows.counted(cast) for request_id, cast in found.items()}

    async def cast_votes(self, request_ids: Sequence[str]) -> dict[str, list[vote_rows.CastVote]]:
        """Every vote recorded, counted or not, per request (the ToolApproval's status shows them)."""
        return await vote_rows.lookup(self._db, request_ids)

    async def remember_object(self, request_id: str, uid: str) -> None:
        """The runtime created the Kubernetes object with ``uid`` for ``request_id`` (kept across restarts)."""
        def write(conn: Connection) -> None:
            conn.execute(mirrored_objects.delete().where(mirrored_objects.c.request_id == request_id))
            conn.execute(mirrored_objects.insert().values(request_id=request_id, uid=uid))

        await self._db.run(write)

    async def object_uid(self, request_id: str) -> str | None:
        stmt = select(mirrored_objects.c.uid).where(mirrored_objects.c.request_id == request_id)
        return await self._db.run(lambda conn: conn.execute(stmt).scalar(), write=False)

    async def adopt_unowned(self, owner: str) -> int:
        """Requests recorded before they carried who asked: give them to ``owner`` (the tasks' new owner)."""
        stmt = update(approvals).where(approvals.c.requested_by == "").values(requested_by=owner)
        return int(await self._db.run(lambda conn: conn.execute(stmt).rowcount))

    async def claim_execution(self, call_id: str, tool: str, args_hash: str) -> Claim:
        def transaction(conn: Connection) -> Claim:
            row = _BY_CALL.first(conn, {"call_id": call_id})
            if row is None:
                return Claim(None, "no approval was recorded for this call; it was not run")
            record = _row_to_record(row)
            claim = self._claim(conn, record, call_id, tool, args_hash)
            if claim.ok:
                audit.started(conn, record.id, self._clock())
            else:
                audit.refused(conn, record.id, self._clock(), claim.problem)
            return claim

        return await self._db.run(transaction)

    @staticmethod
    def _claim(conn: Connection, record: ApprovalRecord, call_id: str, tool: str, args_hash: str) -> Claim:
        if record.status != "approved":
            return Claim(record, f"the call is {record.status}, not approved; it was not run")
        if record.tool != tool or record.requested_hash != args_hash:
            return Claim(record, "the call's arguments differ from the approved ones; it was not run")
        if _CLAIM(conn, {"w_call_id": call_id}) != 1:
            return Claim(record, _already_claimed(conn, call_id))
        return Claim(replace(record, exec_state="started"))

    async def abandon(self, request_ids: Sequence[str], reason: str) -> list[ApprovalRecord]:
        """Mark requests nobody waits for any more ``abandoned`` (a gateway's held calls, agent_runtime/gateway/held.py):
        final, never run, a later vote refused as already decided. A request that was claimed to run, or denied, is
        left as it is. Returns the requests abandoned now (announced as ``decided``)."""
        now = self._clock()

        def transaction(conn: Connection) -> list[str]:
            done = []
            for request_id in request_ids:
                if _ABANDON(conn, {"w_id": request_id, "new_reason": reason, "new_at": now}) == 1:
                    audit.abandoned(conn, request_id, now, reason)
                    done.append(request_id)
            return done

        done = await self._db.run(transaction)
        records = [r for r in [await self.get(i) for i in done] if r is not None]
        if records:
            await self.events.publish("decided", records, "gateway")
        return records

    async def finish_execution(self, call_id: str, result: Any) -> ApprovalRecord | None:
        """The claimed call's tool returned ``result``: record and audit what it says (approvals/execution.py), its error
        redacted as the call's arguments are, and announce it (``executed``). None: the call was not claimed."""
        said = execution.classify(result)

        def transaction(conn: Connection) -> ApprovalRecord | None:
            row = _BY_CALL.first(conn, {"call_id": call_id})
            if row is None:
                return None
            record, now = _row_to_record(row), self._clock()
            error = redaction.redact_text(said.error, record.redact) if said.error else ""
            if _FINISH(conn, {"w_call_id": call_id, "new_outcome": said.outcome, "new_error": error, "new_at": now}) != 1:
                return None
            audit.executed(conn, record.id, now, said.outcome, error)
            return replace(record, exec_state="done", exec_outcome=said.outcome, exec_error=error, executed_at=now)

        finished = await self._db.run(transaction)
        if finished is not None:
            await self.events.publish("executed", [finished])
        return finished

    async def expired(self, now: float | None = None, limit: int = 100) -> dict[str, list[ApprovalRecord]]:
        """Pending requests past their ``expires_at``, by task."""
        params = {"now": self._clock() if now is None else now, "limit": limit}
        by_task: dict[str, list[ApprovalRecord]] = {}
        for record in await self._select(_EXPIRED, params):
            by_task.setdefault(record.task_id, []).append(record)
        return by_task

    async def next_expiry(self) -> float | None:
        stmt = select(func.min(approvals.c.expires_at)).where(approvals.c.status == "pending")
        return await self._db.run(lambda conn: conn.execute(stmt).scalar(), write=False)

    async def tasks_decided_with_decider(self, since: float) -> list[tuple[str, str]]:
        """``(task_id, context_id)`` of tasks with a request decided since ``since`` by a channel that recorded who
        decided (one request at a time: REST, Kubernetes)."""
        stmt = (
            select(approvals.c.task_id, approvals.c.context_id)
            .join(deciders, deciders.c.request_id == approvals.c.id)
            .where(deciders.c.decided_at >= since)
            .distinct()
        )
        return await self._db.run(lambda conn: [(row[0], row[1]) for row in conn.execute(stmt)], write=False)

    async def pending_count(self) -> int:
        stmt = select(func.count()).select_from(approvals).where(approvals.c.status == "pending")
        return int(await self._db.run(lambda conn: conn.execute(stmt).scalar() or 0, write=False))


__all__ = ["AlreadyDecided", "ApprovalService", "ArgumentsChanged", "Claim", "Voted", "approvals", "deciders", "metadata"]
