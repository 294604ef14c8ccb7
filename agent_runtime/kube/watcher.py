"""The vote watcher: the votes people append to a Pending ToolApproval (``spec.votes``, or the one legacy
``spec.decision``) are counted by the one authority function, and decide the request once they suffice.

It lists the agent's ToolApprovals (label ``gatehouse.dev/agent``) and watches from the list's
resourceVersion; when the watch ends, breaks, or the API answers 410 Gone (history compacted, or the API
server restarted) it lists again and carries on, so no decision is lost.

Each new vote goes through :class:`~agent_runtime.server.decide_one.DecideOne` (channel ``kubectl``), like a
REST decision: recorded, judged against the request's approvers (N-of-M, separation of duties), and the task
resumed once none of its requests is pending. A vote counts only when

- the ToolApproval is the very object this runtime created (its uid is in the runtime's database) and its
  request, tool and arguments are unchanged — a ToolApproval anyone else created decides nothing;
- the vote's ``by`` is the user who wrote it: the chart's admission policy enforces that, so votes are only
  honoured while the operator reports the policy as enforcing on our Agent (condition ``AdmissionPolicy``),
  unless the runtime is told to trust kubectl anyway (``--trust-kubectl-without-admission-policy``);
- a vote ``onBehalfOf: {user, groups}`` (the Slack bridge deciding for a Slack user) is that human's vote only when its
  ``by`` is in the Agent's ``spec.access.delegators`` (the rule of :func:`agent_runtime.delegation.relay.read`); then
  the human is judged against the approvers (``seenAs``: ``<user> via <by>``), else it is recorded, not counted.

The mirror then writes the votes and the outcome into the ToolApproval's status. Votes on a ToolApproval
whose request the runtime has no record of make it ``Orphaned`` at once (``on_unknown``:
:meth:`~agent_runtime.kube.orphans.Orphans.orphan`), so the voter learns that nothing will decide it.

Votes on a ToolApproval that mirrors a ``hitl_request`` question (label ``gatehouse.dev/kind:
hitl_request``) is never applied: a question is answered in the chat (A2A), not approved or denied; the
watcher logs a warning (once per object) and the question stays open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from agent_runtime.approvals import AlreadyDecided, ApprovalService
from agent_runtime.contract.authority import Vote
from agent_runtime.contract.channels import BALLOT_CHANNELS
from agent_runtime.contract.edits import EditRefused
from agent_runtime.contract.principals import Identities
from agent_runtime.delegation import relay
from agent_runtime.infra.tasks import cancel_and_wait
from agent_runtime.kube import objects
from agent_runtime.kube.client import KubeClient, KubeError
from agent_runtime.kube.mirror import Mirror
from agent_runtime.server.decide_one import DecideOne

log = logging.getLogger(__name__)

SOURCE = "kubectl"


class DecisionWatcher:
    def __init__(
        self,
        client: KubeClient,
        mirror: Mirror,
        approvals: ApprovalService,
        decide_one: DecideOne,
        watch_seconds: float = 300.0,
        max_backoff: float = 30.0,
        *,
        identities: Identities | None = None,
        trust_kubectl: bool = False,
        on_unknown: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._client = client
        self._mirror = mirror
        self._approvals = approvals
        self._decide_one = decide_one
        self._identities = identities or Identities()
        # who may vote on behalf of a human (spec.access.delegators: the Slack bridge's ServiceAccount, say)
        config = getattr(decide_one, "config", None)
        self._delegators: list[str] = list(config.access.delegators) if config is not None else []
        # which of them is a bridge of another channel (the Slack bridge): its ballots are that channel's
        self._bridges: dict[str, str] = dict(config.access.bridges) if config is not None else {}
        self._trust_kubectl = trust_kubectl
        self._on_unknown = on_unknown  # a Pending ToolApproval with votes whose request the store does not hold
        self._policy_checked: tuple[float, bool] | None = None
        self._latest: dict[str, dict[str, Any]] = {}  # the newest object seen per request, not applied yet
        self._watch_seconds = watch_seconds
        self._max_backoff = max_backoff
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._warned: set[str] = set()  # hitl_request ToolApprovals whose decision was ignored (warned once)
        self._task: asyncio.Task[None] | None = None
        self.relists = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="gatehouse-kube-watch")

    async def stop(self) -> None:
        await cancel_and_wait([self._task, *self._inflight.values()])

    async def _run(self) -> None:
        delay = 0.2
        params = {"labelSelector": self._mirror.selector}
        while True:
            try:
                listed = await self._client.get(self._mirror.collection, params)
                self.relists += 1
                for item in listed.get("items", []):
                    self.observe(item)
                version = listed.get("metadata", {}).get("resourceVersion", "")
                delay = 0.2
                while True:  # renew the watch from the last version seen until it is gone
                    started = asyncio.get_running_loop().time()
                    version = await self._watch(params, version)
                    if asyncio.get_running_loop().time() - started < 1.0:
                        await asyncio.sleep(1.0)  # a server ending watches at once is not hammered
            except asyncio.CancelledError:
                raise
            except _Gone:
                log.info("kube watch: resourceVersion gone, listing again")
                continue
            except Exception as exc:
                log.warning("kube watch failed (listing again in %.1fs): %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    async def _watch(self, params: dict[str, str], version: str) -> str:
        async for event in self._client.watch(
            self._mirror.collection, {**params, "resourceVersion": version}, self._watch_seconds
        ):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone()
                raise KubeError(int(obj.get("code") or 0), obj.get("message") or "watch error")
            version = obj.get("metadata", {}).get("resourceVersion") or version
            if kind == "DELETED":
                self._mirror.forget(obj["metadata"]["name"])
            elif kind in ("ADDED", "MODIFIED"):
                self.observe(obj)
        return version

    def observe(self, obj: dict[str, Any]) -> None:
        """Look at one ToolApproval: start counting its votes if it is Pending and has any."""
        self._mirror.observe(obj)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        request_id = spec.get("requestId")
        if not objects.ballots(spec) or not request_id or status.get("phase", "Pending") != "Pending":
            return
        if objects.is_question(obj) or str(request_id).startswith("hitl-"):
            self._warn_once(obj, "kube: votes on %s ignored: it is a hitl_request question from the model, answered in "
                                 "the chat (A2A), not approved or denied")
            return
        self._latest[request_id] = obj
        if request_id in self._inflight:
            return  # the running apply picks the latest object up when it is done
        task = asyncio.create_task(self._apply_latest(request_id), name=f"gatehouse-kube-decide-{request_id}")
        self._inflight[request_id] = task
        task.add_done_callback(lambda _: self._inflight.pop(request_id, None))

    async def _apply_latest(self, request_id: str) -> None:
        while (obj := self._latest.pop(request_id, None)) is not None:
            await self._apply(obj)

    def _warn_once(self, obj: dict[str, Any], message: str, reason: str = "") -> None:
        """Log once per object; with ``reason``, also a Warning Event on it, so the voter can see why."""
        name = (obj.get("metadata") or {}).get("name", "")
        if name not in self._warned:
            self._warned.add(name)
            log.warning(message, name)
            if reason:
                self._mirror.warn(obj, reason, message % name)

    async def _trusted(self) -> bool:
        """Whether kubectl votes may count: the operator reports the admission policy as enforcing on our Agent
        (condition ``AdmissionPolicy``), or the runtime was told to trust them. Looked up at most every 10 s."""
        if self._trust_kubectl:
            return True
        now = asyncio.get_running_loop().time()
        if self._policy_checked is None or now - self._policy_checked[0] > 10.0:
            enforced = False
            try:
                agent = await self._client.get(self._mirror.agent_status_path)
                conditions = (agent.get("status") or {}).get("conditions") or []
                enforced = any(c.get("type") == "AdmissionPolicy" and c.get("status") == "True" for c in conditions)
            except KubeError as exc:
                log.warning("kube: cannot read the Agent's AdmissionPolicy condition: %s", exc)
            self._policy_checked = (now, enforced)
        return self._policy_checked[1]

    def _voter(self, ballot: objects.Ballot) -> tuple[Vote, str]:
        """The vote a ballot is, and why it may not count (empty: it is judged by the authority function). A ballot
        ``onBehalfOf`` a human is that human's vote only when its ``by`` is a trusted delegator of this agent: the rule
        of every delegated decision (:func:`agent_runtime.delegation.relay.read`), not a second one."""
        caller = self._identities.resolve(ballot.by, ballot.groups, "kubernetes")
        if ballot.on_behalf_of is None:
            return Vote(caller.id, caller.groups, ballot.ballot, ballot.reason, SOURCE, ballot.by), ""
        claim = ballot.on_behalf_of
        if isinstance(claim, dict):
            claim = {"principal": claim.get("user"), "groups": claim.get("groups") or []}
        try:
            human = relay.read({relay.ON_BEHALF_OF: claim}, caller, self._delegators, self._identities).human
        except relay.DelegationRefused as exc:
            return Vote(caller.id, caller.groups, ballot.ballot, ballot.reason, SOURCE, ballot.key), str(exc)
        assert human is not None
        # The channel follows who cast the ballot (the admission policy ties ``by`` to the writer), never a field of it.
        channel = self._bridges.get(caller.id, SOURCE)
        return Vote(human.id, human.groups, ballot.ballot, ballot.reason, channel, ballot.key), ""  # "<user> via <by>"

    async def _apply(self, obj: dict[str, Any]) -> None:
        spec = obj["spec"]
        request_id, task_id = spec["requestId"], spec.get("taskId", "")
        try:
            record = await self._approvals.get(request_id)
            if record is None or record.task_id != task_id:
                log.warning("kube: votes on unknown request %s (task %s) ignored", request_id, task_id)
                if record is None and self._on_unknown is not None:
                    self._on_unknown(obj)
                return
            if record.status != "pending":
                if record.source not in BALLOT_CHANNELS:
                    self._mirror.sync(record)  # decided elsewhere first: show the real outcome
                return
            uid = await self._approvals.object_uid(request_id)
            if uid is None or uid != (obj.get("metadata") or {}).get("uid") or not objects.same_request(spec, record):
                self._warn_once(obj, "kube: votes on %s ignored: this runtime did not create that ToolApproval, or its "
                                     "request was changed (only objects the runtime created, unchanged, count)",
                                "VotesIgnored")
                return
            if not await self._trusted():
                self._warn_once(obj, "kube: votes on %s ignored: the admission policy that ties a vote to the user who "
                                     "cast it is not reported as enforcing (Agent condition AdmissionPolicy); decide over "
                                     "A2A or REST, or install the chart's policy with validationActions [Deny]",
                                "VotesIgnored")
                return
            cast = (await self._approvals.cast_votes([request_id])).get(request_id, [])
            seen = {c.vote.seen_as or c.vote.principal for c in cast if c.vote.channel in BALLOT_CHANNELS}
            for ballot in objects.ballots(spec):
                if ballot.key in seen:
                    continue
                seen.add(ballot.key)
                vote, refused = self._voter(ballot)
                if refused:
                    await self._approvals.refuse_vote(request_id, vote, refused)
                    log.warning("kube: %s's vote on %s does not count: %s", ballot.key, request_id, refused)
                    continue
                try:  # arguments: edited from what the ToolApproval shows (redacted); DecideOne un-redacts them
                    one = await self._decide_one(request_id, vote, arguments=ballot.arguments)
                except AlreadyDecided:
                    return
                except EditRefused as exc:
                    # The voter learns why from the ToolApproval's status (their vote, not counted, with the reason).
                    await self._approvals.refuse_vote(request_id, vote, f"the edit was refused: {exc}")
                    log.warning("kube: %s's edit of %s refused: %s", ballot.by, request_id, exc)
                    continue
                if one.voted.decided:
                    return  # the decision's event updates the ToolApproval (mirror.on_event), as a vote's does
                if not one.judgement.counted:
                    log.warning("kube: %s's vote on %s does not count: %s", ballot.by, request_id, one.judgement.refused)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kube: applying the votes on %s failed; they are retried when the watch lists again", request_id)


class _Gone(Exception):
    pass


__all__ = ["DecisionWatcher"]
