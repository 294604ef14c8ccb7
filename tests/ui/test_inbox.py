"""The approvals inbox in a real browser (Debian's Chromium, Playwright): what a person sees and can do.

One runtime for the module (``gatehouse`` in conftest.py: tokens for alice, bob, carol and dave; ``write_file`` needs
alice's and bob's approvals, every other gated call one from group sre, alice or bob; carol decides nothing); every
test cancels whatever it left waiting.
The scripted model: "delete <file>" asks to run ``delete_file``, "write <text> to <file>" ``write_file``, "ask …"
puts a ``hitl_request`` question. The last test kills the runtime and starts it again.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.runtime import state, status_text, wait_for
from tests.ui.conftest import TOKENS, WAIT_MS, Gatehouse, SignIn, card, open_inbox, status_line

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.e2e


def not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.notReloaded === true"))


def open_chat(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    page.goto(f"{url}/ui/chat")
    return page


def say_in_chat(chat: Page, text: str) -> None:
    chat.fill("#chat-input", text)
    chat.press("#chat-input", "Enter")


def pending(gatehouse: Gatehouse, request_id: str) -> bool:
    return gatehouse.approval(request_id)["status"] == "pending"


def ran_once(gatehouse: Gatehouse, tool: str, path: str) -> bool:
    """Whether the call ran exactly once (waiting for it to run: the task resumes after the decision)."""
    return len(wait_for(lambda: gatehouse.tools.executions(tool, path), 30)) == 1


def seed(gatehouse: Gatehouse, *names: str) -> None:
    for name in names:
        (gatehouse.tools.sandbox / name).write_text(name)


def test_a_call_appears_live_and_approving_it_runs_it_once_and_the_chat_shows_the_reply(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    seed(gatehouse, "live.txt")
    alice = sign_in("alice")
    inbox = open_inbox(alice, gatehouse.url)
    assert inbox.is_visible("[data-testid=empty]")
    chat = open_chat(alice, gatehouse.url)
    say_in_chat(chat, "delete live.txt")
    chat.wait_for_selector(".chat-approval")  # the chat shows its own pause inline
    rid = gatehouse.request_for("delete_file", "live.txt")
    shown = card(inbox, rid)
    shown.wait_for()
    assert not_reloaded(inbox) and not inbox.is_visible("[data-testid=empty]")
    text = shown.inner_text()
    assert shown.locator(".tool").inner_text() == "delete_file"
    assert shown.locator(".agent").inner_text() == "file-manager"
    assert "on file-tools" in text  # the MCP server
    assert shown.locator("dt").inner_text().strip() == "path" and shown.locator("code.path").inner_text() == "live.txt"
    hint = gatehouse.approval(rid)["hint"]
    assert hint and f"Why it is gated: {hint}" in text
    assert "Asked by alice" in text
    assert re.fullmatch(r"expires in 1[45]m \d+s", shown.locator(".countdown").inner_text())  # 15 minutes, ticking
    assert shown.locator("blockquote.context").inner_text() == "delete live.txt"  # the conversation's last message
    assert (gatehouse.tools.sandbox / "live.txt").exists() and not gatehouse.tools.executions("delete_file", "live.txt")

    shown.locator("[data-action=approve]").click()
    shown.wait_for(state="detached")
    inbox.wait_for_selector("[data-testid=empty]")
    assert "delete_file: approved (decided by alice)" in status_line(inbox)
    reply = chat.locator("#messages .msg.agent", has_text="Delete of live.txt")
    reply.wait_for()
    assert len(gatehouse.tools.executions("delete_file", "live.txt")) == 1
    assert not (gatehouse.tools.sandbox / "live.txt").exists()
    assert chat.locator(".chat-approval button").first.is_disabled()  # decided elsewhere: the chat's card is done
    assert gatehouse.approval(rid)["source"] == "inbox"
    assert not_reloaded(inbox)


def test_a_denial_needs_a_reason_and_the_chat_reply_quotes_it(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "keep.txt")
    alice = sign_in("alice")
    inbox = open_inbox(alice, gatehouse.url)
    chat = open_chat(alice, gatehouse.url)
    say_in_chat(chat, "delete keep.txt")
    rid = gatehouse.request_for("delete_file", "keep.txt")
    shown = card(inbox, rid)
    shown.locator("[data-action=deny]").click()
    form = shown.locator(".deny-form")
    assert form.is_visible()
    reason = form.locator("textarea")
    assert reason.evaluate("e => e === document.activeElement")
    posted: list[str] = []
    inbox.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    # Empty: the browser refuses the form (the field is required); blank: the page says why. Nothing is decided.
    form.locator("button[type=submit]").click()
    assert reason.evaluate("e => e.validity.valueMissing")
    reason.fill("   ")
    form.locator("button[type=submit]").click()
    inbox.wait_for_selector("#status .err")
    assert "A denial needs a reason" in status_line(inbox)
    assert posted == [] and pending(gatehouse, rid) and shown.is_visible()

    reason.fill("the file is in use")
    form.locator("button[type=submit]").click()
    shown.wait_for(state="detached")
    chat.locator("#messages .msg.agent", has_text="the file is in use").wait_for()
    view = gatehouse.approval(rid)
    assert (view["status"], view["reason"], view["decided_by"]) == ("denied", "the file is in use", "alice")
    assert not gatehouse.tools.executions("delete_file", "keep.txt") and (gatehouse.tools.sandbox / "keep.txt").exists()


def test_two_of_two_in_two_browsers_runs_once_and_a_late_click_sees_who_decided(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    alice_context, bob_context = sign_in("alice"), sign_in("bob")
    alice, bob = open_inbox(alice_context, gatehouse.url), open_inbox(bob_context, gatehouse.url)
    dave = gatehouse.rpc("dave")
    task = dave.send("write hello to two.txt")["task"]
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    rid = gatehouse.request_for("write_file", "two.txt")
    for page in (alice, bob):
        shown = card(page, rid)
        shown.wait_for()
        assert shown.locator("[data-testid=votes]").inner_text() == "0 of 2 approvals"
        assert "Asked by dave" in shown.inner_text()
    # alice's detail page, opened now, is not live: her click there comes late.
    late = alice_context.new_page()
    late.goto(f"{gatehouse.url}/ui/requests/{rid}")

    card(alice, rid).locator("[data-action=approve]").click()
    for page in (alice, bob):  # both pages follow the vote live
        card(page, rid).locator("[data-testid=votes]", has_text="1 of 2 approvals").wait_for()
    assert "your approval counted, 1 of 2" in status_line(alice)
    assert pending(gatehouse, rid) and not gatehouse.tools.executions("write_file", "two.txt")

    card(bob, rid).locator("[data-action=approve]").click()
    for page in (alice, bob):
        card(page, rid).wait_for(state="detached")
    assert "write_file: approved (decided by alice, bob)" in status_line(bob)
    done = wait_for(lambda: (t := dave.get_task(task["id"])) and state(t) == "TASK_STATE_COMPLETED" and t, 30)
    assert "Write of two.txt" in status_text(done)
    assert len(gatehouse.tools.executions("write_file", "two.txt")) == 1
    assert not_reloaded(alice) and not_reloaded(bob)

    card(late, rid).locator("[data-action=approve]").click()
    late.wait_for_selector("#status .err")
    assert "write_file: already approved by alice, bob" in status_line(late)
    # … and the page now shows the outcome (the message stays: the page is rendered again, not reloaded).
    card(late, rid).locator(".result", has_text="Approved by alice, bob via inbox").wait_for()
    assert "already approved by alice, bob" in status_line(late)
    assert len(gatehouse.tools.executions("write_file", "two.txt")) == 1
    votes = [(v["by"], v["vote"], v["via"]) for v in gatehouse.approval(rid)["approvers"]["votes"]]
    assert votes == [("alice", "approve", "inbox"), ("bob", "approve", "inbox")]


def test_login_exchanges_the_token_for_a_cookie_the_page_never_sees(browser: Browser, gatehouse: Gatehouse) -> None:
    context = browser.new_context()
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        page.goto(f"{gatehouse.url}/ui/")
        assert page.url == f"{gatehouse.url}/ui/login?next=/ui/"
        assert page.get_attribute("#token", "type") == "password"
        assert page.locator("label[for=token]").is_visible()
        wrong = "tok-nobody-" + TOKENS["alice"][-6:]
        page.fill("#token", wrong)
        with page.expect_response(lambda r: r.url.endswith("/ui/login") and r.request.method == "POST") as answer:
            page.click("button[type=submit]")
        assert answer.value.status == 401
        assert page.inner_text("[role=alert]") == "this token is not valid here"
        assert wrong not in page.content() and page.input_value("#token") == ""
        assert not context.cookies()

        page.fill("#token", TOKENS["alice"])
        page.click("button[type=submit]")
        page.wait_for_url(f"{gatehouse.url}/ui/")
        assert page.inner_text("[data-testid=viewer]") == "alice"
        (cookie,) = context.cookies()
        assert cookie["name"] == "gatehouse_session"
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        assert TOKENS["alice"] not in cookie["value"]
        for path in ("/ui/", "/ui/chat", "/ui/history"):
            page.goto(f"{gatehouse.url}{path}")
            assert page.evaluate("document.cookie") == ""  # HttpOnly: the page's scripts cannot read it
            assert page.evaluate("localStorage.length + sessionStorage.length") == 0
            assert TOKENS["alice"] not in page.content(), path
            assert cookie["value"] not in page.content(), path
        # Signing out ends it: the inbox asks for a token again.
        page.click("[data-action=logout]")
        page.wait_for_url(re.compile(r"/ui/login"))
        page.goto(f"{gatehouse.url}/ui/")
        assert "/ui/login" in page.url
    finally:
        context.close()


def decide_from_page(page: Page, ids: list[str], decision: str, reason: str = "", csrf: str | None = None) -> Any:
    """POST /ui/api/decisions from the page's own script context, with its CSRF token (or ``csrf``; "" for none)."""
    return page.evaluate(
        """async ([ids, decision, reason, csrf]) => {
            const token = csrf ?? document.querySelector('meta[name="csrf-token"]').content;
            const headers = {"content-type": "application/json"};
            if (token) headers["x-csrf-token"] = token;
            const r = await fetch("/ui/api/decisions", {method: "POST", headers, body: JSON.stringify({ids, decision, reason})});
            return {status: r.status, body: await r.json()};
        }""",
        [ids, decision, reason, csrf],
    )


