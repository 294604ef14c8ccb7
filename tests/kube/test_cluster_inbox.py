"""``kubectl gatehouse inbox``'s source (agent_runtime/clients/kubectl_inbox.py) and command, against the emulated API server.

:class:`ClusterInbox` reads and votes with one kubeconfig identity (the admin named alice@example.com, or a user with
a token of their own and, with RBAC enforced, only the grants given here). No runtime runs: a stand-in
(``runtime_answers`` of test_kubectl_plugin.py) writes what a runtime would into the status, or nothing answers. The
command runs as a process; the pages themselves are tested in a browser elsewhere (tests/ui).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import psutil
import pytest

from agent_runtime.clients.kubectl_inbox import ClusterInbox, card_of, epoch
from agent_runtime.contract.principals import Principal
from agent_runtime.kube.toolapproval_client import connect
from agent_runtime.ui.cards import Filters, VoteLine
from tests.kube.test_kubectl_plugin import ALICE, TA, approval, question_object, runtime_answers
from tests.support.browser import chromium
from tests.support.kube_fixtures import Kubectl
from tests.support.kube_server import RunningEmulator

pytestmark = pytest.mark.e2e  # the emulated API server on 127.0.0.1

ME = Principal("alice@example.com", frozenset(), "kubernetes", "alice@example.com")  # the pages pass it; unused here
WHO = "a member of sre, not the requester carol; 2 approvals needed"


def apply(kubectl: Kubectl, tmp_path: Path, *docs: dict[str, Any]) -> None:
    for doc in docs:
        path = tmp_path / f"{doc['metadata']['namespace']}-{doc['metadata']['name']}.json"
        path.write_text(json.dumps(doc))
        kubectl("apply", "--validate=false", "-f", str(path))


def set_status(kubectl: Kubectl, name: str, status: dict[str, Any], namespace: str = "default") -> None:
    kubectl("patch", "toolapproval", name, "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))


@pytest.fixture
def cluster(kube_api: RunningEmulator, kubectl: Kubectl, tmp_path: Path) -> RunningEmulator:
    """fm-1 (Pending, 1 of 2), fm-2 (Denied), other-1 (Pending, another agent), fm-q (a question), fm-b (team-b)."""
    kube_api.call(lambda: kube_api.emulator.seed("v1/namespaces", {"metadata": {"name": "team-b"}}))
    apply(kubectl, tmp_path,
          approval("fm-1", redacted=["token"], arguments={"path": "old.txt", "token": "«redacted»"}, argumentsHash="h1"),
          approval("fm-2", tool="write_file", requestedAt="2026-11-21T22:05:00Z"),
          approval("other-1", agent="other", requestedAt="2026-11-21T22:10:00Z"),
          question_object("fm-q"), approval("fm-b", namespace="team-b"))
    set_status(kubectl, "fm-1", {"phase": "Pending", "approvals": "1/2", "required": 2, "waitingFor": WHO,
                                 "votes": [{"by": "bob@example.com", "action": "Approve", "counted": True, "note": "",
                                            "via": "kubectl", "seenAs": "bob@example.com"}]})
    set_status(kubectl, "fm-2", {"phase": "Denied", "decidedBy": "a2a client", "source": "a2a", "reason": "no",
                                 "decidedAt": "2026-11-21T22:06:30Z"})
    kube_api.emulator.username = "alice@example.com"
    return kube_api


def inbox(namespace: str | None = "default", kubeconfig: str | Path | None = None, **kw: Any) -> ClusterInbox:
    return ClusterInbox(connect(config_file=str(kubeconfig or os.environ["KUBECONFIG"])), namespace, **kw)


def votes(api: RunningEmulator, name: str, namespace: str = "default") -> list[tuple[str, str, str]]:
    spec = (api.emulator.get_object(TA, namespace, name) or {}).get("spec") or {}
    return [(v["by"], v["action"], v.get("reason", "")) for v in spec.get("votes") or []]


# -- reading ---------------------------------------------------------------------------------------------------


async def test_pending_toolapprovals_are_cards_with_what_they_carry(cluster: RunningEmulator) -> None:
    source = inbox()
    assert (source.title, source.chat, source.problem) == ("namespace default", False, "")
    pending = await source.pending(ME)
    assert [c.key for c in pending] == ["default/other-1", "default/fm-1"]  # newest first; no question, nothing decided
    card = pending[1]
    assert (card.id, card.name, card.namespace, card.agent, card.tool) == (
        "apr-fm-1", "fm-1", "default", "file-manager", "delete_file")
    assert dict(card.args) == {"path": "old.txt", "token": "«redacted»"} and list(card.redacted) == ["token"]
    assert card.hint == "delete_file on file-tools requires approval" and card.args_hash == "h1"
    assert (card.context_id, card.task_id) == ("ctx-1", "task-1")
    assert (card.created_at, card.expires_at) == (1795298400.0, 1795298400.0 + 900)  # 2026-11-21T22:00/22:15Z
    assert (card.status, card.approvals, card.required, card.progress, card.waiting_for) == ("pending", 1, 2, "1 of 2", WHO)
    assert list(card.votes) == [VoteLine("bob@example.com", "approve", "kubectl", True, "")]
    assert source.agents == ("file-manager", "other")
    assert await source.questions(ME) == []  # answered in the runtime's page

    everywhere = inbox(None)
    assert everywhere.title == "all namespaces"
    assert {c.key for c in await everywhere.pending(ME)} == {"default/other-1", "default/fm-1", "team-b/fm-b"}


async def test_history_and_one_card(cluster: RunningEmulator) -> None:
    source = inbox()
    (denied,) = await source.history(ME, Filters())
    assert (denied.key, denied.status, denied.decided_by, denied.source, denied.reason) == (
        "default/fm-2", "denied", "a2a client", "a2a", "no")
    assert denied.decided_at == epoch("2026-11-21T22:06:30Z")
    assert await source.history(ME, Filters(outcome="approved")) == []
    assert [c.key for c in await source.history(ME, Filters(decided_by="A2A"))] == ["default/fm-2"]

    assert (await source.card(ME, "default/fm-1")).tool == "delete_file"  # type: ignore[union-attr]
    assert (await source.card(ME, "default/fm-2")).status == "denied"  # type: ignore[union-attr]
    assert await source.card(ME, "default/fm-q") is None  # a question: not shown here
    assert await source.card(ME, "default/nope") is None
    assert await source.card(ME, "team-b/fm-b") is None  # outside the namespace this inbox covers
    assert await source.card(ME, "fm-1") is None
    assert (await inbox(None).card(ME, "team-b/fm-b")).namespace == "team-b"  # type: ignore[union-attr]


def test_a_card_from_an_object_that_carries_more() -> None:
    """What the runtime may add (who asked, a legacy decision) and what it has not judged yet."""
    card = card_of({
        "metadata": {"name": "x", "namespace": "ns", "creationTimestamp": "2026-11-21T21:00:00Z"},
        "spec": {"agentRef": "a", "tool": "t", "requestedBy": "carol", "requestId": "apr-1",
                 "votes": [{"by": "bob@example.com", "action": "Approve"}, {"by": "dave@example.com", "action": "Deny"}]},
        "status": {"phase": "Granted", "approvals": "1/1", "votes": [
            {"by": "bob", "action": "Approve", "counted": True, "via": "kubectl", "seenAs": "bob@example.com"}]},
    })
    assert (card.key, card.requested_by, card.status) == ("ns/x", "carol", "approved")
    assert card.created_at == epoch("2026-11-21T21:00:00Z")  # no requestedAt: when the object was made
    assert (card.approvals, card.required, card.expires_at) == (1, 1, 0.0)
    assert [(v.by, v.vote, v.counted) for v in card.votes] == [
        ("bob", "approve", True), ("dave@example.com", "deny", False)]  # dave's vote: not judged yet
    assert "not counted yet" in card.votes[1].note
    orphaned = card_of({"metadata": {"name": "o", "namespace": "ns"}, "spec": {}, "status": {"phase": "Orphaned"}})
    assert orphaned.status == "orphaned"
    older = card_of({"metadata": {"name": "o", "namespace": "ns"}, "spec": {}, "status": {"approvals": "1/3"}})
    assert (older.approvals, older.required, older.progress) == (1, 3, "1 of 3")  # no status.required: from approvals
    assert epoch("2026-11-21T22:00:00.5+01:00") == 1795298400.0 - 3600 + 0.5 and epoch("soon") is None


# -- deciding --------------------------------------------------------------------------------------------------


async def test_a_vote_is_appended_and_the_runtimes_verdict_told(
    cluster: RunningEmulator, kube: kubernetes.client.ApiClient
) -> None:
    source = inbox()
    counted = {"phase": "Pending", "approvals": "1/2", "required": 2, "waitingFor": WHO,
               "votes": [{**ALICE, "counted": True, "note": ""}]}
    with runtime_answers(kube, "fm-1", lambda vote: counted):
        outcome = await source.decide(ME, "default/fm-1", "approve", "looks right", False)
    assert (outcome.id, outcome.ok, outcome.status) == ("default/fm-1", True, "counted")
    assert outcome.message == f'toolapproval "fm-1": approval recorded: 1 of 2 approvals, waiting for {WHO}'
    assert votes(cluster, "fm-1") == [("alice@example.com", "Approve", "looks right")]

    again = await source.decide(ME, "default/fm-1", "deny", "changed my mind", False)
    assert (again.ok, again.status) == (False, "refused")
    assert again.message == 'you (alice@example.com) have already voted on toolapproval "fm-1"; a person counts once'
    assert votes(cluster, "fm-1") == [("alice@example.com", "Approve", "looks right")]  # nothing changed


async def test_the_vote_that_decides(cluster: RunningEmulator, kube: kubernetes.client.ApiClient) -> None:
    approved = {"phase": "Approved", "approvals": "2/2", "required": 2, "decidedBy": "bob, alice", "source": "kubectl",
                "votes": [{**ALICE, "counted": True, "note": ""}]}
    with runtime_answers(kube, "fm-1", lambda vote: approved):
        outcome = await inbox().decide(ME, "default/fm-1", "approve", "", False)
    assert (outcome.ok, outcome.status, outcome.message) == (True, "decided", 'toolapproval "fm-1" approved (2 of 2)')


async def test_without_a_runtime_the_vote_stays_and_the_outcome_says_so(cluster: RunningEmulator) -> None:
    outcome = await inbox(wait=0.5).decide(ME, "default/fm-1", "deny", "not today", False)
    assert (outcome.ok, outcome.status) == (False, "sent")
    assert outcome.message == ("no runtime acknowledged your vote within 0.5s: is the agent running? (kubectl get agent "
                               "file-manager -n default; the ToolApproval stays Pending, with your vote on it)")
    assert votes(cluster, "fm-1") == [("alice@example.com", "Deny", "not today")]
    # Until a runtime reads it, the card shows the vote as not counted yet.
    card = await inbox().card(ME, "default/fm-1")
    assert card is not None and [(v.by, v.counted) for v in card.votes] == [("bob@example.com", True),
                                                                            ("alice@example.com", False)]


async def test_what_cannot_be_voted_on(cluster: RunningEmulator) -> None:
    source = inbox(wait=0.5)
    cases = {
        ("default/fm-2", "approve", "", False): ("already", 'toolapproval "fm-2" is already Denied (by a2a client)'),
        ("default/fm-q", "approve", "", False): ("invalid", "this is a question from the model; answer it in the chat"),
        ("default/nope", "approve", "", False): ("unknown", 'toolapproval "nope" not found in namespace "default"'),
        ("team-b/fm-b", "approve", "", False): ("unknown", "no toolapproval 'team-b/fm-b' in namespace default"),
        ("default/fm-1", "approve", "", True): ("invalid", "approve for the session is offered in the agent's own page"),
        ("default/fm-1", "deny", "  ", False): ("invalid", "a denial needs a reason"),
    }
    for (key, ballot, reason, session), (status, said) in cases.items():
        outcome = await source.decide(ME, key, ballot, reason, session)  # type: ignore[arg-type]
        assert (outcome.ok, outcome.status) == (False, status) and said in outcome.message, (key, outcome)
    assert votes(cluster, "fm-1") == [] and votes(cluster, "fm-2") == [] and votes(cluster, "fm-q") == []
    assert votes(cluster, "fm-b", "team-b") == []


async def test_a_concurrent_write_is_retried(cluster: RunningEmulator, kubectl: Kubectl,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone else wrote between our read and our write (409): the inbox reads again and votes again."""
    from agent_runtime.kube import toolapproval_client

    real, calls = toolapproval_client._get, []

    def stale_once(*args: Any, **kwargs: Any) -> dict[str, Any]:
        obj = real(*args, **kwargs)
        if not calls:
            kubectl("label", "toolapproval", "fm-1", "touched=yes")  # a newer resourceVersion than the one just read
        calls.append(obj)
        return obj

    monkeypatch.setattr(toolapproval_client, "_get", stale_once)
    outcome = await inbox(wait=0.2).decide(ME, "default/fm-1", "approve", "", False)
    assert len(calls) == 2 and outcome.status == "sent", outcome
    assert votes(cluster, "fm-1") == [("alice@example.com", "Approve", "")]


