"""The inbox as a new user met it in Chromium (issue 37, item 6): each rough edge, as that person sees it.

The same runtime as test_inbox.py (``gatehouse`` in conftest.py: alice and bob in sre decide ``delete_file``; the
scripted model's "clean up <a> and <b>" asks for two ``delete_file`` calls in one task, "ask …" puts a question).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import pytest

from tests.support.runtime import state, wait_for
from tests.ui.conftest import Gatehouse, SignIn, card, open_inbox, status_line

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

pytestmark = pytest.mark.e2e


def seed(gatehouse: Gatehouse, *names: str) -> None:
    for name in names:
        (gatehouse.tools.sandbox / name).write_text(name)


def say_in_chat(chat: Page, text: str) -> None:
    chat.fill("#chat-input", text)
    chat.press("#chat-input", "Enter")


FOCUSED = "() => document.activeElement?.dataset?.key"


def test_the_chat_shows_why_a_message_decided_nothing_and_keeps_one_card(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "chat.txt")
    chat = sign_in("alice").new_page()
    chat.goto(f"{gatehouse.url}/ui/chat")
    say_in_chat(chat, "delete chat.txt")
    chat.locator(".chat-approval").wait_for()
    say_in_chat(chat, "list")  # not a decision: the runtime says so, and the call still waits
    chat.locator("#messages .msg.agent", has_text="Could not read a decision").wait_for()
    assert chat.locator(".chat-approval").count() == 1
    assert chat.locator(".chat-approval button", has_text="Approve").is_enabled()
    chat.locator(".chat-approval button", has_text="Approve").click()
    chat.locator("#messages .msg.agent", has_text="Delete of chat.txt").wait_for()
    assert len(gatehouse.tools.executions("delete_file", "chat.txt")) == 1


def test_feedback_shows_where_the_decision_was_made_and_a_batch_denial_starts_empty(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    seed(gatehouse, "f1.txt", "f2.txt", "f3.txt")
    alice_rpc = gatehouse.rpc("alice")
    for name in ("f1.txt", "f2.txt", "f3.txt"):
        alice_rpc.send(f"delete {name}")
    f1, f2, f3 = (gatehouse.request_for("delete_file", n) for n in ("f1.txt", "f2.txt", "f3.txt"))
    page = open_inbox(sign_in("alice"), gatehouse.url)
    assert page.eval_on_selector_all("#items .card", "cs => cs.map(c => c.dataset.key)") == [f3, f2, f1]

    def late(route: Route) -> None:  # the live update takes the card away before the runtime's answer arrives
        answer = route.fetch()
        time.sleep(1.5)
        route.fulfill(response=answer)

    page.route("**/ui/api/decisions", late)
    card(page, f2).locator("[data-action=approve]").click()
    card(page, f2).wait_for(state="detached")
    page.locator(f'#items .card-note.gone[data-for="{f2}"]').wait_for()
    page.unroute("**/ui/api/decisions")
    # Where f2 stood, between f3 and f1, the page says what became of it.
    note = page.locator(f'#items .card-note.gone[data-for="{f2}"]')
    assert "delete_file: approved (decided by alice)" in note.inner_text()
    assert note.evaluate("n => n.nextElementSibling.dataset.key") == f1
    assert note.evaluate("n => n.previousElementSibling.dataset.key") == f3

    # A batch denial: the form closes and forgets its reason once the runtime answered.
    page.check("#select-all")
    page.click("[data-action=batch-deny]")
    form = page.locator(".batch-deny-form")
    form.locator("textarea").fill("not today")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("[data-testid=empty]")
    for rid in (f1, f3):
        assert page.locator(f'#items .card-note.gone[data-for="{rid}"]', has_text="denied").is_visible()
    assert page.locator(".batch").is_hidden()  # nothing to select: no batch toolbar
    assert form.is_hidden()
    seed(gatehouse, "f4.txt")
    alice_rpc.send("delete f4.txt")
    f4 = gatehouse.request_for("delete_file", "f4.txt")
    card(page, f4).wait_for()
    assert page.locator(".batch").is_visible()
    page.check("#select-all")
    page.click("[data-action=batch-deny]")
    assert form.is_visible() and form.locator("textarea").input_value() == ""


def test_the_keyboard_keeps_its_place_and_x_on_a_question_says_why(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "q1.txt", "q2.txt", "q3.txt")
    alice_rpc = gatehouse.rpc("alice")
    for name in ("q1.txt", "q2.txt", "q3.txt"):
        alice_rpc.send(f"delete {name}")
    q1, q2, q3 = (gatehouse.request_for("delete_file", n) for n in ("q1.txt", "q2.txt", "q3.txt"))
    alice_rpc.send("ask which region?")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    question = page.locator("#items .card.question")
    question.wait_for()
    assert page.eval_on_selector_all("#items .card:not(.question)", "cs => cs.map(c => c.dataset.key)") == [q3, q2, q1]

    page.keyboard.press("j")  # the question (questions come first)
    page.keyboard.press("x")
    note = question.locator(".card-note")
    assert "A question cannot be selected" in note.inner_text()
    assert "A question cannot be selected" in status_line(page)
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == q2
    page.keyboard.press("a")
    card(page, q2).wait_for(state="detached")
    wait_for(lambda: page.evaluate(FOCUSED) == q1, 10)  # the card that took its place, not the top of the list
    page.keyboard.press("k")
    assert page.evaluate(FOCUSED) == q3


def test_the_calls_of_one_task_show_together_with_what_the_task_still_waits_on(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "g1.txt", "g2.txt")
    task = gatehouse.rpc("alice").send("clean up g1.txt and g2.txt")["task"]
    g1, g2 = gatehouse.request_for("delete_file", "g1.txt"), gatehouse.request_for("delete_file", "g2.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    group = page.locator(f'#items .task-group[data-task="{task["id"]}"]')
    assert sorted(group.locator(".card").evaluate_all("cs => cs.map(c => c.dataset.key)")) == sorted([g1, g2])
    assert "this task still waits on 2" in group.locator("[data-testid=task-waits]").inner_text()

    card(page, g1).locator("[data-action=approve]").click()
    card(page, g1).wait_for(state="detached")
    note = page.locator(f'#items .card-note[data-for="{g1}"]')
    assert "this task still waits on 1 more call" in note.inner_text()
    assert not gatehouse.tools.executions("delete_file", "g1.txt")  # the task goes on once both are decided
    card(page, g2).locator("[data-action=approve]").click()
    card(page, g2).wait_for(state="detached")
    wait_for(lambda: state(gatehouse.rpc("alice").get_task(task["id"])) == "TASK_STATE_COMPLETED", 30)
    assert len(gatehouse.tools.executions("delete_file", "g1.txt")) == 1


def test_approve_for_the_session_says_its_scope_and_the_history_shows_the_arguments(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    seed(gatehouse, "s1.txt")
    gatehouse.rpc("alice").send("delete s1.txt")
    rid = gatehouse.request_for("delete_file", "s1.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    scope = card(page, rid).locator("[data-testid=session-scope]")
    text = scope.inner_text()
    for words in ("this conversation", "these exact arguments", "delete_file", "for 1 h"):  # grantTTL: the default 1h
        assert words in text, text
    button = card(page, rid).locator("[data-action=approve-session]")
    assert button.get_attribute("aria-describedby") == scope.get_attribute("id")
    button.click()
    card(page, rid).wait_for(state="detached")

    page.goto(f"{gatehouse.url}/ui/history")
    row = page.locator(f'tr[data-key="{rid}"]')
    assert page.locator("th", has_text="Arguments").is_visible()
    assert re.search(r"path\s+s1\.txt", row.locator("[data-testid=history-args]").inner_text())


def test_a_late_click_names_the_channel_and_the_reason_apart(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "late.txt")
    gatehouse.rpc("alice").send("delete late.txt")
    rid = gatehouse.request_for("delete_file", "late.txt")
    page = sign_in("alice").new_page()
    page.goto(f"{gatehouse.url}/ui/requests/{rid}")  # not live: the click comes late
    with gatehouse.rest("bob") as rest:
        rest.post(f"/approvals/{rid}/decision", json={"decision": "deny", "reason": "decided over REST"},
                  headers={"Idempotency-Key": f"late-{rid}"}).raise_for_status()
    card(page, rid).locator("[data-action=approve]").click()
    page.wait_for_selector("#status .err")
    line = status_line(page)
    assert "delete_file: already denied by bob via rest; the reason given: “decided over REST”" in line, line
    assert "(decided over REST)" not in line
    assert "already denied by bob" in card(page, rid).locator(".card-note").inner_text()


def test_after_signing_out_in_another_tab_a_click_sends_the_person_to_sign_in_again(
    sign_in: SignIn, gatehouse: Gatehouse
) -> None:
    seed(gatehouse, "out.txt")
    gatehouse.rpc("alice").send("delete out.txt")
    rid = gatehouse.request_for("delete_file", "out.txt")
    context = sign_in("alice")
    page = context.new_page()
    page.goto(f"{gatehouse.url}/ui/requests/{rid}")
    assert page.inner_text("[data-testid=viewer]") == "alice"
    other = context.new_page()
    other.goto(f"{gatehouse.url}/ui/history")
    other.get_by_role("button", name="Sign out").click()
    other.wait_for_url(re.compile(r"/ui/login"))

    card(page, rid).locator("[data-action=approve]").click()
    banner = page.locator("#connection")
    banner.get_by_text("Your session has ended.").wait_for()
    assert "Authorization" not in status_line(page) and "Bearer" not in status_line(page)
    assert "sign in again" in status_line(page)
    assert page.inner_text(".top .who") == "Signed out" and page.locator("[data-action=logout]").count() == 0
    assert gatehouse.approval(rid)["status"] == "pending"
    banner.get_by_role("link", name="Sign in again").click()
    page.wait_for_url(re.compile(r"/ui/login\?next="))
