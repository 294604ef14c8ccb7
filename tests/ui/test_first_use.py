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


def test_feedback_shows_where_the_decision_was_made(sign_in: SignIn, gatehouse: Gatehouse) -> None:
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
    note = page.locator(f'#items .card-note.gone[data-for="{f2}"]')
    note.wait_for()
    page.unroute("**/ui/api/decisions")
    # Where f2 stood, between f3 and f1, the page says what became of it.
    assert "delete_file: approved (decided by alice)" in note.inner_text()
    assert note.evaluate("n => n.nextElementSibling.dataset.key") == f1
    assert note.evaluate("n => n.previousElementSibling.dataset.key") == f3


def test_a_batch_denial_closes_its_form_and_the_next_starts_empty(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "d1.txt", "d2.txt", "d3.txt")
    alice_rpc = gatehouse.rpc("alice")
    alice_rpc.send("delete d1.txt")
    alice_rpc.send("delete d2.txt")
    d1, d2 = gatehouse.request_for("delete_file", "d1.txt"), gatehouse.request_for("delete_file", "d2.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    page.check("#select-all")
    page.click("[data-action=batch-deny]")
    form = page.locator(".batch-deny-form")
    form.locator("textarea").fill("not today")
    form.locator("button[type=submit]").click()
    for rid in (d1, d2):
        card(page, rid).wait_for(state="detached")
    form.wait_for(state="hidden")
    alice_rpc.send("delete d3.txt")
    d3 = gatehouse.request_for("delete_file", "d3.txt")
    card(page, d3).wait_for()
    assert not page.is_checked("#select-all")  # "Select all" was of the cards that left
    page.check("#select-all")
    page.click("[data-action=batch-deny]")
    assert form.is_visible() and form.locator("textarea").input_value() == ""


def test_an_empty_inbox_has_no_batch_toolbar(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    page = open_inbox(sign_in("alice"), gatehouse.url)
    assert page.is_visible("[data-testid=empty]") and page.locator(".batch").is_hidden()
    seed(gatehouse, "e1.txt")
    gatehouse.rpc("alice").send("delete e1.txt")
    e1 = gatehouse.request_for("delete_file", "e1.txt")
    card(page, e1).wait_for()
    assert page.locator(".batch").is_visible()
    card(page, e1).locator("[data-action=approve]").click()
    page.wait_for_selector("[data-testid=empty]")
    page.locator(".batch").wait_for(state="hidden")


def test_after_a_the_focus_stays_in_place(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "p1.txt", "p2.txt", "p3.txt")
    alice_rpc = gatehouse.rpc("alice")
    for name in ("p1.txt", "p2.txt", "p3.txt"):
        alice_rpc.send(f"delete {name}")
    k1, k2, k3 = (gatehouse.request_for("delete_file", n) for n in ("p1.txt", "p2.txt", "p3.txt"))
    page = open_inbox(sign_in("alice"), gatehouse.url)
    assert page.eval_on_selector_all("#items .card", "cs => cs.map(c => c.dataset.key)") == [k3, k2, k1]
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == k2
    page.keyboard.press("a")
    card(page, k2).wait_for(state="detached")
    wait_for(lambda: page.evaluate(FOCUSED) == k1, 10)  # the card that took its place, not the top of the list
    page.keyboard.press("k")
    assert page.evaluate(FOCUSED) == k3


def test_x_or_a_on_a_question_says_why_it_does_nothing(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    gatehouse.rpc("alice").send("ask which region?")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    question = page.locator("#items .card.question")
    question.wait_for()
    page.keyboard.press("j")
    page.keyboard.press("x")
    note = question.locator(".card-note")
    assert "A question cannot be selected" in note.inner_text()
    assert "A question cannot be selected" in status_line(page)
    page.keyboard.press("a")
    assert "A question has no approve: choose one of its options" in note.inner_text()
    assert question.locator("[data-action=answer]").count() == 2  # nothing was answered


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


def test_approve_for_the_session_says_its_scope(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "s1.txt")
    gatehouse.rpc("alice").send("delete s1.txt")
    rid = gatehouse.request_for("delete_file", "s1.txt")
    page = open_inbox(sign_in("alice"), gatehouse.url)
    scope = card(page, rid).locator("[data-testid=session-scope]")
    text = scope.inner_text()
    for words in ("this conversation", "these exact arguments", "delete_file", "for 1 h"):  # grantTTL: the default 1h
        assert words in text, text
    assert card(page, rid).locator("[data-action=approve-session]").get_attribute("aria-describedby") == scope.get_attribute("id")


def test_the_history_shows_the_arguments(sign_in: SignIn, gatehouse: Gatehouse) -> None:
    seed(gatehouse, "h1.txt")
    gatehouse.rpc("alice").send("delete h1.txt")
    rid = gatehouse.request_for("delete_file", "h1.txt")
    with gatehouse.rest("alice") as rest:
        rest.post(f"/approvals/{rid}/decision", json={"decision": "approve"},
                  headers={"Idempotency-Key": f"h-{rid}"}).raise_for_status()
    page = sign_in("alice").new_page()
    page.goto(f"{gatehouse.url}/ui/history")
    assert page.locator("th", has_text="Arguments").is_visible()
    args = page.locator(f'tr[data-key="{rid}"] [data-testid=history-args]').inner_text()
    assert re.search(r"path\s+h1\.txt", args), args


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
