"""Edit and approve in the inbox, in a real browser: the form on an editable card, what runs, what is refused.

The ``gatehouse`` runtime of conftest.py (:data:`~tests.ui.conftest.RULES`): a write under ``edit/`` needs one member
of sre, who may change its arguments; a write of a ``.env`` file is refused; a write under ``prod/`` needs bob. dave
(nobody's approver) asks; alice and bob (sre) decide. The scripted model turns "write <text> to <file>" into
``write_file(path, content)``.
"""

from __future__ import annotations

import json
import secrets
from importlib import resources
from typing import TYPE_CHECKING, Any

import pytest

from agent_runtime.contract.principals import Principal
from agent_runtime.contract.redaction import REDACTED
from agent_runtime.ui.cards import Card
from agent_runtime.ui.pages import _environment
from tests.support.runtime import state, wait_for
from tests.ui.conftest import Gatehouse, SignIn, card, open_inbox, status_line

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

pytestmark = pytest.mark.e2e


def runs(gatehouse: Gatehouse, path: str) -> list[dict[str, Any]]:
    """The write_file executions at ``path``, once there is one (the task resumes after the decision)."""
    return list(wait_for(lambda: gatehouse.tools.executions("write_file", path), 30))


def completed(gatehouse: Gatehouse, task: dict[str, Any]) -> None:
    wait_for(lambda: state(gatehouse.rpc("dave").get_task(task["id"])) == "TASK_STATE_COMPLETED", 30)


def post_decision(page: Page, body: dict[str, Any]) -> Any:
    """POST /ui/api/decisions from the page's own script, with its CSRF token: ``{status, body}``."""
    return page.evaluate(
        """async (body) => {
            const token = document.querySelector('meta[name="csrf-token"]').content;
            const r = await fetch("/ui/api/decisions", {method: "POST", body: JSON.stringify(body),
                                  headers: {"content-type": "application/json", "x-csrf-token": token}});
            return {status: r.status, body: await r.json()};
        }""",
        body,
    )


