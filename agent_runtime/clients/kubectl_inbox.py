"""``kubectl gatehouse inbox``: the approvals inbox on 127.0.0.1, over the ToolApprovals the user can see.

:class:`ClusterInbox` is the cluster's :class:`agent_runtime.ui.source.InboxSource`: it lists ToolApprovals (one
namespace, or all) and votes on them with the user's own kubeconfig identity, exactly as ``kubectl gatehouse
approve|deny`` does (:mod:`agent_runtime.kube.toolapproval_client`): the API server's RBAC and the chart's admission policy
judge what the user may read and write, the agent's runtime counts the vote and says so in the status. Nothing is
judged here. Questions from ``hitl_request`` are answered in the runtime's own page: they are neither listed nor
decided here. Every ``kubernetes`` call blocks, so each runs in a worker thread.

:func:`serve` is the command: it learns who the user is once (SelfSubjectReview), makes a secret for this launch,
and serves the pages (:func:`agent_runtime.ui.standalone.standalone_app`) with uvicorn on 127.0.0.1 only; the URL
it prints (and opens in the browser where there is one) carries the secret, which the page exchanges for its
session cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from agent_runtime.approvals import execution
from agent_runtime.contract.principals import Principal
from agent_runtime.contract.resources import GROUP, VERSION
from agent_runtime.contract.resources.tool_approval import KIND_HITL, PLURAL
from agent_runtime.kube.toolapproval_client import (
    PluginError,
    Verdict,
    _explain,
    _get,
    _namespace,
    await_runtime,
    cast_vote,
    connect,
    identity,
    ignored_events,
    kind_of,
    owner_of,
    phase_of,
)
from agent_runtime.ui.cards import Card, Filters, Outcome, Question, Status, VoteLine, newest_first
from agent_runtime.ui.source import Ballot, Listener

log = logging.getLogger(__name__)

WAIT = 10.0  # seconds a decision waits for the runtime to count the vote, as `kubectl gatehouse approve` does
POLL = 1.0  # seconds between the listings that tell the pages what changed
CONFLICT_RETRIES = 3  # someone else wrote the object between our read and our write: read again and vote again
SESSION = "approve for the session is offered in the agent's own page"
NEEDS_REASON = "a denial needs a reason: the model is told why its call did not run"
_PHASES: dict[str, Status] = {
    "Pending": "pending", "Approved": "approved", "Granted": "approved", "Denied": "denied", "Canceled": "denied",
    "Expired": "expired", "Orphaned": "orphaned",
    "Abandoned": "orphaned",  # a gateway's held call nobody waits for: like an orphan, nothing will ever run it
}
_FAILED: dict[str, Literal["unknown", "already", "invalid", "refused"]] = {  # PluginError.kind -> Outcome.status
    "unknown": "unknown", "already": "already", "invalid": "invalid", "refused": "refused", "forbidden": "refused",
    "conflict": "refused", "error": "refused",
}


def epoch(timestamp: Any) -> float | None:
    """An RFC 3339 time (``2026-11-21T22:00:00Z``, fractions and offsets too) as seconds since the epoch."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _ballot(action: Any) -> str:
    return "deny" if action == "Deny" else "approve"


def vote_lines(spec: dict[str, Any], status: dict[str, Any]) -> list[VoteLine]:
    """The votes as the runtime judged them (``status.votes``), then those on the object it has not judged yet (just
    cast, or no runtime running): shown as not counted, with why."""
    judged = [v for v in status.get("votes") or [] if isinstance(v, dict)]
    lines = [VoteLine(str(v.get("by", "")), _ballot(v.get("action")), str(v.get("via") or ""), bool(v.get("counted", False)),
                      str(v.get("note") or "")) for v in judged]
    seen = {str(v.get("seenAs") or v.get("by")) for v in judged if (v.get("via") or "kubectl") == "kubectl"}
    cast = [v for v in spec.get("votes") or [] if isinstance(v, dict)]
    decision = spec.get("decision")
    if isinstance(decision, dict) and decision.get("decidedBy"):
        cast.insert(0, {"by": decision["decidedBy"], "action": decision.get("action")})
    for vote in cast:
        if str(vote.get("by")) not in seen:
            lines.append(VoteLine(str(vote.get("by", "")), _ballot(vote.get("action")), "kubectl", False,
                                  "not counted yet: the agent's runtime has not read it"))
    return lines


