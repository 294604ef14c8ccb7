"""The MCP gateway (``gatehouse-runtime gateway``): an MCP server in front of one upstream MCP server, for agents
Gatehouse does not run. Every caller authenticates as on A2A and REST; each tool call is decided by the Agent's own
policy (:mod:`agent_runtime.contract.policy`): an allowed call is forwarded upstream with the gateway's own credentials, a
refused one comes back as a tool error saying why. See docs/gateway.md.

- :mod:`.routing` — pure: what the gateway does with one call (forward, refuse, hold) and the words the client reads;
- :mod:`.upstream` — the gateway's own MCP client to the upstream;
- :mod:`.bindings` — an MCP session belongs to the principal that opened it;
- :mod:`.server` — the MCP server side (tools/list, tools/call) over streamable HTTP;
- :mod:`.fast_calls` — an ungated ``tools/call`` answered without the MCP SDK's HTTP server, everything else by it;
- :mod:`.app` — the ASGI app: authentication, session binding, probes.
"""