def test_a_user_without_rights_sees_nothing_and_cannot_decide(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "alices.txt")
    alice_task = gatehouse.rpc("alice").send("delete alices.txt")["task"]
    dave_task = gatehouse.rpc("dave").send("write x to daves.txt")["task"]
    mine, theirs = gatehouse.request_for("delete_file", "alices.txt"), gatehouse.request_for("write_file", "daves.txt")
    carol = sign_in("carol")
    inbox = open_inbox(carol, gatehouse.url)
    assert inbox.is_visible("[data-testid=empty]") and inbox.locator("#items .card").count() == 0, inbox.inner_text("main")
    fetched: list[str] = []
    inbox.on("request", lambda r: fetched.append(r.url) if "/ui/fragments/" in r.url else None)
    gatehouse.rpc("dave").send("write y to later.txt")  # a new request carol may not see: her page is not even told
    later = gatehouse.request_for("write_file", "later.txt")
    inbox.wait_for_timeout(1500)
    assert fetched == [] and inbox.is_visible("[data-testid=empty]")

    for rid in (mine, theirs, later):
        for decision, reason in (("approve", ""), ("deny", "carol says no")):
            answer = decide_from_page(inbox, [rid], decision, reason)
            assert answer["status"] == 200, answer
            (result,) = answer["body"]["results"]
            assert (result["ok"], result["status"]) == (False, "unknown"), result
        view = gatehouse.approval(rid)
        assert view["status"] == "pending", view
        assert not (view.get("approvers") or {}).get("votes"), view
    assert state(gatehouse.rpc("alice").get_task(alice_task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    assert state(gatehouse.rpc("dave").get_task(dave_task["id"])) == "TASK_STATE_INPUT_REQUIRED"
    # Nor does any other page show them to her.
    page = carol.new_page()
    for rid in (mine, theirs):
        page.goto(f"{gatehouse.url}/ui/requests/{rid}")
        assert "There is no request" in page.inner_text("main") and page.locator(".card").count() == 0
    assert not gatehouse.tools.executions("delete_file", "alices.txt")


def test_a_state_changing_request_without_the_csrf_token_is_refused(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "csrf.txt")
    gatehouse.rpc("alice").send("delete csrf.txt")
    rid = gatehouse.request_for("delete_file", "csrf.txt")
    alice = sign_in("alice")
    page = alice.new_page()
    page.goto(f"{gatehouse.url}/ui/")
    token = page.get_attribute('meta[name="csrf-token"]', "content")
    assert token
    decision = json.dumps({"ids": [rid], "decision": "deny", "reason": "forged"})
    a2a = json.dumps({"jsonrpc": "2.0", "id": "1", "method": "SendMessage", "params": {"message": {
        "messageId": "m-csrf", "role": "ROLE_USER", "parts": [{"text": "delete csrf.txt"}]}}})
    tasks_before = len(gatehouse.rpc("alice").call("ListTasks", {})["result"]["tasks"])
    json_headers = {"content-type": "application/json", "a2a-version": "1.0"}
    refused = [
        ("no token", {}), ("a wrong token", {"x-csrf-token": token[::-1]}),
        ("another site's page", {"x-csrf-token": token, "origin": "https://evil.example"}),
    ]
    for path, body in (("/ui/api/decisions", decision), ("/", a2a)):
        for why, headers in refused:  # the session cookie goes with every one of these
            answer = alice.request.post(f"{gatehouse.url}{path}", data=body, headers={**json_headers, **headers})
            assert answer.status == 403, (path, why, answer.status, answer.text())
            assert "CSRF" in answer.text() or "another site" in answer.text(), answer.text()
    # The same from the page's own script: no header, a wrong one.
    for csrf in ("", "wrong"):
        assert decide_from_page(page, [rid], "deny", "forged", csrf=csrf)["status"] == 403
    assert pending(gatehouse, rid) and len(gatehouse.rpc("alice").call("ListTasks", {})["result"]["tasks"]) == tasks_before
    # With the page's token, from the page's origin, the same requests are taken (the refusals were the CSRF check).
    taken = alice.request.post(f"{gatehouse.url}/", data=a2a.replace("m-csrf", "m-ok").replace("delete csrf.txt", "list /"),
                               headers={**json_headers, "x-csrf-token": token, "origin": gatehouse.url})
    assert taken.status == 200 and "Here is what I found" in taken.text(), taken.text()
    answer = decide_from_page(page, [rid], "deny", "taken")
    assert answer["status"] == 200 and answer["body"]["results"][0]["status"] == "decided", answer
    assert gatehouse.approval(rid)["status"] == "denied"


def test_keyboard_moves_approves_and_opens_the_deny_form_and_375px_does_not_scroll_sideways(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    seed(gatehouse, "k1.txt", "k2.txt")
    long_path = "reports/2026/quarterly-numbers-for-every-region-and-every-team/" + "x" * 60 + ".csv"
    gatehouse.rpc("alice").send(f"write {'lorem ipsum ' * 30}to {long_path}")  # long arguments, a long path
    alice_rpc = gatehouse.rpc("alice")
    alice_rpc.send("delete k1.txt")
    alice_rpc.send("delete k2.txt")
    k1, k2 = gatehouse.request_for("delete_file", "k1.txt"), gatehouse.request_for("delete_file", "k2.txt")
    write = gatehouse.request_for("write_file", long_path)
    context = sign_in("alice", viewport={"width": 375, "height": 740})
    page = open_inbox(context, gatehouse.url)
    keys = page.eval_on_selector_all("#items .card", "cards => cards.map(c => c.dataset.key)")
    assert keys == [k2, k1, write]  # newest first
    chat = open_chat(context, gatehouse.url)
    say_in_chat(chat, "hello-" + "x" * 200)  # a long word each way: the model does not understand it and says so
    chat.locator("#messages .msg.agent").wait_for()
    for shown in (page, chat):
        assert shown.evaluate("document.documentElement.scrollWidth") <= 375, shown.url
    for button in page.locator("#items .card button:visible, .batch button:visible").all():
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, (button.inner_text(), box)
    for rid in (k1, k2, write):
        assert card(page, rid).locator("[data-action=approve]").is_visible()
        assert card(page, rid).locator("[data-action=deny]").is_visible()

    focused = "() => document.activeElement?.dataset?.key"
    page.keyboard.press("j")
    assert page.evaluate(focused) == k2
    page.keyboard.press("j")
    assert page.evaluate(focused) == k1
    page.keyboard.press("k")
    assert page.evaluate(focused) == k2
    page.keyboard.press("a")  # approves k2, the focused card
    card(page, k2).wait_for(state="detached")
    assert ran_once(gatehouse, "delete_file", "k2.txt")
    assert pending(gatehouse, k1) and not gatehouse.tools.executions("delete_file", "k1.txt")
    assert page.evaluate(focused) == k1  # the card that took k2's place (tests/ui/test_first_use.py)
    page.keyboard.press("d")
    form = card(page, k1).locator(".deny-form")
    assert form.is_visible()
    assert form.locator("textarea").evaluate("e => e === document.activeElement")
    page.keyboard.type("not k1")  # typed into the reason: no shortcut fires while typing
    assert pending(gatehouse, k1) and page.locator("#items .card").count() == 2
    form.locator("button[type=submit]").click()
    card(page, k1).wait_for(state="detached")
    assert gatehouse.approval(k1)["reason"] == "not k1" and not gatehouse.tools.executions("delete_file", "k1.txt")
    assert pending(gatehouse, write)


def test_a_denial_being_written_survives_a_new_request_arriving(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    """The list is swapped in live; a half-written reason (and its focus) must not be swapped away with it."""
    seed(gatehouse, "w1.txt", "w2.txt")
    alice_rpc = gatehouse.rpc("alice")
    alice_rpc.send("delete w1.txt")
    w1 = gatehouse.request_for("delete_file", "w1.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    card(page, w1).locator("[data-action=deny]").click()
    page.keyboard.type("still in ")
    alice_rpc.send("delete w2.txt")  # a new card arrives: the list is refreshed under the open form
    w2 = gatehouse.request_for("delete_file", "w2.txt")
    card(page, w2).wait_for()
    page.keyboard.type("use")  # the focus stayed in the reason
    form = card(page, w1).locator(".deny-form")
    assert form.is_visible() and form.locator("textarea").input_value() == "still in use"
    form.locator("button[type=submit]").click()
    card(page, w1).wait_for(state="detached")
    assert gatehouse.approval(w1)["reason"] == "still in use" and pending(gatehouse, w2)


def test_approve_several_at_once(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "b1.txt", "b2.txt")
    alice_rpc = gatehouse.rpc("alice")
    first, second = alice_rpc.send("delete b1.txt")["task"], alice_rpc.send("delete b2.txt")["task"]
    b1, b2 = gatehouse.request_for("delete_file", "b1.txt"), gatehouse.request_for("delete_file", "b2.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    assert page.locator("#items .card").count() == 2
    page.click("[data-action=batch-approve]")  # nothing selected: nothing happens but a note
    assert "Select one or more requests first." in status_line(page)
    assert pending(gatehouse, b1) and pending(gatehouse, b2)
    page.check("#select-all")
    assert page.locator("#items .select:checked").count() == 2
    page.click("[data-action=batch-approve]")
    page.wait_for_selector("[data-testid=empty]")
    assert status_line(page).count("delete_file: approved (decided by alice)") == 2
    for task in (first, second):
        wait_for(lambda task=task: state(alice_rpc.get_task(task["id"])) == "TASK_STATE_COMPLETED", 30)
    assert len(gatehouse.tools.executions("delete_file", "b1.txt")) == 1
    assert len(gatehouse.tools.executions("delete_file", "b2.txt")) == 1


def test_a_question_shows_with_its_options_and_answering_it_resumes_the_task(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    alice = sign_in("alice")
    inbox = open_inbox(alice, gatehouse.url)
    chat = open_chat(alice, gatehouse.url)
    say_in_chat(chat, "ask which environment should I deploy to?")
    question = inbox.locator("#items .card.question")
    question.wait_for()
    assert question.locator(".q").inner_text() == "which environment should I deploy to?"
    options = question.locator("[data-action=answer]")
    assert options.all_inner_texts() == ["staging", "production"]
    assert question.locator("blockquote.context").inner_text() == "ask which environment should I deploy to?"
    assert not_reloaded(inbox)
    # Nobody else sees alice's question.
    assert open_inbox(sign_in("bob"), gatehouse.url).locator("#items .card.question").count() == 0

    options.filter(has_text="production").click()
    confirm = question.locator("[data-action=confirm]")
    confirm.wait_for()  # the question asks for a confirmation
    assert "You chose production. The choice is recorded in the audit trail." in question.inner_text()
    confirm.click()
    question.wait_for(state="detached")
    inbox.wait_for_selector("[data-testid=empty]")
    chat.locator("#messages .msg.agent", has_text="production").wait_for()
    (task,) = [t for t in gatehouse.rpc("alice").call("ListTasks", {"includeArtifacts": True})["result"]["tasks"]
               if "which environment" in json.dumps(t.get("history", []))]
    assert state(task) == "TASK_STATE_COMPLETED" and "production" in status_text(task)


def test_the_page_says_when_the_connection_is_lost_and_catches_up_after_a_restart(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    """Last in the module: the runtime is killed and started again (its session key kept: still logged in)."""
    seed(gatehouse, "after.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    banner = page.locator("#connection")
    assert banner.is_hidden()
    gatehouse.proc.kill9()
    try:
        banner.wait_for(state="visible")
        assert "Connection lost" in banner.inner_text()
    finally:
        gatehouse.proc.start()
    banner.wait_for(state="hidden", timeout=30_000)
    gatehouse.rpc("alice").send("delete after.txt")
    rid = gatehouse.request_for("delete_file", "after.txt")
    card(page, rid).wait_for()
    assert not_reloaded(page)
    card(page, rid).locator("[data-action=approve]").click()
    card(page, rid).wait_for(state="detached")
    assert ran_once(gatehouse, "delete_file", "after.txt")