# -- who may see and decide: the API server's RBAC ---------------------------------------------------------------


async def test_rbac_decides_what_a_user_sees_and_may_vote_on(cluster: RunningEmulator, tmp_path: Path) -> None:
    cluster.emulator.enforce_rbac()
    mallory = inbox(kubeconfig=cluster.user_kubeconfig(tmp_path, "mallory@example.com"))
    assert await mallory.pending(ME) == [] and await mallory.history(ME, Filters()) == []
    assert mallory.problem == ('forbidden: you may not list toolapprovals in namespace "default" '
                               "(ask for a RoleBinding to the gatehouse-viewer (or gatehouse-approver) ClusterRole)")
    assert await mallory.card(ME, "default/fm-1") is None
    outcome = await mallory.decide(ME, "default/fm-1", "approve", "", False)
    assert (outcome.ok, outcome.status) == (False, "refused") and outcome.message.startswith("forbidden: you may not decide")

    # carol may read in default, not write, and nothing elsewhere.
    cluster.emulator.grant("carol@example.com", ["get", "list", "watch"], "toolapprovals", "default")
    carol_config = cluster.user_kubeconfig(tmp_path, "carol@example.com")
    carol = inbox(kubeconfig=carol_config)
    assert [c.key for c in await carol.pending(ME)] == ["default/other-1", "default/fm-1"] and carol.problem == ""
    outcome = await carol.decide(ME, "default/fm-1", "approve", "", False)
    assert (outcome.ok, outcome.status) == (False, "refused")
    assert 'forbidden: you may not decide toolapproval "fm-1" in namespace "default"' in outcome.message
    everywhere = inbox(None, kubeconfig=carol_config)
    assert await everywhere.pending(ME) == [] and everywhere.problem.startswith(
        "forbidden: you may not list toolapprovals across all namespaces")
    assert votes(cluster, "fm-1") == []

    # Once allowed again, the problem is gone.
    cluster.emulator.grant("mallory@example.com", ["list"], "toolapprovals", "default")
    assert len(await mallory.pending(ME)) == 2 and mallory.problem == ""