def card_of(obj: dict[str, Any]) -> Card:
    """A ToolApproval as the inbox shows it (its arguments as the runtime wrote them: redacted)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    found = status.get("execution")
    ran: dict[str, Any] = found if isinstance(found, dict) else {}
    got, _, of = str(status.get("approvals") or "").partition("/")
    required = status.get("required")
    if not isinstance(required, int) or required < 1:
        required = int(of) if of.isdigit() and int(of) > 0 else 1
    created = epoch(spec.get("requestedAt")) or epoch(meta.get("creationTimestamp")) or 0.0
    return Card(
        id=str(spec.get("requestId") or meta.get("name", "")),
        agent=owner_of(obj),
        tool=str(spec.get("tool", "")),
        args=spec.get("arguments") or {},
        hint=str(spec.get("hint") or ""),
        status=_PHASES.get(phase_of(obj), "pending"),
        created_at=created,
        expires_at=epoch(spec.get("expiresAt")) or 0.0,
        namespace=str(meta.get("namespace", "")),
        redacted=tuple(spec.get("redacted") or ()),
        requested_by=str(spec.get("requestedBy") or ""),  # absent on objects written before the inbox
        task_id=str(spec.get("taskId") or ""),
        context_id=str(spec.get("contextId") or ""),
        decided_by=str(status.get("decidedBy") or ""),
        decided_at=epoch(status.get("decidedAt")),
        reason=str(status.get("reason") or ""),
        source=str(status.get("source") or ""),
        required=required,
        approvals=int(got) if got.isdigit() else 0,
        waiting_for=str(status.get("waitingFor") or ""),
        votes=tuple(vote_lines(spec, status)),
        args_hash=str(spec.get("argumentsHash") or ""),
        name=str(meta.get("name", "")),
        execution=execution.of_kube(str(ran.get("outcome") or "")),
        execution_error=str(ran.get("error") or ""),
    )


class ClusterInbox:
    """The ToolApprovals of ``namespace`` (``None``: of every namespace) as ``client`` may see them.

    ``client``: :class:`agent_runtime.kube.toolapproval_client.Kube` (or the ``kubernetes.client`` module), whose identity
    reads and votes; the ``viewer`` the pages pass is that same person (``kubectl gatehouse inbox`` serves one).
    :attr:`problem` is why the last listing failed ("" when it did not), in words for the page.
    """

    def __init__(self, client: Any, namespace: str | None, *, wait: float = WAIT, poll: float = POLL) -> None:
        self.client = client
        self.namespace = namespace
        self.title = f"namespace {namespace}" if namespace else "all namespaces"
        self.chat = False
        self.agents: tuple[str, ...] = ()
        self.problem = ""
        self.wait = wait
        self.poll = poll
        self._listed: dict[str, str] = {}  # key -> resourceVersion, as of the last listing
        self._known: set[str] = set()  # every key a listing has shown
        self._listeners: list[Listener] = []
        self._watcher: asyncio.Task[None] | None = None

    # -- reading -------------------------------------------------------------------------------------------

    def _list(self) -> list[dict[str, Any]] | None:
        """The tool approvals in scope (blocking); None when the listing failed (then :attr:`problem` says why)."""
        api = self.client.CustomObjectsApi()
        try:
            if self.namespace is None:
                items = api.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
            else:
                items = api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)["items"]
        except Exception as exc:
            problem = str(_explain(exc, "", self.namespace or "*", "list"))
            self.problem = problem.replace('in namespace "*"', "across all namespaces")
            return None
        items = [i for i in items if kind_of(i) != KIND_HITL]  # questions: answered in the runtime's page
        self.problem = ""
        self._listed = {key_of(i): str((i.get("metadata") or {}).get("resourceVersion", "")) for i in items}
        self._known.update(self._listed)
        self.agents = tuple(sorted({*self.agents, *(owner_of(i) for i in items)} - {""}))
        return items

    async def _cards(self) -> list[Card]:
        items = await asyncio.to_thread(self._list)
        return [card_of(i) for i in items or []]

    async def pending(self, viewer: Principal) -> list[Card]:
        return newest_first([c for c in await self._cards() if c.pending])

    async def questions(self, viewer: Principal) -> list[Question]:
        return []  # hitl_request questions are answered in the runtime's own page (A2A, the task's owner)

    async def history(self, viewer: Principal, filters: Filters) -> list[Card]:
        now = time.time()
        return newest_first([c for c in await self._cards() if filters.admits(c, now)])

    def _split(self, key: str) -> tuple[str, str] | None:
        namespace, _, name = key.partition("/")
        if not namespace or not name or "/" in name or (self.namespace is not None and namespace != self.namespace):
            return None
        return namespace, name

    async def card(self, viewer: Principal, key: str) -> Card | None:
        where = self._split(key)
        if where is None:
            return None
        try:
            obj = await asyncio.to_thread(_get, self.client, where[1], where[0], "read")
        except PluginError:
            return None
        return None if kind_of(obj) == KIND_HITL else card_of(obj)

    async def sees(self, viewer: Principal, changed: str) -> bool:
        """Whether ``changed`` was in a listing: what the user's identity may list (also once deleted)."""
        return changed in self._known

    # -- deciding ------------------------------------------------------------------------------------------

    def _vote(self, namespace: str, name: str, action: str, reason: str) -> Verdict:
        """Cast the vote and wait for the runtime's verdict, as ``kubectl gatehouse approve|deny`` (blocking)."""
        seen = ignored_events(self.client, {"metadata": {"name": name, "namespace": namespace}}) if self.wait > 0 else {}
        attempt = 1
        while True:
            try:
                written, username = cast_vote(self.client, name, namespace, action, reason)
            except PluginError as exc:
                if exc.kind != "conflict" or attempt >= CONFLICT_RETRIES:
                    raise
                attempt += 1
                continue
            return await_runtime(self.client, written, username, action, self.wait, seen)

    async def decide(self, viewer: Principal, key: str, ballot: Ballot, reason: str, session: bool) -> Outcome:
        if session:
            return Outcome(key, False, "invalid", SESSION)
        if ballot == "deny" and not reason.strip():
            return Outcome(key, False, "invalid", NEEDS_REASON)
        where = self._split(key)
        if where is None:
            return Outcome(key, False, "unknown", f"no toolapproval {key!r} in {self.title}")
        action = "Approve" if ballot == "approve" else "Deny"
        try:
            found = await asyncio.to_thread(self._vote, where[0], where[1], action, reason)
        except PluginError as exc:
            return Outcome(key, False, _FAILED.get(exc.kind, "refused"), str(exc))
        return Outcome(key, found.ok, found.told, found.message)

    # -- what changed --------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(key)`` for every ToolApproval that appears, changes or goes; from the event loop (the
        first subscriber starts a poller there, the last one to leave stops it)."""
        self._listeners.append(listener)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="cluster-inbox-watch")

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)
            if not self._listeners and self._watcher is not None:
                self._watcher.cancel()
                self._watcher = None

        return unsubscribe

    async def _watch(self) -> None:
        """List every :attr:`poll` seconds; tell the listeners of each key whose resourceVersion changed, and of each
        key that appeared or went (compared with the listing before, the first time the last the pages made)."""
        before: dict[str, str] | None = dict(self._listed) if self._listed else None
        while True:
            items = await asyncio.to_thread(self._list)
            if items is not None:
                now = {key_of(i): str((i.get("metadata") or {}).get("resourceVersion", "")) for i in items}
                if before is not None:
                    changed = [k for k, rv in now.items() if before.get(k) != rv] + [k for k in before if k not in now]
                    for key in changed:
                        for listener in list(self._listeners):
                            try:
                                listener(key)
                            except Exception:  # one page's trouble must not stop the others' updates
                                log.exception("inbox listener failed on %s", key)
                before = now
            await asyncio.sleep(self.poll)


# -- the command ---------------------------------------------------------------------------------------------


def can_open_browser() -> bool:
    """Whether there is a browser to open: on Linux and the BSDs only with a display (``$DISPLAY``, ``$WAYLAND_DISPLAY``)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: a free one), bound before the server starts so the URL is known."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise PluginError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    return sock


