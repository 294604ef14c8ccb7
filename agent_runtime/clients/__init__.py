"""What people and tests run against a runtime or a cluster: ``gatehouse`` (the CLI, chat, the demo, demo tools,
audit export), ``kubectl gatehouse`` and its inbox, the A2A client helpers, child-process handling.
"""