# -- what changed ----------------------------------------------------------------------------------------------


async def test_listeners_hear_of_what_appears_changes_and_goes(
    cluster: RunningEmulator, kubectl: Kubectl, tmp_path: Path
) -> None:
    source = inbox(poll=0.1)
    await source.pending(ME)
    heard: list[str] = []
    stop = source.subscribe(heard.append)
    await asyncio.sleep(0.5)
    assert heard == []  # nothing changed since the page listed

    async def hears(key: str) -> None:
        for _ in range(100):
            if key in heard:
                return
            await asyncio.sleep(0.05)
        pytest.fail(f"no change heard for {key}: {heard}")

    await asyncio.to_thread(apply, kubectl, tmp_path, approval("fm-new"))
    await hears("default/fm-new")
    await asyncio.to_thread(set_status, kubectl, "fm-1", {"phase": "Approved", "decidedBy": "bob"})
    await hears("default/fm-1")
    await asyncio.to_thread(kubectl, "delete", "toolapproval", "fm-2")
    await hears("default/fm-2")
    assert await source.sees(ME, "default/fm-2")  # gone, but it was listed: the page is told to drop it
    assert not await source.sees(ME, "team-b/fm-b") and not await source.sees(ME, "default/fm-q")
    assert "default/fm-q" not in heard and "default/other-1" not in heard  # a question; nothing changed

    watcher = source._watcher
    stop()
    await asyncio.sleep(0.05)
    assert watcher is not None and watcher.done()  # the last listener gone: no more polling
    heard.clear()
    await asyncio.to_thread(apply, kubectl, tmp_path, approval("fm-later"))
    await asyncio.sleep(0.5)
    assert heard == []


