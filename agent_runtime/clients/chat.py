"""``gatehouse chat URL``: talk to an agent over A2A and decide its approval requests.

    you> delete old.txt
    Approval needed — task 3f2c…
      1. delete_file(path='old.txt')   needs approval (expires …)
    1) approve all   2) deny all (asks for a reason)   3) decide each

While a request is pending the client sends nothing but a decision: a chat line typed then is refused with the
reason. On a terminal the decision is a numbered menu. When stdin is not a terminal the client never approves
implicitly: only an explicit ``approve`` or ``deny <reason>`` line decides, and end of input leaves the request
pending and exits with :data:`EXIT_PENDING`. The A2A plumbing lives in :mod:`agent_runtime.clients.a2a_client`.

A question from the model (``hitl_request``) is shown as a numbered menu, read with :class:`question_wire.QuestionInterrupt`;
the answer is one option (its number on a terminal, or its exact text), or ``cancel``; where confirmation is
required a second prompt accepts only ``confirm`` or ``cancel``. Nothing confirms implicitly, and end of input
leaves the question pending (exit :data:`EXIT_PENDING`). Ctrl-C leaves at once (exit :data:`EXIT_INTERRUPTED`);
like end of input, it decides nothing.
"""

from __future__ import annotations

import asyncio
import enum
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

import httpx
from a2a.client import A2AClientError, Client
from rich.console import Console
from rich.markup import escape

from agent_runtime.clients import a2a_client
from agent_runtime.clients.a2a_client import TurnResult
from agent_runtime.contract import wire
from agent_runtime.questions import question_wire

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_PENDING", "ChatSession", "LineReader", "StreamReader", "run_chat"]

EXIT_ERROR = 1
EXIT_PENDING = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
QUIT_WORDS = frozenset({"/quit", "/exit"})
SIGNAL_CHECK_SECONDS = 0.2  # how soon a Ctrl-C is acted on while a prompt waits for a line


class LineReader(Protocol):
    """Where the human's lines come from. ``interactive`` means a person at a terminal."""

    interactive: bool

    async def line(self, prompt: str) -> str | None:
        """The next line without its newline, or ``None`` at end of input."""
        ...


class StreamReader:
    """Lines from a text stream: a terminal (prompts shown via rich) or a pipe (no prompts).

    Each line is read on a daemon thread of its own, not in the loop's executor: a read blocked on the terminal
    would otherwise keep a Ctrl-C'd chat alive until the next Enter (``asyncio.run`` joins the executor's threads).
    """

    def __init__(self, stream: TextIO, console: Console, interactive: bool | None = None) -> None:
        self.stream = stream
        self.console = console
        self.interactive = stream.isatty() if interactive is None else interactive

    async def line(self, prompt: str) -> str | None:
        if self.interactive:
            return await _on_daemon_thread(lambda: self.console.input(prompt))
        raw = await _on_daemon_thread(self.stream.readline)
        return raw.rstrip("\r\n") if raw else None


