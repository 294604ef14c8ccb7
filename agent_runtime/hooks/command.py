"""``gatehouse hook claude-code``: Claude Code's ``command`` hook. The ``PreToolUse`` input on stdin goes to the
gateway's endpoint; its answer comes back on stdout (exit 0) in Claude Code's output shape.

Failing closed: whatever keeps the gateway from deciding — unreachable, a refused token, no decision before this
command's own ``--timeout``, an answer that is not the documented shape — exits 2 with the reason on stderr, which
Claude Code treats as "blocked" and shows to Claude. ``--timeout`` must be shorter than the hook's ``timeout`` in
settings.json: Claude Code's own timeout ends the hook as a non-blocking error (the call would go on), this one
blocks. Failing open (exit 0, no decision) is only for an unreachable server, and only with ``--fail-open``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx2
from pydantic import ValidationError

from agent_runtime.hooks.shapes import HookOutput, PreToolUseInput

BLOCK = 2  # Claude Code: exit code 2 blocks the tool call, stderr is the reason


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str = ""
    stderr: str = ""


def _blocked(reason: str) -> Outcome:
    return Outcome(BLOCK, stderr=f"Gatehouse hook: {reason}\n")


async def _post(url: str, token: str | None, body: str, timeout: float) -> httpx2.Response:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(timeout)) as http:
        return await http.post(url, content=body.encode(), headers=headers)


async def decide(stdin: str, url: str, token: str | None, timeout: float, fail_open: bool = False) -> Outcome:
    try:
        call = PreToolUseInput.model_validate_json(stdin)
    except ValidationError as exc:
        return _blocked(f"the input is not a PreToolUse hook input ({exc.error_count()} problems), so the call is "
                        "denied.")
    try:
        # One deadline for the whole exchange, so that this command ends before the hook's own timeout does.
        response = await asyncio.wait_for(_post(url, token, stdin, timeout), timeout)
    except (TimeoutError, httpx2.TimeoutException):
        return _blocked(f"no decision from Gatehouse within {timeout:g}s on {call.tool_name}, so the call is denied. "
                        "The request stays open: once someone decides it, the same call is answered at once.")
    except httpx2.TransportError as exc:
        if fail_open:
            return Outcome(0, stderr=f"Gatehouse hook: cannot reach {url} ({exc}); failing open (--fail-open): "
                                     "the CLI's own permission rules apply.\n")
        return _blocked(f"cannot reach the Gatehouse server at {url} ({exc or type(exc).__name__}), so the call is "
                        "denied (failing closed).")
    if response.status_code in (401, 403):
        return _blocked(f"the Gatehouse server refused this hook's token (HTTP {response.status_code}), so the call "
                        "is denied. Check the token file or $GATEHOUSE_TOKEN.")
    if response.status_code != 200:
        return _blocked(f"the Gatehouse server answered HTTP {response.status_code} ({response.text[:300]}), so the "
                        "call is denied.")
    try:
        output = HookOutput.model_validate_json(response.content)
    except ValidationError:
        return _blocked("the Gatehouse server's answer is not a hook output, so the call is denied.")
    return Outcome(0, stdout=output.to_json() + "\n")


__all__ = ["BLOCK", "Outcome", "decide"]
