"""``gatehouse chat`` answering a hitl_request question from the real runtime (the example's ``ask`` rule:
options staging/production, confirmation required): numbered menu on a terminal, explicit lines on a pipe,
never an implicit confirmation."""

from __future__ import annotations

import io
import json
import subprocess

import pytest
from rich.console import Console

from agent_runtime.clients import a2a_client
from agent_runtime.clients.chat import EXIT_PENDING, ChatSession
from tests.questions.test_questions_e2e import env  # noqa: F401  (the runtime fixture, one per module)
from tests.support.processes import GATEHOUSE_CMD
from tests.support.runtime import Rpc, RuntimeProcess, Tools

pytestmark = pytest.mark.e2e


@pytest.fixture
def agent(env: tuple[Tools, RuntimeProcess]) -> RuntimeProcess:  # noqa: F811
    return env[1]  # as in tests/questions/test_questions_e2e.py: its model also has the example's "ask" rule


def chat(url: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEHOUSE_CMD, "chat", url], input=stdin, capture_output=True, text=True, timeout=90, check=False)


def _answered(out: str) -> dict[str, object]:
    line = next(x for x in out.splitlines() if "The human answered: " in x)
    return json.loads(line.split("The human answered: ", 1)[1])


def test_piped_answer_then_confirm(agent: RuntimeProcess) -> None:
    # "1" is not explicit on a pipe; "yes" does not confirm; a new chat line is refused while the question is open
    done = chat(agent.url, "ask Where to deploy?\n1\nhello\nproduction\nyes\nconfirm\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The agent asks" in done.stdout and "1) staging" in done.stdout and "2) production" in done.stdout
    assert "Please confirm" in done.stdout and "The choice is recorded in the audit trail." in done.stdout
    assert done.stdout.count("Not sent:") == 3
    result = _answered(done.stdout)
    assert (result["status"], result["selected_option"], result["source"]) == ("confirmed", "production", "user")


def test_piped_eof_while_confirming_never_confirms(agent: RuntimeProcess) -> None:
    done = chat(agent.url, "ask Where to deploy?\nstaging\n")
    assert done.returncode == EXIT_PENDING, done.stdout + done.stderr
    assert "nothing was decided" in done.stdout and "The human answered" not in done.stdout
    task_id = done.stdout.split("task ", 1)[1].split(",", 1)[0]
    task = Rpc(agent.url).get_task(task_id)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    (data,) = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    assert data["requests"][0]["stage"] == "confirm"


def test_piped_cancel(agent: RuntimeProcess) -> None:
    done = chat(agent.url, "ask Where to deploy?\ncancel\n")
    assert done.returncode == 0, done.stdout + done.stderr
    result = _answered(done.stdout)
    assert (result["ok"], result["status"], result["confirmed"]) == (False, "canceled", False)


class TerminalReader:
    interactive = True

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)

    async def line(self, prompt: str) -> str | None:
        return self.lines.pop(0) if self.lines else None


async def test_terminal_numbered_menu_then_confirm(agent: RuntimeProcess) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    reader = TerminalReader("ask Where to deploy?", "7", "2", "confirm", "/quit")
    async with a2a_client.connect(agent.url) as client:
        code = await ChatSession(client, reader, console).run()
    text = out.getvalue()
    assert code == 0, text
    assert "Not sent: '7'" in text and "choose an option 1-2" in text
    result = _answered(text)
    assert (result["status"], result["selected_option"]) == ("confirmed", "production")