def serve(
    namespace: str | None, all_namespaces: bool, context: str | None, port: int = 0, browser: bool = True,
    say: Callable[[str], None] | None = None,
) -> None:
    """Serve the inbox until Ctrl-C: who the user is, the secret of this launch, the URL."""
    import uvicorn

    from agent_runtime.ui.standalone import standalone_app

    say = say or (lambda line: print(line, flush=True))
    client = connect(context)
    username, groups = identity(client)
    inbox = ClusterInbox(client, None if all_namespaces else _namespace(namespace, context))
    secret = secrets.token_urlsafe(32)
    sock = listen(port)
    port = sock.getsockname()[1]
    principal = Principal(username, frozenset(groups), "kubernetes", username)
    app = standalone_app(inbox, principal=principal, secret=secret, port=port)
    url = f"http://127.0.0.1:{port}/ui/login?launch={secret}"
    say(f"Inbox for {username} ({inbox.title}): {url}")
    say("Only this URL opens it (it carries a secret made for this launch); Ctrl-C stops it.")
    if browser and can_open_browser():
        threading.Thread(target=webbrowser.open, args=(url,), name="open-browser", daemon=True).start()
    # proxy_headers=False: any local process could otherwise set the scheme the page sees (X-Forwarded-Proto)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2,
                            proxy_headers=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shut down, then raised the Ctrl-C it caught again
        pass
    finally:
        sock.close()
    say("Inbox stopped.")


__all__ = ["ClusterInbox", "can_open_browser", "card_of", "epoch", "listen", "serve", "vote_lines"]
