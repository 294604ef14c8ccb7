"""The runtime's inbox source: one agent's approvals table, decided through ``DecideOne``.

Reading: the viewer sees a request when :func:`agent_runtime.contract.authority.may_see` says so (the requester, and whoever
may decide it), exactly as REST lists them; the cards carry the arguments as approvers see them (redacted), the votes
recorded so far and the last user message of the task. Questions (``hitl_request``) are shown to the task's owner
only: they answer them over A2A from the page, the path every A2A client uses.

Deciding: a person's click is a :class:`~agent_runtime.contract.authority.Vote` cast through
:class:`~agent_runtime.server.decide_one.DecideOne` (channel ``inbox``), the path of REST and kubectl: judged by the
one authority function, recorded in the votes table, N-of-M, the call run exactly once when the pause resumes.

Edit and approve (:meth:`RuntimeInbox.approve_edited`): where the policy allows it (:func:`agent_runtime.contract.edits.editable`)
a card is :attr:`~agent_runtime.ui.cards.Card.editable`; the page sends the fields the approver changed, which are laid
over the arguments *as shown* and handed to ``DecideOne`` as the call's complete new arguments. ``DecideOne`` gives
redacted fields their real values back inside the vote's transaction (a field left as shown keeps its real value; a
redacted one changed is refused, nobody edits what they cannot see) and checks the whole policy again. The approver's
page never holds a redacted value.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import Role, Task

from agent_runtime.approvals import AlreadyDecided, ApprovalRecord, ApprovalService, ArgumentsChanged
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.contract import edits, redaction
from agent_runtime.contract.authority import Vote, may_see, tally, who_may_decide
from agent_runtime.contract.principals import Principal
from agent_runtime.questions.store import QuestionRecord, QuestionStore
from agent_runtime.server.decide_one import DecideOne, UnknownRequest
from agent_runtime.server.owners import acting_for
from agent_runtime.server.task_store import CachedTaskStore
from agent_runtime.ui import held_questions as questions
from agent_runtime.ui.cards import Card, Filters, Outcome, Question, VoteLine, last_user_text, newest_first
from agent_runtime.ui.source import Ballot, Listener

CHANNEL = "inbox"


class RuntimeInbox:
    chat = True
    problem = ""  # the runtime reads its own table: nothing is refused to it

    def __init__(
        self, agent: str, *, approvals: ApprovalService, decide_one: DecideOne, tasks: CachedTaskStore | None,
        questions: QuestionStore | None, allow_session: bool, clock: Callable[[], float] = time.time,
        gateway: bool = False,
    ) -> None:
        # ``gateway``: the held calls of an MCPGateway (agent_runtime/gateway): its cards name it as kubectl does
        # (``gateway/<name>``), and there is no chat, since a gateway has no agent to talk to. ``tasks`` None: no A2A
        # tasks (a gateway's), so no conversation to quote and no questions.
        self.title = f"gateway {agent}" if gateway else f"agent {agent}"
        self.chat = not gateway
        self._agent = f"gateway/{agent}" if gateway else agent
        self.agents: tuple[str, ...] = (self._agent,)
        self._approvals = approvals
        self._decide = decide_one
        self._tasks = tasks
        self._questions = questions
        self._allow_session = allow_session
        self._clock = clock

    # --- reading --------------------------------------------------------------------------------

    async def pending(self, viewer: Principal) -> list[Card]:
        records = await self._approvals.by_status("pending")
        waits = Counter(r.task_id for r in records)  # a task goes on once each of its calls is decided
        return newest_first([replace(c, task_waits=waits[c.task_id]) for c in await self._cards(records, viewer)])

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
        if self._questions is None or self._tasks is None:
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
        if self._tasks is None:
            return False
        return await self._tasks.owner_of(changed) == viewer.id  # a question: announced by its task id

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        def on_approval(event: ApprovalEvent) -> None:
            for record in event.records:
                listener(record.id)

        def on_question(_: str, record: QuestionRecord) -> None:
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
            edited = record.edited_view()
            original = redaction.redact(edited.original_args, record.redact) if edited is not None else None
            cards.append(Card(
                id=record.id, agent=self._agent, tool=record.tool, args=record.shown.args, hint=record.hint,
                status=record.status, created_at=record.created_at, expires_at=record.expires_at,
                server=record.server or "", redacted=tuple(record.shown.paths), requested_by=record.requested_by,
                context=await self._context(record) if context else "",
                task_id=record.task_id, context_id=record.context_id,
                decided_by=deciders.get(record.id, "") or (record.source if record.status != "pending" else ""),
                decided_at=record.decided_at, reason=record.reason, source=record.source,
                required=so_far.required, approvals=len(so_far.approvals),
                waiting_for=who_may_decide(record.approvers, record.requested_by)
                if record.approvers is not None and record.status == "pending" else "",
                votes=tuple(VoteLine(v.vote.principal, v.vote.ballot, v.vote.channel, v.counted, v.note) for v in votes),
                session_allowed=self._allow_session, session_ttl=self._grant_ttl(), args_hash=record.args_hash,
                editable=self._editable(record),
                edited_by=edited.by if edited is not None else "",
                original_args=original.args if original is not None else None,
                original_redacted=original.paths if original is not None else (),
                changed=tuple(edited.changed) if edited is not None else (),
                execution=record.exec_outcome, execution_error=record.exec_error,
                asks=tuple((q.question, tuple((o.label, questions.answer_reason(q.question, o.label)) for o in q.options))
                           for q in questions.asked(record.tool, record.shown.args)) if not self.chat else (),
            ))
        return cards

    def _grant_ttl(self) -> float:
        """How long a session grant made here lasts: the Agent's ``grantTTL`` (DecideOne makes it with that)."""
        config = self._decide.config
        return config.approval.grant_ttl_seconds if config is not None else 0.0

    def _editable(self, record: ApprovalRecord) -> bool:
        """Whether the page offers "Edit and approve": a pending call with arguments that the policy lets approvers
        change (judged on the call as the model made it, as the A2A pause's ``editable`` is)."""
        config = self._decide.config
        return (record.status == "pending" and bool(record.args) and config is not None
                and edits.editable(config, record.server, record.tool, record.requested_args))

    async def _context(self, record: ApprovalRecord) -> str:
        """The task's last user message, redacted like the arguments (the patterns: it is free text). Whoever typed a
        secret into the conversation sees it in the chat; the approvers' cards do not show it."""
        return redaction.redact_text(await self._last_user_text(record.task_id), record.redact)

    async def _question(self, record: QuestionRecord, viewer: Principal) -> Question:
        prompt = record.prompt()
        return Question(
            id=record.id, agent=self._agent, question=prompt.question, options=tuple(prompt.options), stage=prompt.stage,
            created_at=record.created_at, expires_at=record.expires_at, task_id=record.task_id,
            context_id=record.context_id, selected=prompt.selected_option,
            confirmation=prompt.confirmation_message or "", default=prompt.default_option,
            context=await self._last_user_text(record.task_id, viewer.id),
        )

    async def _last_user_text(self, task_id: str, owner: str | None = None) -> str:
        if self._tasks is None:
            return ""
        owner = owner or await self._tasks.owner_of(task_id)
        if owner is None:
            return ""
        task = await self._tasks.get(task_id, ServerCallContext(user=acting_for(owner)))
        return last_user_text(_messages(task)) if task is not None else ""

    # --- deciding -------------------------------------------------------------------------------

    async def decide(self, viewer: Principal, key: str, ballot: Ballot, reason: str, session: bool) -> Outcome:
        record = await self._approvals.get(key)
        if record is None or not self._visible(record, viewer):
            if record is not None:
                await self._decide.refuse_unseen(record, Vote(viewer.id, viewer.groups, ballot, reason, CHANNEL, viewer.seen_as))
            return Outcome(key, False, "unknown", f"no approval request {key!r} that you may see")
        if session and not self._allow_session:
            return Outcome(key, False, "invalid", f"{self.title} does not allow approvals for the session")
        if record.status != "pending":
            return Outcome(key, False, "already", await self._already(record))
        return await self._cast(viewer, record, ballot, reason, "session" if session and ballot == "approve" else "once")

    async def approve_edited(self, viewer: Principal, key: str, changes: Mapping[str, Any], seen: str) -> Outcome:
        record = await self._approvals.get(key)
        if record is None or not self._visible(record, viewer):
            if record is not None:
                await self._decide.refuse_unseen(record, Vote(viewer.id, viewer.groups, "approve", "", CHANNEL, viewer.seen_as))
            return Outcome(key, False, "unknown", f"no approval request {key!r} that you may see")
        if record.status != "pending":
            return Outcome(key, False, "already", await self._already(record))
        if seen and seen != record.args_hash:
            by = f" (edited by {record.edited_by})" if record.edited_by else ""
            return Outcome(key, False, "refused", f"{record.tool}: its arguments changed since your page showed them{by}; "
                                                  "look at them again. Nothing was decided.")
        # Laid over the arguments as shown; DecideOne gives redacted fields their real values back (or refuses a change
        # to one) inside the vote's transaction.
        return await self._cast(viewer, record, "approve", "", "once", {**record.shown.args, **changes}, seen or None)

    async def _cast(
        self, viewer: Principal, record: ApprovalRecord, ballot: Ballot, reason: str, scope: str,
        arguments: dict[str, Any] | None = None, seen: str | None = None,
    ) -> Outcome:
        key = record.id
        vote = Vote(viewer.id, viewer.groups, ballot, reason, CHANNEL, viewer.seen_as)
        try:
            one = await self._decide(key, vote, scope=scope, arguments=arguments, seen=seen)  # seen: checked atomically
        except UnknownRequest:
            return Outcome(key, False, "unknown", f"no approval request {key!r}")
        except ArgumentsChanged as exc:
            return Outcome(key, False, "refused", str(exc))
        except AlreadyDecided:
            current = await self._approvals.get(key)
            return Outcome(key, False, "already", await self._already(current or record))
        except edits.EditRefused as exc:
            return Outcome(key, False, "refused", f"{exc} Nothing was decided; the request is still pending.")
        judgement, after = one.judgement, one.record
        edited = one.edited
        changed = ", ".join(v.changed) if edited and (v := after.edited_view()) is not None else ""
        if not judgement.counted:
            if edited:  # applied, but the edited call needs approvers the editor is not among
                waiting = who_may_decide(after.approvers, after.requested_by)
                gone = "" if self._visible(after, viewer) else " You may no longer see it."
                return Outcome(key, True, "edited", f"{after.tool}: your edit ({changed}) was applied; the edited call "
                                                    f"needs other approvers, so your approval does not count: waiting "
                                                    f"for {waiting}.{gone}")
            return Outcome(key, False, "refused", f"your vote does not count: {judgement.refused}")
        if one.voted.decided:
            how = f" with your edit ({changed})" if edited and after.status == "approved" else ""
            left = len(await self._approvals.for_task(after.task_id, pending_only=True))
            waits = f"; this task still waits on {left} more call{'s' if left > 1 else ''}" if left else ""
            return Outcome(key, True, "decided", f"{after.tool}: {after.status}{how} (decided by "
                                                 f"{judgement.tally.decided_by}){waits}")
        if edited:
            return Outcome(key, True, "edited", f"{after.tool}: your edit ({changed}) was applied and your approval counted, "
                                                f"{judgement.tally.progress()}; waiting for "
                                                f"{who_may_decide(after.approvers, after.requested_by)}")
        return Outcome(key, True, "counted", f"{record.tool}: your approval counted, {judgement.tally.progress()}; "
                                             "still waiting for more approvals")

    async def _already(self, record: ApprovalRecord) -> str:
        by = (await self._approvals.deciders_of([record.id])).get(record.id) or record.source or "?"
        if record.status == "expired":
            return f"{record.tool}: already timed out; nothing was decided"
        if record.status == "abandoned":
            return f"{record.tool}: abandoned ({record.reason}); a vote no longer decides anything"
        # The channel and the reason each say what they are: "(decided over REST)" read like the channel.
        via = f" via {record.source}" if record.source and record.source != by else ""
        reason = f"; the reason given: “{record.reason}”" if record.reason else ""
        return f"{record.tool}: already {record.status} by {by}{via}{reason}"


def _messages(task: Task) -> list[tuple[str, str]]:
    """The task's history as (role, text) pairs; decisions and answers (data parts) carry no text."""
    out = []
    for message in task.history:
        text = " ".join(p.text for p in message.parts if p.HasField("text"))
        out.append(("user" if message.role == Role.ROLE_USER else "agent", text))
    return out


__all__ = ["CHANNEL", "RuntimeInbox"]
