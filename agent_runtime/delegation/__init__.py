"""Sub-agents: another A2A agent offered to the model as a tool, whose pauses bubble up to this agent's task.

- :mod:`.relay` — pure: the metadata a parent sends (on whose behalf, how deep), who may act on behalf of whom,
  and a sub-agent's pause restated as this agent's (each request marked with where it comes from);
- :mod:`.store` — the ``gatehouse_delegations`` table: one row per sub-agent call that paused;
- :mod:`.client` — the A2A client a parent uses, with its own credentials;
- :mod:`.tool` — the tool the model calls; a sub-agent's pause pauses this agent's run;
- :mod:`.flow` — decisions forwarded to the sub-agent, its outcome handed back to the model, and the watcher that
  notices a sub-agent decided elsewhere (its own timeout, kubectl, REST).
"""
