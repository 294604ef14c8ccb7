"""The runtime's inbox source: one agent's approvals table, decided through ``DecideOne``.

Reading: the viewer sees a request when :func:`agent_runtime.authority.may_see` says so (the requester, and whoever
may decide it), exactly as REST lists them; the cards carry the arguments as approvers see them (redacted), the votes
recorded so far and the last user message of the task. Questions (``hitl_request``) are shown to the task's owner
only: they answer them over A2A from the page, the path every A2A client uses.

Deciding: a person's click is a :class:`~agent_runtime.authority.Vote` cast through
:class:`~agent_runtime.server.decide_one.DecideOne` (channel ``inbox``), the path of REST and kubectl: judged by the
one authority function, recorded in the votes table, N-of-M, the call run exactly once when the pause resumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from a2a.server.context import ServerCallContext
from a2a.types import Role, Task

from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.authority import Vote, may_see, tally, who_may_decide
from agent_runtime.principals import Principal
from agent_runtime.questions.store import HitlRecord, HitlStore
from agent_runtime.server.decide_one import DecideOne, UnknownRequest
from agent_runtime.server.owners import acting_for
from agent_runtime.server.task_store import CachedTaskStore
from agent_runtime.ui.cards import Card, Filters, Outcome, Question, VoteLine, last_user_text, newest_first
from agent_runtime.ui.source import Ballot, Listener

CHANNEL = "inbox"


class RuntimeInbox:
    chat = True
    problem = ""  # the runtime reads its own table: nothing is refused to it

    def __init__(
        self, agent: str, *, approvals: ApprovalService, decide_one: DecideOne, tasks: CachedTaskStore,
        questions: HitlStore | None, allow_session: bool, clock: Callable[[], float] = time.time,
    ) -> None:
        self.title = f"agent {agent}"
        self.agents: tuple[str, ...] = (agent,)
        self._agent = agent
        self._approvals = approvals
        self._decide = decide_one
        self._tasks = tasks
        self._questions = questions
        self._allow_session = allow_session
        self._clock = clock

    # --- reading --------------------------------------------------------------------------------

    async def pending(self, viewer: Principal) -> list[Card]:
        return newest_first(await self._cards(await self._approvals.by_status("pending"), viewer))

    async def history(self, viewer: Principal, filters: Filters) -> list[Card]:
        now = self._clock()
        cards = await self._cards(await self._approvals.by_status(None), viewer, context=False)
        return sorted((c for c in cards if filters.admits(c, now)), key=lambda c: c.decided_at or c.created_at, reverse=True)

    async def card(self, viewer: Principal, key: str) -> Card | None:
        record = await self._approvals.get(key)
        if record is None:
            return None
        cards = await self._cards([record], viewer)
        return cards[0] if cards else None

    async def questions(self, viewer: Principal) -> list[Question]:
        if self._questions is None:
            return []
        found = []
        for record in await self._questions.open_questions(limit=500):
            if await self._tasks.owner_of(record.task_id) == viewer.id:
                found.append(await self._question(record, viewer))
        return sorted(found, key=lambda q: q.created_at, reverse=True)

    async def sees(self, viewer: Principal, changed: str) -> bool:
        record = await self._approvals.get(changed)
        if record is not None:
            return self._visible(record, viewer)
        return await self._tasks.owner_of(changed) == viewer.id  # a question: announced by its task id

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        def on_approval(event: ApprovalEvent) -> None:
            for record in event.records:
                listener(record.id)

        def on_question(_: str, record: HitlRecord) -> None:
            listener(record.task_id)

        stops = [self._approvals.events.subscribe(on_approval)]
        if self._questions is not None:
            stops.append(self._questions.subscribe(on_question))

        def unsubscribe() -> None:
            for stop in stops:
                stop()

        return unsubscribe

    @staticmethod
    def _visible(record: ApprovalRecord, viewer: Principal) -> bool:
        return may_see(record.approvers, record.requested_by, viewer.id, viewer.groups)

    async def _cards(self, records: Sequence[ApprovalRecord], viewer: Principal, context: bool = True) -> list[Card]:
        visible = [r for r in records if self._visible(r, viewer)]
        if not visible:
            return []
        ids = [r.id for r in visible]
        cast = await self._approvals.cast_votes(ids)
        deciders = await self._approvals.deciders_of(ids)
        cards = []
        for record in visible:
            votes = cast.get(record.id, [])
            counted = [v.vote for v in votes if v.counted]
            so_far = tally(record.approvers, record.requested_by, counted)
            cards.append(Card(
                id=record.id, agent=self._agent, tool=record.tool, args=record.shown.args, hint=record.hint,
                status=record.status, created_at=record.created_at, expires_at=record.expires_at,
                server=record.server or "", redacted=tuple(record.shown.paths), requested_by=record.requested_by,
                context=await self._last_user_text(record.task_id) if context else "",
                task_id=record.task_id, context_id=record.context_id,
                decided_by=deciders.get(record.id, "") or (record.source if record.status != "pending" else ""),
                decided_at=record.decided_at, reason=record.reason, source=record.source,
                required=so_far.required, approvals=len(so_far.approvals),
                waiting_for=who_may_decide(record.approvers, record.requested_by)
                if record.approvers is not None and record.status == "pending" else "",
                votes=tuple(VoteLine(v.vote.principal, v.vote.ballot, v.vote.channel, v.counted, v.note) for v in votes),
                session_allowed=self._allow_session, args_hash=record.args_hash,
            ))
        return cards

    async def _question(self, record: HitlRecord, viewer: Principal) -> Question:
        prompt = record.prompt()
        return Question(
            id=record.id, agent=self._agent, question=prompt.question, options=tuple(prompt.options), stage=prompt.stage,
            created_at=record.created_at, expires_at=record.expires_at, task_id=record.task_id,
            context_id=record.context_id, selected=prompt.selected_option,
            confirmation=prompt.confirmation_message or "", default=prompt.default_option,
            context=await self._last_user_text(record.task_id, viewer.id),
        )

    async def _last_user_text(self, task_id: str, owner: str | None = None) -> str:
        owner = owner or await self._tasks.owner_of(task_id)
        if owner is None:
            return ""
        task = await self._tasks.get(task_id, ServerCallContext(user=acting_for(owner)))
        return last_user_text(_messages(task)) if task is not None else ""

    # --- deciding -------------------------------------------------------------------------------

    async def decide(self, viewer: Principal, key: str, ballot: Ballot, reason: str, session: bool) -> Outcome:
        record = await self._approvals.get(key)
        if record is None or not self._visible(record, viewer):
            return Outcome(key, False, "unknown", f"no approval request {key!r} that you may see")
        if session and not self._allow_session:
            return Outcome(key, False, "invalid", f"agent {self._agent} does not allow approvals for the session")
        if record.status != "pending":
            return Outcome(key, False, "already", await self._already(record))
        vote = Vote(viewer.id, viewer.groups, ballot, reason, CHANNEL, viewer.seen_as)
        try:
            one = await self._decide(key, vote, scope="session" if session and ballot == "approve" else "once")
        except UnknownRequest:
            return Outcome(key, False, "unknown", f"no approval request {key!r}")
        except AlreadyDecided:
            current = await self._approvals.get(key)
            return Outcome(key, False, "already", await self._already(current or record))
        judgement = one.judgement
        if not judgement.counted:
            return Outcome(key, False, "refused", f"your vote does not count: {judgement.refused}")
        if one.voted.decided:
            decided = one.record
            return Outcome(key, True, "decided", f"{decided.tool}: {decided.status} (decided by {judgement.tally.decided_by})")
        return Outcome(key, True, "counted", f"{record.tool}: your approval counted, {judgement.tally.progress()}; "
                                             "still waiting for more approvals")

    async def _already(self, record: ApprovalRecord) -> str:
        by = (await self._approvals.deciders_of([record.id])).get(record.id) or record.source or "?"
        if record.status == "expired":
            return f"{record.tool}: already timed out; nothing was decided"
        return f"{record.tool}: already {record.status} by {by}" + (f" ({record.reason})" if record.reason else "")


def _messages(task: Task) -> list[tuple[str, str]]:
    """The task's history as (role, text) pairs; decisions and answers (data parts) carry no text."""
    out = []
    for message in task.history:
        text = " ".join(p.text for p in message.parts if p.HasField("text"))
        out.append(("user" if message.role == Role.ROLE_USER else "agent", text))
    return out


__all__ = ["CHANNEL", "RuntimeInbox"]