async def _on_daemon_thread(read: Callable[[], str]) -> str | None:
    """``read()`` on a daemon thread; ``None`` at end of input."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()

    def settle(value: str | None, error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(value)

    def run() -> None:
        value, error = None, None
        try:
            value = read()
        except EOFError:
            pass
        except Exception as exc:
            error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop is gone (Ctrl-C): nobody waits for this line any more

    threading.Thread(target=run, name="chat-input", daemon=True).start()
    # The kernel hands a Ctrl-C to any thread (this reader's, an executor's); Python runs the handler only when the
    # loop's thread next runs code, so the loop must not sleep until the line comes.
    while not done.done():
        await asyncio.wait({done}, timeout=SIGNAL_CHECK_SECONDS)
    return done.result()


@dataclass
class Pending:
    """The pause the client is waiting on."""

    task_id: str
    context_id: str
    interrupt: wire.ApprovalInterrupt | None
    question: question_wire.QuestionInterrupt | None


class ChatSession:
    """One conversation (an A2A context) with one agent."""

    def __init__(self, client: Client, reader: LineReader, console: Console, context_id: str | None = None) -> None:
        self.client = client
        self.reader = reader
        self.console = console
        self.context_id = context_id
        self.pending: Pending | None = None
        self._streamed = False

    async def run(self) -> int:
        while True:
            if self.pending is not None:
                if not await self._decide():
                    return self._eof_while_pending()
                continue
            line = await self.reader.line("[bold cyan]you>[/] ")
            if line is None:
                return 0
            line = line.strip()
            if not line:
                continue
            if line.lower() in QUIT_WORDS:
                return 0
            self._show(await a2a_client.send_text(self.client, line, context_id=self.context_id, on_text=self._stream))

    # --- showing results ------------------------------------------------------------------------

    def _stream(self, chunk: str) -> None:
        if not self._streamed:
            self.console.print("[bold green]agent>[/] ", end="")
        self._streamed = True
        self.console.print(chunk, end="", markup=False, highlight=False)

    def _show(self, result: TurnResult, previous: Pending | None = None) -> None:
        if self._streamed:
            self.console.print()
        elif result.state in a2a_client.TERMINAL or result.state == "message":
            self.console.print("[bold green]agent>[/] ", end="")
            self.console.print(result.answer or f"(task {result.state}, no text)", markup=False, highlight=False)
        self._streamed = False
        self.context_id = result.context_id or self.context_id
        if result.state in {"failed", "rejected", "canceled"}:
            self.console.print(f"[red]task {escape(result.state)}[/]")
        if not result.pending:
            self.pending = None
            return
        interrupt = result.interrupt
        if interrupt is None and result.question is None and previous is not None and previous.task_id == result.task_id:
            interrupt = previous.interrupt  # the server re-asked without repeating the data part
        same = previous is not None and interrupt is not None and _ids(previous.interrupt) == _ids(interrupt)
        asked_again = (
            previous is not None and result.question is not None and _stage(previous.question) == _stage(result.question)
        )
        same = same or asked_again  # the server refused the last answer: show why, not the menu again
        if same or (interrupt is None and result.question is None):
            style = "yellow" if same else "red"
            note = result.status_text or result.interrupt_error or "The task is waiting for input."
            self.console.print(f"[{style}]{escape(note)}[/]")
        self.pending = Pending(result.task_id or "", result.context_id or self.context_id or "", interrupt, result.question)
        if interrupt is not None and not same:
            self._show_requests(interrupt.action_requests)
        if result.question is not None and not asked_again:
            self._show_question(result.question)

    def _show_requests(self, requests: list[wire.ActionRequest]) -> None:
        assert self.pending is not None
        self.console.print(f"[bold yellow]Approval needed[/] — task {escape(self.pending.task_id)}")
        for n, r in enumerate(requests, start=1):
            args = ", ".join(f"{k}={v!r}" for k, v in r.args.items())
            hint = f" — {r.hint}" if r.hint else ""
            where = f"id {r.id}, expires {r.expires_at}"
            if r.agent is not None:  # relayed from a sub-agent: say which, and through whom
                where = f"from {' → '.join(r.agent.path or [r.agent.name])}, " + where
            self.console.print(f"  {n}. [bold]{escape(r.name)}[/]({escape(args)}){escape(hint)} [dim]({escape(where)})[/]")

    def _show_question(self, interrupt: question_wire.QuestionInterrupt) -> None:
        assert self.pending is not None
        for q in interrupt.requests:
            where = f"task {self.pending.task_id}, id {q.id}, expires {q.expires_at}"
            if q.stage == "confirm":
                self.console.print(f"[bold yellow]Please confirm[/] [dim]({escape(where)})[/]")
                self.console.print(f"  {escape(q.question)} → [bold]{escape(q.selected_option or '')}[/]")
                if q.confirmation_message:
                    self.console.print(f"  {escape(q.confirmation_message)}")
                continue
            self.console.print(f"[bold yellow]The agent asks[/] [dim]({escape(where)})[/]")
            self.console.print(f"  {escape(q.question)}")
            for n, option in enumerate(q.options, start=1):
                default = " [dim](default on timeout)[/]" if option == q.default_option and not q.require_confirmation else ""
                self.console.print(f"    {n}) {escape(option)}{default}")
            if q.require_confirmation:
                self.console.print("  [dim]You will be asked to confirm your choice.[/]")

    # --- deciding -------------------------------------------------------------------------------

    async def _decide(self) -> bool:
        """Ask for and send one decision; ``False`` at end of input (nothing sent)."""
        pending = self.pending
        assert pending is not None
        if pending.interrupt is not None:
            decision = await (self._ask_menu(pending.interrupt) if self.reader.interactive else self._ask_line())
        elif pending.question is not None:
            decision = await self._ask_question(pending.question)
        else:
            decision = await self._ask_line()
        if decision is None:
            return False
        if decision is _REFUSED:
            return True
        result = await a2a_client.send_decision(
            self.client, decision, task_id=pending.task_id, context_id=pending.context_id, on_text=self._stream
        )
        self._show(result, previous=pending)
        return True

    def _refuse(self, line: str, how: str) -> _Refused:
        assert self.pending is not None
        self.console.print(
            f"[red]Not sent:[/] {escape(line[:60])!r} — task {escape(self.pending.task_id)} is waiting for a decision, "
            f"and no new chat message can be sent until it is answered ({how})."
        )
        return _REFUSED

    async def _ask_line(self) -> dict[str, Any] | _Refused | None:
        prompt = "[bold yellow]decision (approve | deny <reason>)>[/] "
        line = await self.reader.line(prompt)
        if line is None:
            return None
        word, _, rest = line.strip().partition(" ")
        if word.lower() == "approve" and not rest.strip():
            return wire.approve_all()
        if word.lower() == "deny":
            return wire.deny_all(rest.strip())
        return self._refuse(line, "send a line 'approve' or 'deny <reason>'")

    async def _ask_menu(self, interrupt: wire.ApprovalInterrupt) -> dict[str, Any] | _Refused | None:
        choice = await self.reader.line("[bold yellow]1) approve all  2) deny all  3) decide each >[/] ")
        if choice is None:
            return None
        choice = choice.strip()
        if choice == "1":
            return wire.approve_all()
        if choice == "2":
            reason = await self.reader.line("reason> ")
            return None if reason is None else wire.deny_all(reason.strip())
        if choice == "3":
            decisions: dict[str, bool] = {}
            reasons: dict[str, str] = {}
            for n, r in enumerate(interrupt.action_requests, start=1):
                while True:
                    answer = await self.reader.line(f"{n}. {escape(r.name)} [{escape(r.id)}] (a)pprove / (d)eny > ")
                    if answer is None:
                        return None
                    answer = answer.strip().lower()
                    if answer in {"a", "approve", "d", "deny"}:
                        break
                    self.console.print("[red]Answer a or d.[/]")
                decisions[r.id] = answer.startswith("a")
                if not decisions[r.id]:
                    reason = await self.reader.line("reason> ")
                    if reason is None:
                        return None
                    if reason.strip():
                        reasons[r.id] = reason.strip()
            return wire.batch(decisions, reasons)
        return self._refuse(choice, "choose 1, 2 or 3")

    async def _ask_question(self, interrupt: question_wire.QuestionInterrupt) -> dict[str, Any] | _Refused | None:
        q = interrupt.requests[0]  # the runtime asks one question at a time
        if q.stage == "confirm":
            line = await self.reader.line("[bold yellow]confirm | cancel >[/] ")
            if line is None:
                return None
            word = line.strip().lower()
            if word in {"confirm", "cancel"}:
                return {"decision_type": word}
            return self._refuse(line, "answer exactly confirm or cancel")
        numbers = f"1-{len(q.options)}, " if self.reader.interactive else ""
        line = await self.reader.line(f"[bold yellow]option ({numbers}or its text), or cancel >[/] ")
        if line is None:
            return None
        text = line.strip()
        if text.lower() == "cancel" and "cancel" not in q.options:
            return {"decision_type": "cancel"}
        if text in q.options:
            return {"decision_type": "answer", "answers": {q.id: text}}
        if self.reader.interactive and text.isdigit() and 1 <= int(text) <= len(q.options):
            return {"decision_type": "answer", "answers": {q.id: q.options[int(text) - 1]}}
        how = f"choose an option {numbers}or cancel" if numbers else "send the exact text of one option, or cancel"
        return self._refuse(line, how)

    def _eof_while_pending(self) -> int:
        assert self.pending is not None
        self.console.print(
            f"[red]End of input while task {escape(self.pending.task_id)} waits for a decision: nothing was decided, "
            "the request stays pending.[/]"
        )
        return EXIT_PENDING


class _Refused(enum.Enum):
    """The user's input was refused and explained; ask again."""

    REFUSED = enum.auto()


