"""gatehouse chat: piped stdin never approves implicitly; explicit lines and the terminal menu send wire decisions."""

from __future__ import annotations

import io
import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.types import AgentCard, AgentInterface
from rich.console import Console

from agent_runtime.clients import a2a_client
from agent_runtime.clients.chat import EXIT_INTERRUPTED, EXIT_PENDING, ChatSession
from tests.support.a2a_peer import PeerState, running_peer
from tests.support.processes import GATEHOUSE_CMD
from tests.support.runtime import RuntimeProcess, demo_tools, runtime, write_manifests

pytestmark = pytest.mark.e2e


@pytest.fixture
def peer() -> Iterator[tuple[str, PeerState]]:
    with running_peer() as served:
        yield served


def chat(url: str, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GATEHOUSE_CMD, "chat", url, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def test_piped_eof_while_pending_never_approves(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    # "1" and "yes" are not explicit decisions on a pipe; a new chat message is refused while a request is pending
    done = chat(url, "delete a.txt\n1\nyes\nhello there\n")
    assert done.returncode == EXIT_PENDING, done.stdout + done.stderr
    assert "nothing was decided" in done.stdout and "stays pending" in done.stdout
    assert done.stdout.count("Not sent:") == 3
    assert "is waiting for a decision" in done.stdout
    assert state.decisions == [] and state.executed == []
    assert len(state.pending) == 1


def test_piped_explicit_approve_sends_the_approve_decision(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    done = chat(url, "hello\ndelete a.txt\napprove\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert state.decisions == [{"decision_type": "approve"}]
    assert state.executed == ["a.txt"]
    assert "echo: hello" in done.stdout and "deleted a.txt" in done.stdout


def test_piped_deny_with_reason_and_context_id(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    done = chat(url, "clean up a and b\ndeny not today\n", "--context-id", "ctx-42")
    assert done.returncode == 0, done.stdout + done.stderr
    assert state.decisions == [{"decision_type": "deny", "reason": "not today"}]
    assert state.executed == []
    assert "did not delete a: denied (not today)" in done.stdout


def test_server_error_is_shown_and_asked_again(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    done = chat(url, "picky delete p.txt\napprove\napprove\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "may not decide yet" in done.stdout
    assert state.decisions == [{"decision_type": "approve"}, {"decision_type": "approve"}]
    assert state.executed == ["p.txt"]


class Terminal:
    """``gatehouse chat`` on a pseudo-terminal: what a person at a terminal sees and types."""

    def __init__(self, url: str) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the chat, attached to the pty
            os.execv(GATEHOUSE_CMD[0], [*GATEHOUSE_CMD, "chat", url])
        self.output = ""

    def read_until(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            assert time.monotonic() < deadline, f"no {text!r} on the terminal:\n{self.output}"
            if not self._drain(0.2):
                break  # the child is gone

    def _drain(self, wait: float) -> bool:
        """Read what the terminal has within ``wait`` seconds; ``False`` once the child's side is closed."""
        while select.select([self.fd], [], [], wait)[0]:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                return False
            if not chunk:
                return False
            self.output += chunk.decode(errors="replace")
            wait = 0
        return True

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def exit_code(self, timeout: float) -> int | None:
        """The exit code once the chat has ended within ``timeout`` seconds, else ``None`` (it was killed)."""
        deadline = time.monotonic() + timeout
        code = None
        while time.monotonic() < deadline:
            self._drain(0.05)  # also keeps the child from blocking on a full terminal buffer
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self._drain(0.2)  # what it printed last
        os.close(self.fd)
        return code


@pytest.mark.parametrize("pending", [False, True], ids=["at the chat prompt", "at the decision menu"])
def test_ctrl_c_at_a_terminal_prompt_leaves_at_once_and_decides_nothing(peer: tuple[str, PeerState], pending: bool) -> None:
    url, state = peer
    term = Terminal(url)
    term.read_until("you>")
    if pending:
        term.type("delete c.txt")
        term.read_until("approve all")
    os.kill(term.pid, signal.SIGINT)  # what Ctrl-C sends; the prompt's read is still blocked on the terminal
    code = term.exit_code(timeout=10)
    assert code == EXIT_INTERRUPTED, f"exit {code} (None: still waiting for Enter):\n{term.output}"
    assert "interrupted: nothing was decided" in term.output and "Traceback" not in term.output
    assert state.decisions == [] and state.executed == []
    assert len(state.pending) == (1 if pending else 0)


def test_unreachable_agent_exits_1() -> None:
    done = chat("http://127.0.0.1:9", "hello\n")
    assert done.returncode == 1 and "cannot talk to" in done.stdout


class ScriptedReader:
    """A person at a terminal, typing the given lines."""

    interactive = True

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []

    async def line(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        return self.lines.pop(0) if self.lines else None


async def run_session(url: str, reader: ScriptedReader) -> tuple[int, str]:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    async with a2a_client.connect(url) as client:
        code = await ChatSession(client, reader, console).run()
    return code, out.getvalue()


async def test_terminal_menu_decide_each(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    reader = ScriptedReader("clean up a and b", "new message", "3", "a", "x", "d", "too risky")
    code, out = await run_session(url, reader)
    assert code == 0
    assert "1. delete_file(path='a')" in out and "2. delete_file(path='b')" in out
    assert "Not sent: 'new message'" in out
    assert "Answer a or d." in out
    [decision] = state.decisions
    assert decision["decision_type"] == "batch"
    assert sorted(decision["decisions"].values()) == ["approve", "deny"]
    assert list(decision["reasons"].values()) == ["too risky"]
    assert state.executed == ["a"]
    assert "deleted a; did not delete b: denied (too risky)" in out


async def test_terminal_menu_approve_all_and_deny_all(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    code, _ = await run_session(url, ScriptedReader("delete a", "1", "delete b", "2", "no thanks", "/quit"))
    assert code == 0
    assert state.decisions == [{"decision_type": "approve"}, {"decision_type": "deny", "reason": "no thanks"}]
    assert state.executed == ["a"]


async def test_terminal_eof_in_menu_leaves_it_pending(peer: tuple[str, PeerState]) -> None:
    url, state = peer
    code, out = await run_session(url, ScriptedReader("delete a", "2"))  # EOF at the reason prompt
    assert code == EXIT_PENDING and "nothing was decided" in out
    assert state.decisions == []


def test_through_a_port_forward_chat_talks_to_the_url_it_was_given_and_says_so(tmp_path: Path) -> None:
    """A runtime whose card announces its in-cluster Service name (as in a cluster), reached through another local
    address (``kubectl port-forward``): chat must keep to the address it was given, not the unresolvable one."""
    announced = "http://file-manager.default.svc.cluster.local:8080/"
    with demo_tools(tmp_path / "tools") as tools:
        proc = RuntimeProcess(write_manifests(tmp_path / "m", tools.url), tmp_path / "state", tmp_path / "log",
                              serve_args=["--public-url", announced])
        proc.start()
        try:
            card = httpx.get(f"{proc.url}/.well-known/agent-card.json").json()
            assert card["supportedInterfaces"][0]["url"] == announced
            (tools.sandbox / "seen.txt").write_text("x")
            done = chat(proc.url, "list\n")
        finally:
            proc.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"the agent card announces {announced}; talking to {proc.url} as given" in " ".join(done.stdout.split())
    assert "seen.txt" in done.stdout


def test_pinned_to_moves_every_interface_and_keeps_its_path() -> None:
    card = AgentCard(name="a", supported_interfaces=[
        AgentInterface(url="http://a.default.svc:8080/", protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url="http://a.default.svc:8080/rest", protocol_binding="HTTP+JSON", protocol_version="1.0")])
    pinned, note = a2a_client.pinned_to(card, "http://127.0.0.1:18080")
    assert [i.url for i in pinned.supported_interfaces] == ["http://127.0.0.1:18080/", "http://127.0.0.1:18080/rest"]
    assert note == ("the agent card announces http://a.default.svc:8080/, http://a.default.svc:8080/rest; talking to "
                    "http://127.0.0.1:18080 as given (a port-forward or a proxy)")
    assert card.supported_interfaces[0].url == "http://a.default.svc:8080/"  # the card read is left as it was
    same, quiet = a2a_client.pinned_to(card, "http://a.default.svc:8080/")
    assert same is card and quiet == ""


def test_a_reply_after_an_approval_is_shown_exactly_once(tmp_path: Path) -> None:
    """Against the real runtime, which returns a finished turn's reply as the task's artifact (with no copy in the
    final status message): chat streams it once, after the pause it approved."""
    rules = [{"tool": "read_file", "when": {"arg": "path", "glob": "**/.env*"}, "action": "require"}]
    with demo_tools(tmp_path / "tools") as tools, runtime(tmp_path / "rt", tools, rules=rules) as proc:
        (tools.sandbox / ".env.chat").write_text("TOKEN=shown-once\n")
        done = chat(proc.url, "read .env.chat\napprove\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Approval needed" in done.stdout
    assert done.stdout.count("TOKEN=shown-once") == 1, done.stdout