def test_an_approver_changes_the_path_in_the_form_and_the_call_runs_once_at_the_new_path(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    dave = gatehouse.rpc("dave")
    task = dave.send("write draft to edit/a.txt")["task"]
    rid = gatehouse.request_for("write_file", "edit/a.txt")
    dave.send("write other to plain.txt")  # gated by requireApproval only: approvers may not edit it
    plain = gatehouse.request_for("write_file", "plain.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    shown = card(page, rid)
    assert card(page, plain).locator("[data-action=approve]").is_visible()
    assert card(page, plain).locator("[data-action=edit], .edit-form").count() == 0
    form = shown.locator(".edit-form")
    assert form.is_hidden()

    shown.locator("[data-action=edit]").click()
    path, content = form.locator('[data-arg="path"]'), form.locator('[data-arg="content"]')
    assert form.is_visible() and form.evaluate("f => f.contains(document.activeElement) && document.activeElement.dataset.arg")
    assert (path.input_value(), content.input_value()) == ("edit/a.txt", "draft")  # prefilled as shown
    form.locator("button[type=submit]").click()  # nothing changed yet: nothing is sent
    assert "Nothing is changed" in form.locator("[data-testid=edit-error]").inner_text()
    assert gatehouse.approval(rid)["status"] == "pending"

    path.fill("edit/b.txt")
    form.locator("button[type=submit]").click()
    shown.wait_for(state="detached")
    assert "write_file: approved with your edit (path) (decided by alice)" in status_line(page)
    assert [run["args"] for run in runs(gatehouse, "edit/b.txt")] == [{"path": "edit/b.txt", "content": "draft"}]
    completed(gatehouse, task)
    assert len(gatehouse.tools.executions("write_file", "edit/b.txt")) == 1
    assert gatehouse.tools.executions("write_file", "edit/a.txt") == []
    assert (gatehouse.tools.sandbox / "edit/b.txt").read_text() == "draft"
    assert not (gatehouse.tools.sandbox / "edit/a.txt").exists()
    view = gatehouse.approval(rid)
    assert (view["status"], view["source"], view["args"]) == ("approved", "inbox", {"path": "edit/b.txt", "content": "draft"})
    assert view["edited"] == {"by": "alice", "original_args": {"path": "edit/a.txt", "content": "draft"}, "changed": ["path"]}

    # The request's page shows the edit: who, which field, its value as the agent asked for it; nothing left to edit.
    detail = page.context.new_page()
    detail.goto(f"{gatehouse.url}/ui/requests/{rid}")
    edited = detail.locator("[data-testid=edited]")
    assert "Edited by alice: changed path." in edited.inner_text()
    assert edited.locator("dt").all_inner_texts() == ["path"] and edited.locator("code.path").inner_text() == "edit/a.txt"
    assert detail.locator(".card .args code.path").first.inner_text() == "edit/b.txt"
    assert detail.locator(".edit-form").count() == 0


def test_an_edit_a_deny_rule_catches_is_shown_on_the_card_and_decides_nothing(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    task = gatehouse.rpc("dave").send("write x to edit/c.txt")["task"]
    rid = gatehouse.request_for("write_file", "edit/c.txt")
    page = sign_in("alice").new_page()
    page.goto(f"{gatehouse.url}/ui/requests/{rid}")  # the request's own page offers the form too
    shown = page.locator(f'.card[data-key="{rid}"]')
    shown.locator("[data-action=edit]").click()
    form = shown.locator(".edit-form")
    form.locator('[data-arg="path"]').fill("edit/.env")
    page.evaluate("document.querySelector('.edit-form').dataset.before = 'yes'")  # gone once the page is rendered again
    form.locator("button[type=submit]").click()
    page.wait_for_function("() => !document.querySelector('.edit-form[data-before]')")
    error = form.locator("[data-testid=edit-error]")
    error.wait_for()
    text = error.inner_text()
    assert "The edited call would be refused by policy (refused by policy: argument 'path' matches glob '**/.env*')" in text
    assert "Nothing was decided" in text
    # Rendered again (the request as it stands), the form is still open as typed, the error on it.
    assert form.is_visible() and form.locator('[data-arg="path"]').input_value() == "edit/.env"
    view = gatehouse.approval(rid)
    assert view["status"] == "pending" and view["args"] == {"path": "edit/c.txt", "content": "x"} and not view.get("edited")
    assert not (view.get("approvers") or {}).get("votes")
    assert state(gatehouse.rpc("dave").get_task(task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert gatehouse.tools.executions("write_file", "edit/.env") == gatehouse.tools.executions("write_file", "edit/c.txt") == []

    # What the page's script never sends is refused alike: an edit made on arguments that have changed since, an
    # edit with a denial, of several requests, or for the session.
    stale = post_decision(page, {"ids": [rid], "decision": "approve", "arguments": {"path": "edit/z.txt"}, "args_hash": "0" * 64})
    assert stale["status"] == 200 and stale["body"]["results"][0]["status"] == "refused"
    assert "its arguments changed since your page showed them" in stale["body"]["results"][0]["message"]
    for bad in ({"decision": "deny", "reason": "no"}, {"decision": "approve", "session": True},
                {"decision": "approve", "ids": [rid, "apr-other"]}):
        answer = post_decision(page, {"ids": [rid], "arguments": {"path": "edit/z.txt"}, **bad})
        assert answer["status"] == 422 and "changed arguments go with an approval of one request" in answer["body"]["error"]
    assert gatehouse.approval(rid)["status"] == "pending"

    # The call as asked for can still be approved.
    shown.locator("[data-action=approve]").click()
    shown.locator(".outcome-approved").wait_for()
    assert [run["args"]["path"] for run in runs(gatehouse, "edit/c.txt")] == ["edit/c.txt"]
    assert not (gatehouse.tools.sandbox / "edit/.env").exists()


def test_an_edit_that_needs_other_approvers_waits_for_them(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    task = gatehouse.rpc("dave").send("write v2 to edit/d.txt")["task"]
    rid = gatehouse.request_for("write_file", "edit/d.txt")
    alice, bob = open_inbox(sign_in("alice"), gatehouse.url), open_inbox(sign_in("bob"), gatehouse.url)
    shown = card(alice, rid)
    shown.locator("[data-action=edit]").click()
    shown.locator('.edit-form [data-arg="path"]').fill("prod/d.txt")  # a write under prod/ needs bob
    shown.locator(".edit-form button[type=submit]").click()
    shown.wait_for(state="detached")  # alice may no longer see it: only bob may decide it now
    said = status_line(alice)
    assert "write_file: your edit (path) was applied; the edited call needs other approvers" in said
    assert "waiting for bob; 1 approval needed" in said
    view = gatehouse.approval(rid, "bob")
    assert view["status"] == "pending" and view["args"]["path"] == "prod/d.txt"
    assert not gatehouse.tools.executions("write_file", "prod/d.txt")
    # bob's page shows the edited call waiting for him.
    theirs = card(bob, rid)
    theirs.locator("[data-testid=edited]", has_text="Edited by alice: changed path.").wait_for()
    assert theirs.locator(".args code.path").first.inner_text() == "prod/d.txt"
    assert "who may decide: bob; 1 approval needed" in theirs.inner_text()
    theirs.locator("[data-action=approve]").click()
    theirs.wait_for(state="detached")
    assert [run["args"] for run in runs(gatehouse, "prod/d.txt")] == [{"path": "prod/d.txt", "content": "v2"}]
    completed(gatehouse, task)
    assert gatehouse.tools.executions("write_file", "edit/d.txt") == []


def test_a_redacted_field_left_as_shown_keeps_its_real_value_and_no_page_holds_it(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    secret = "sk-" + secrets.token_hex(16)  # the shape of an API key: redacted by the built-in patterns
    task = gatehouse.rpc("dave").send(f"write {secret} to edit/s.txt")["task"]
    rid = gatehouse.request_for("write_file", "edit/s.txt")
    assert gatehouse.approval(rid)["args"]["content"] == REDACTED
    alice = sign_in("alice")
    page = open_inbox(alice, gatehouse.url)
    seen = [page.content()]
    shown = card(page, rid)
    assert REDACTED in shown.locator(".args").first.inner_text()
    assert shown.locator(".args dt", has_text="content").locator(".tag").inner_text() == "redacted"
    assert shown.locator("blockquote.context").inner_text() == f"write {REDACTED} to edit/s.txt"  # the message too
    shown.locator("[data-action=edit]").click()
    form = shown.locator(".edit-form")
    content = form.locator('[data-arg="content"]')
    assert content.input_value() == REDACTED and content.get_attribute("readonly") is not None
    assert "Hidden from you: it keeps its real value." in form.inner_text()
    seen.append(page.content())
    # Changing a redacted value (a page whose script was bypassed) is refused: nobody edits what they cannot see.
    forged = post_decision(page, {"ids": [rid], "decision": "approve", "arguments": {"content": f"{REDACTED}!"}})
    (result,) = forged["body"]["results"]
    assert result["status"] == "refused" and "redacted fields cannot be edited: $.content" in result["message"], result
    assert gatehouse.approval(rid)["status"] == "pending"

    form.locator('[data-arg="path"]').fill("edit/s2.txt")
    form.locator("button[type=submit]").click()
    shown.wait_for(state="detached")
    assert "approved with your edit (path)" in status_line(page)
    (run,) = runs(gatehouse, "edit/s2.txt")
    assert run["args"] == {"path": "edit/s2.txt", "content": secret}  # the tool ran with the real value
    completed(gatehouse, task)
    assert (gatehouse.tools.sandbox / "edit/s2.txt").read_text() == secret
    assert gatehouse.tools.executions("write_file", "edit/s.txt") == []
    seen.append(page.content())
    other = alice.new_page()
    other.goto(f"{gatehouse.url}/ui/history")
    seen.append(other.content())
    assert other.locator(f'tr[data-key="{rid}"] [data-testid=edited]').inner_text() == "edited by alice"
    other.goto(f"{gatehouse.url}/ui/requests/{rid}")
    seen.append(other.content())
    edited = other.locator("[data-testid=edited]")
    assert "Edited by alice: changed path." in edited.inner_text() and edited.locator("code.path").inner_text() == "edit/s.txt"
    assert all(secret not in html for html in seen)
    assert all(secret[3:15] not in html for html in seen)  # not even part of it


def test_the_form_sends_only_what_changed_strings_as_typed_and_json_parsed(browser: Browser) -> None:
    """The page's script alone, on a request's page rendered by the real templates (a JSON argument the scripted model
    never makes), its decisions answered here: what exactly is sent, and a JSON field that does not parse is not."""
    args = {"path": "a.txt", "limit": 3, "options": {"force": False, "tags": ["x"]}, "note": "line one\r\nline two"}
    shown = Card(id="apr-1", agent="files", tool="sync", args=args, hint="gated", status="pending", created_at=0,
                 expires_at=4_102_444_800, editable=True, args_hash="h1")
    html = _environment().get_template("detail.html").render(
        card=shown, viewer=Principal("alice"), csrf="c1", source=type("S", (), {"title": "t", "chat": False})(), now=0,
        path="/ui/requests/apr-1")
    script = resources.files("agent_runtime.ui").joinpath("static/inbox.js").read_text()
    sent: list[Any] = []

    def serve(route: Route) -> None:
        if route.request.url.endswith("/ui/api/decisions"):
            sent.append((route.request.headers.get("x-csrf-token"), json.loads(route.request.post_data or "")))
            route.fulfill(json={"results": [{"id": "apr-1", "ok": False, "status": "refused", "message": "not today"}]})
        elif route.request.url.endswith(".js"):
            route.fulfill(body=script, content_type="text/javascript")
        elif route.request.url.endswith(".css") or "/ui/events" in route.request.url:
            route.fulfill(body="", content_type="text/css")
        else:
            route.fulfill(body=html, content_type="text/html")

    context = browser.new_context()
    try:
        context.route("http://inbox.test/**", serve)
        page = context.new_page()
        page.goto("http://inbox.test/ui/requests/apr-1")
        page.click("[data-action=edit]")
        form = page.locator(".edit-form")
        assert form.locator('[data-arg="note"]').input_value() == "line one\nline two"  # a text area: CR LF shows as LF
        form.locator('[data-arg="limit"]').fill("4")
        form.locator('[data-arg="options"]').fill('{"force": true, "tags": ["x", "y"]')  # one brace short
        form.locator("button[type=submit]").click()
        error = form.locator("[data-testid=edit-error]")
        assert error.inner_text().startswith("options is not valid JSON") and sent == []
        form.locator('[data-arg="options"]').fill('{"force": true, "tags": ["x", "y"]}')
        form.locator('[data-arg="path"]').fill("b.txt")
        form.locator("button[type=submit]").click()
        error.filter(has_text="not today").wait_for()  # the answer shows on the card; the form stays as typed
        assert sent == [("c1", {"ids": ["apr-1"], "decision": "approve", "reason": "", "session": False, "args_hash": "h1",
                                "arguments": {"path": "b.txt", "limit": 4, "options": {"force": True, "tags": ["x", "y"]}}})]
        assert form.locator('[data-arg="limit"]').input_value() == "4"
        form.locator("[data-action=cancel-edit]").click()  # cancel: closed, and the fields as shown again
        assert form.is_hidden() and form.locator('[data-arg="limit"]').input_value() == "3"
    finally:
        context.close()
