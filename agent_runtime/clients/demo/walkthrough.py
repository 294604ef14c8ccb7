"""The conversation ``gatehouse demo`` walks through, and the checks that make it a test.

Each :class:`Step` is what the user types, the gated calls the turn must pause on (none: it completes at once),
the decision to send as one data part, and what must be true afterwards (reply texts, files gone or kept).
Narrated mode sends every step over A2A with :mod:`agent_runtime.clients.a2a_client`, prints the pause's data part and
the exact decision payload, and raises :class:`DemoFailure` at the first step that did not behave. Interactive
mode prints a short narration and hands the terminal to ``gatehouse chat``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.client import Client
from rich.console import Console
from rich.json import JSON
from rich.markup import escape

from agent_runtime.clients import a2a_client, chat
from agent_runtime.clients.a2a_client import TurnResult
from agent_runtime.contract import wire

__all__ = ["STEPS", "DemoFailure", "Step", "handover", "narrate"]

Decide = Callable[[list[wire.ActionRequest]], dict[str, Any]]


class DemoFailure(AssertionError):
    """A step did not behave as expected; ``str(exc)`` says what was expected and what happened."""


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    explain: str
    pause: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    decide: Decide | None = None
    reply: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


def _approve(_: list[wire.ActionRequest]) -> dict[str, Any]:
    return wire.approve_all()


def _deny(reason: str) -> Decide:
    return lambda _: wire.deny_all(reason)


def _approve_first_deny_second(reason: str) -> Decide:
    def decide(requests: list[wire.ActionRequest]) -> dict[str, Any]:
        first, second = (r.id for r in requests)
        return wire.batch({first: True, second: False}, {second: reason})

    return decide


NOTES_REASON = "notes.txt holds this week's meeting notes"
B_REASON = "b.txt is still in use"

STEPS = [
    Step("an ungated call runs at once", "list",
         "list_dir is not gated: the model calls it and answers in one turn.",
         reply=("Here is what I found:", "old.txt", "notes.txt", ".env")),
    Step("a gated call pauses; approve it", "delete old.txt",
         "delete_file is in requireApproval: the task stops in input-required until a human decides.",
         pause=[("delete_file", {"path": "old.txt"})], decide=_approve,
         reply=("Delete of old.txt: deleted /old.txt",), gone=("old.txt",)),
    Step("deny with a reason; the model reads it", "delete notes.txt",
         "A denied call never runs; the model gets the reason as the call's error and answers with it.",
         pause=[("delete_file", {"path": "notes.txt"})], decide=_deny(NOTES_REASON),
         reply=(f"rejected by the user: {NOTES_REASON}",), kept=("notes.txt",)),
    Step("an ordinary read is not gated", "read report.md",
         "read_file runs freely, except where an argument rule says otherwise (next step).",
         reply=("report.md: # Q3 report",)),
    Step("an argument rule gates reading .env", "read .env",
         "spec.approval.rules: read_file with path matching **/.env* requires approval.",
         pause=[("read_file", {"path": ".env"})], decide=_approve,
         reply=(".env: API_TOKEN=demo-not-a-real-secret",)),
    Step("one turn, two gated calls and one ungated: a batch decision", "clean up a.txt and b.txt",
         "The model calls delete_file twice and list_dir once in one response. list_dir runs now; both deletes "
         "wait in ONE request, decided per id.",
         pause=[("delete_file", {"path": "a.txt"}), ("delete_file", {"path": "b.txt"})],
         decide=_approve_first_deny_second(B_REASON),
         reply=("Clean-up finished:", "deleted /a.txt", f"rejected by the user: {B_REASON}"),
         gone=("a.txt",), kept=("b.txt",)),
]


def _reply(result: TurnResult) -> str:
    texts = [result.text] + ([result.status_text] if result.status_text != result.text else [])
    return "\n".join(t for t in texts if t)


class Narrator:
    """Runs the steps against one A2A client, printing what crosses the wire."""

    def __init__(self, client: Client, console: Console, sandbox: Path) -> None:
        self.client, self.console, self.sandbox = client, console, sandbox
        self.context_id: str | None = None
        self.envelope_shown = False

    def agent(self, result: TurnResult) -> None:
        self.console.print(f"[dim]task {escape(str(result.task_id))} → {escape(result.state)}[/]")
        if not result.pending:
            self.console.print("[bold green]agent>[/] " + escape(result.answer or "(no text)"))

    async def run(self, number: int, step: Step) -> None:
        c = self.console
        c.rule(f"[bold]Step {number}/{len(STEPS)}: {escape(step.title)}")
        c.print(f"[dim]{escape(step.explain)}[/]")
        c.print(f"[bold cyan]you>[/] {escape(step.text)}")
        result = await a2a_client.send_text(self.client, step.text, context_id=self.context_id)
        self.context_id = result.context_id or self.context_id
        self.agent(result)
        if step.pause:
            result = await self.decide(step, result)
        elif result.state != "completed":
            raise DemoFailure(f"expected the task to complete at once, it is {result.state}: {_reply(result)}")
        self.check(step, result)

    async def decide(self, step: Step, result: TurnResult) -> TurnResult:
        c = self.console
        if not result.pending or result.interrupt is None:
            raise DemoFailure(f"expected a pause for approval, the task is {result.state}: {_reply(result)}")
        requests = result.interrupt.action_requests
        got = [(r.name, r.args) for r in requests]
        if got != step.pause:
            raise DemoFailure(f"expected approval requests for {step.pause}, got {got}")
        c.print(f"[yellow]status text:[/] [dim]{escape(result.status_text)}[/]")
        c.print("[yellow]approval request (the status message's data part, interrupt_type tool_approval):[/]")
        c.print(JSON(json.dumps(result.interrupt.model_dump(mode='json'))))
        for path in (args["path"] for name, args in step.pause if name == "delete_file"):
            if not (self.sandbox / path).exists():
                raise DemoFailure(f"{path} is gone while its delete still waits for approval")
        if any(name == "delete_file" for name, _ in step.pause):
            c.print("[dim]Nothing gated has run yet: the files are still in the sandbox.[/]")
        if step.decide is None or not result.task_id or not result.context_id:
            raise DemoFailure(f"cannot answer the pause (task {result.task_id!r}, context {result.context_id!r})")
        decision = step.decide(requests)
        if not self.envelope_shown:
            envelope = {"message": {"role": "ROLE_USER", "taskId": result.task_id, "contextId": result.context_id,
                                    "messageId": "…", "parts": [{"data": decision}]}}
            c.print("[magenta]A decision is a user message on the same taskId and contextId with one data part:[/]")
            c.print(json.dumps(envelope, ensure_ascii=False), markup=False, highlight=False)
            self.envelope_shown = True
        c.print("[bold magenta]decision>[/] " + escape(json.dumps(decision, ensure_ascii=False)))
        after = await a2a_client.send_decision(self.client, decision, task_id=result.task_id, context_id=result.context_id)
        self.agent(after)
        if after.state != "completed":
            raise DemoFailure(f"expected the decided task to complete, it is {after.state}: {_reply(after)}")
        return after

    def check(self, step: Step, result: TurnResult) -> None:
        reply = _reply(result)
        missing = [want for want in step.reply if want not in reply]
        if missing:
            raise DemoFailure(f"the reply {reply!r} does not contain {missing}")
        for path in step.gone:
            if (self.sandbox / path).exists():
                raise DemoFailure(f"{path} should be gone after the approved delete, it is still there")
        for path in step.kept:
            if not (self.sandbox / path).exists():
                raise DemoFailure(f"{path} should still be there, it is gone")
        facts = [f"{p} is gone" for p in step.gone] + [f"{p} is still there" for p in step.kept]
        facts.append("the reply says so" if facts else "the reply is as expected")
        self.console.print("[bold green]✓[/] " + escape("; ".join(facts)))


async def narrate(url: str, sandbox: Path, console: Console) -> None:
    """Walk through :data:`STEPS` self-answering; raise :class:`DemoFailure` at the first misbehaving step."""
    async with a2a_client.connect(url, timeout=60) as client:
        narrator = Narrator(client, console, sandbox)
        for number, step in enumerate(STEPS, start=1):
            try:
                await narrator.run(number, step)
            except DemoFailure as exc:
                raise DemoFailure(f"step {number} ({step.text!r}): {exc}") from None
    left = sorted(p.name for p in sandbox.iterdir())
    console.rule("[bold]Done")
    console.print(f"sandbox now holds: {escape(', '.join(left))}")


async def handover(url: str, console: Console) -> int:
    """Short narration, then ``gatehouse chat URL`` on this terminal; its exit code."""
    console.rule("[bold]Your turn")
    console.print(
        "You are chatting with the file-manager agent (Scripted model, offline). Try, in order:\n"
        "  [bold]list[/]                        ungated: runs at once\n"
        "  [bold]delete old.txt[/]              gated (requireApproval): pauses, then 1) approve all\n"
        "  [bold]delete notes.txt[/]            pause again, then 2) deny all with a reason: the model reads it\n"
        "  [bold]read .env[/]                   gated by an argument rule (**/.env*)\n"
        "  [bold]clean up a.txt and b.txt[/]    two gated deletes + one ungated list: 3) decide each\n"
        f"Equivalent: [bold]gatehouse chat {escape(url)}[/] from another terminal while this runs. /quit or Ctrl-D to stop.\n"
        f"Or decide in a browser: the approvals inbox at [bold]{escape(url)}/ui/[/] lists each pause as it happens."
    )
    # A terminal gets chat's menus; --interactive with a pipe, chat's explicit-lines mode.
    return await chat.run_chat(url, console=console)
