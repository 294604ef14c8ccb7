"""One demo run: start the stack, narrate (or hand over to chat), always stop the processes; the exit code."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from rich.console import Console
from rich.markup import escape

from agent_runtime.clients.demo import stack, walkthrough

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "run_demo"]

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def run_demo(*, interactive: bool | None = None, keep: bool = False, console: Console | None = None) -> int:
    """Run the demo; ``interactive=None`` means: interactive when stdin is a terminal."""
    console = console or Console(soft_wrap=True)
    if interactive is None:
        interactive = sys.stdin.isatty()

    def say(text: str) -> None:
        console.print(f"[dim]·[/] {text}", highlight=False)

    console.rule("[bold]Gatehouse demo")
    console.print(
        "An agent whose delete_file and write_file calls (and reads of .env files) wait for a human. "
        "Scripted model, offline; everything runs on 127.0.0.1 and stops when the demo ends."
    )
    problem, code = "", 0
    try:
        with _sigterm_as_exit(), stack.started(say, keep=keep) as running:
            try:
                if interactive:
                    code = asyncio.run(walkthrough.handover(running.url, console))
                else:
                    asyncio.run(walkthrough.narrate(running.url, running.sandbox, console))
            except walkthrough.DemoFailure as exc:
                problem = str(exc) + _log(running)
            except Exception as exc:  # an unexpected client error: still a clear message and a stop
                problem = f"{type(exc).__name__}: {exc}" + _log(running)
    except stack.StackError as exc:
        problem = str(exc)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: the demo's processes are stopped.[/]")
        return EXIT_INTERRUPTED
    if problem:
        console.print(f"[bold red]demo failed:[/] {escape(problem)}")
        return EXIT_FAILED
    if interactive:
        console.print("[dim]The tools and the runtime are stopped.[/]")
        return code
    console.print("[bold green]demo passed:[/] every step behaved as expected; the tools and the runtime are stopped.")
    return 0


def _log(running: stack.Stack) -> str:
    tail = running.log_tail("runtime")
    return f"\n--- runtime log (last lines) ---\n{tail}" if tail.strip() else ""


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM (and SIGHUP: the terminal went away) unwind like Ctrl-C, so the child processes are stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signals = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None]
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
