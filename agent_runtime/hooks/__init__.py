"""Agent-CLI hooks (issue 39): Claude Code's ``PreToolUse`` (and any CLI with a pre-tool hook sending the same JSON)
decided by a gateway with the same policy, approvers and channels as an Agent's calls. See docs/gateway.md.

- :mod:`.shapes` — pydantic models of Claude Code's ``PreToolUse`` input and of its answer;
- :mod:`.mapping` — pure: a CLI tool call onto the policy (tool name, arguments, the card's summary) and a decided
  request onto the answer;
- :mod:`.endpoint` — the gateway's ``POST /hooks/claude-code`` (I/O: authentication, the held call, the wait);
- :mod:`.command` — ``gatehouse hook claude-code``: stdin to the endpoint, the answer and exit code back, failing closed.
"""
