"""The Slack bridge (``gatehouse slack``): one per cluster; every agent's approval requests as Slack messages with
Approve and Deny buttons, decided as the person the Slack user is (docs/slack.md).

Modules, one concept each: ``messages`` (pure: a ToolApproval as a Block Kit message, the Deny dialog), ``users``
(pure: Slack user → principal), ``signature`` (Slack's v0 request signature, age and replay), ``replays`` (the
replay memory every bridge process shares: a ConfigMap written by compare-and-swap), ``api`` (the Slack Web
API through slack_sdk, retried with backoff), ``keeper`` (watch ToolApprovals; post and update their messages, with
the message's place kept on the ToolApproval), ``decisions`` (a click → a vote on behalf of that person), ``endpoint``
(the interactions HTTP endpoint) and ``app`` (settings and assembly).
"""

from agent_runtime.slack.app import SlackSettings, build_app

__all__ = ["SlackSettings", "build_app"]