_REFUSED = _Refused.REFUSED


def _ids(interrupt: wire.ApprovalInterrupt | None) -> list[str]:
    return [r.id for r in interrupt.action_requests] if interrupt is not None else []


def _stage(interrupt: question_wire.QuestionInterrupt | None) -> list[tuple[str, str]]:
    return [(q.id, q.stage) for q in interrupt.requests] if interrupt is not None else []


async def run_chat(
    url: str,
    context_id: str | None = None,
    *,
    stdin: TextIO | None = None,
    console: Console | None = None,
    interactive: bool | None = None,
    httpx_client: httpx.AsyncClient | None = None,
) -> int:
    """Chat with the agent at ``url`` until end of input; the process exit code."""
    console = console or Console(soft_wrap=True)
    reader = StreamReader(stdin or sys.stdin, console, interactive)
    try:
        def noted(note: str) -> None:
            console.print(f"[yellow]note:[/] {escape(note)}")

        async with a2a_client.connect(url, httpx_client=httpx_client, on_note=noted) as client:
            if reader.interactive:
                console.print(f"[dim]Connected to {escape(url)}. /quit to leave.[/]")
            return await ChatSession(client, reader, console, context_id).run()
    except (httpx.HTTPError, A2AClientError) as exc:
        console.print(f"[bold red]error:[/] cannot talk to {escape(url)}: {escape(str(exc) or type(exc).__name__)}")
        return EXIT_ERROR
