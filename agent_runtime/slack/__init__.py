"""The Slack bridge (``gatehouse slack``): one per cluster; every agent's approval requests as Slack messages with
Approve and Deny buttons, decided as the person the Slack user is (docs/slack.md).

Slack is one channel of :mod:`agent_runtime.bridges`, which watches the ToolApprovals, keeps each message's place on
its ToolApproval and votes on a person's behalf; this package is Slack's own part. Modules, one concept each:
``messages`` (pure: a ToolApproval as a Block Kit message, the Deny dialog), ``users`` (pure: Slack user → principal),
``signature`` (Slack's v0 request signature, age and replay), ``replays`` (the replay memory every bridge process
shares: a ConfigMap written by compare-and-swap), ``api`` (the Slack Web API through slack_sdk, retried with backoff),
``notifier`` (the bridge's port in Slack: post, update, tell), ``people`` (a Slack user → the person, reading the
profile's e-mail), ``decisions`` (a click or the Deny dialog → the bridge's ballots), ``endpoint`` (the interactions
HTTP endpoint) and ``app`` (settings and assembly).
"""

from agent_runtime.slack.app import SlackSettings, build_app

__all__ = ["SlackSettings", "build_app"]