# -- the command -----------------------------------------------------------------------------------------------


@pytest.fixture
def served(cluster: RunningEmulator) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``kubectl gatehouse inbox --no-browser`` as a process: it and the URL it printed."""
    code = "from agent_runtime.clients.kubectl_plugin import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "inbox", "--no-browser"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "FORWARDED_ALLOW_IPS": "*"})
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        found = re.fullmatch(r"Inbox for alice@example\.com \(namespace default\): (http://127\.0\.0\.1:\d+/ui/login\?launch=\S+)\n",
                             line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        yield proc, found.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_command_serves_the_inbox_only_with_the_launch_secret(
    served: tuple[subprocess.Popen[str], str], cluster: RunningEmulator, kube: kubernetes.client.ApiClient
) -> None:
    proc, url = served
    base, secret = url.split("/ui/login?launch=")
    assert len(secret) >= 40
    listening = {(c.laddr.ip, c.laddr.port) for c in psutil.Process(proc.pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN}
    assert listening == {("127.0.0.1", int(base.rsplit(":", 1)[1]))}  # loopback only
    with httpx.Client(base_url=base, timeout=30) as anyone:
        assert anyone.get("/ui/").status_code == 303 and anyone.get("/ui/").headers["location"].startswith("/ui/login")
        for login in ("/ui/login", "/ui/login?launch=", f"/ui/login?launch={secret[:-1]}"):
            refused = anyone.get(login)
            assert refused.status_code == 401 and "set-cookie" not in refused.headers, login
        bearer = anyone.get("/ui/", headers={"Authorization": "Bearer anything"})  # no token opens it either
        assert bearer.status_code == 303 and bearer.headers["location"].startswith("/ui/login")
        post = anyone.post("/ui/api/decisions", json={"ids": ["default/fm-1"], "decision": "approve"})
        assert post.status_code in (401, 403)
        assert anyone.get(f"/ui/login?launch={secret}", headers={"Host": f"evil.example:{base.rsplit(':', 1)[1]}"}
                          ).status_code == 421  # DNS rebinding: another name for 127.0.0.1
    assert votes(cluster, "fm-1") == []

    with httpx.Client(base_url=base, timeout=30) as browser:
        opened = browser.get(url)
        assert opened.status_code == 303 and opened.headers["location"] == "/ui/"
        page = browser.get("/ui/")
        assert page.status_code == 200 and "delete_file" in page.text and "fm-1" in page.text
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert csrf is not None
        body = {"ids": ["default/fm-1"], "decision": "approve", "reason": "from the page"}
        assert browser.post("/ui/api/decisions", json=body).status_code == 403  # no CSRF token
        counted = {"phase": "Approved", "approvals": "1/1", "required": 1, "decidedBy": "alice", "source": "kubectl",
                   "votes": [{**ALICE, "counted": True, "note": ""}]}
        with runtime_answers(kube, "fm-1", lambda vote: counted):
            decided = browser.post("/ui/api/decisions", json=body, headers={"X-CSRF-Token": csrf.group(1)})
        assert decided.status_code == 200, decided.text
        assert decided.json()["results"] == [{"id": "default/fm-1", "ok": True, "status": "decided",
                                              "message": 'toolapproval "fm-1" approved (1 of 1)'}]
    assert votes(cluster, "fm-1") == [("alice@example.com", "Approve", "from the page")]

    started = time.monotonic()
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "Inbox stopped." in out and "Traceback" not in err, (out, err)
    assert time.monotonic() - started < 10


def test_forwarded_headers_from_local_processes_change_nothing(served: tuple[subprocess.Popen[str], str]) -> None:
    """The inbox is served over plain HTTP on 127.0.0.1, where any local process connects: an ``X-Forwarded-Proto:
    https`` (or ``-For``) from there must not make its cookie ``Secure`` (which the browser, on http://, would never
    send back), whatever ``$FORWARDED_ALLOW_IPS`` says."""
    _, url = served
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "10.1.2.3", "X-Forwarded-Host": "evil.example"}
    opened = httpx.get(url, headers=forwarded, follow_redirects=False)
    assert opened.status_code == 303 and opened.headers["location"] == "/ui/"
    cookie = opened.headers["set-cookie"]
    assert cookie.startswith("gatehouse_session=") and "Secure" not in cookie


def test_in_a_browser_the_launch_url_opens_the_inbox_and_a_click_votes_on_the_toolapproval(
    served: tuple[subprocess.Popen[str], str], cluster: RunningEmulator, kube: kubernetes.client.ApiClient
) -> None:
    _, url = served
    base = url.split("/ui/login?launch=")[0]
    counted = {"phase": "Approved", "approvals": "1/1", "required": 1, "decidedBy": "alice", "source": "kubectl",
               "votes": [{**ALICE, "counted": True, "note": ""}]}
    from playwright.sync_api import expect

    with chromium() as browser:
        stranger = browser.new_page()  # any local process (or page) without the launch URL
        stranger.goto(f"{base}/ui/")
        assert stranger.url.startswith(f"{base}/ui/login") and stranger.locator(".card").count() == 0
        assert "kubectl gatehouse inbox" in stranger.inner_text("main")
        page = browser.new_page()
        page.goto(url)
        assert page.url == f"{base}/ui/" and "launch=" not in page.url  # the secret leaves the address bar
        assert page.inner_text("[data-testid=viewer]") == "alice@example.com"
        card = page.locator('.card[data-key="default/fm-1"]')
        assert "delete_file" in card.inner_text() and "1 of 2" in card.inner_text()
        assert page.locator('.card[data-key="team-b/fm-b"]').count() == 0  # another namespace
        with runtime_answers(kube, "fm-1", lambda vote: counted):
            card.locator("[data-action=approve]").click()
            expect(page.locator("#status")).to_contain_text('toolapproval "fm-1" approved', timeout=20_000)
    assert votes(cluster, "fm-1") == [("alice@example.com", "Approve", "")]


@pytest.mark.parametrize(("browser", "display", "platform", "opened"), [
    (True, ":0", "linux", True), (True, "", "linux", False), (False, ":0", "linux", False), (True, "", "darwin", True),
])
def test_the_browser_is_opened_only_where_there_is_one(
    cluster: RunningEmulator, monkeypatch: pytest.MonkeyPatch, browser: bool, display: str, platform: str, opened: bool,
) -> None:
    import webbrowser

    import uvicorn

    from agent_runtime.clients import kubectl_inbox

    monkeypatch.setenv("DISPLAY", display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(kubectl_inbox.sys, "platform", platform)
    urls: list[str] = []
    monkeypatch.setattr(webbrowser, "open", urls.append)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: time.sleep(0.3))  # served at once, stopped
    said: list[str] = []
    kubectl_inbox.serve(None, True, None, 0, browser=browser, say=said.append)
    assert said[0].startswith("Inbox for alice@example.com (all namespaces): http://127.0.0.1:") and said[-1] == "Inbox stopped."
    assert urls == ([said[0].split(": ", 1)[1]] if opened else [])
