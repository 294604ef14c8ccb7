"""The approvals inbox: one web page where people see and decide what their agents want to do.

One page, two ways to open it. Each runtime serves it at ``/ui/`` for its own agent (:mod:`.runtime_inbox` reads the
approvals table and decides through ``DecideOne``, the path REST and kubectl use); ``kubectl gatehouse inbox``
serves it on 127.0.0.1 for everything the user can see in the cluster (:mod:`agent_runtime.clients.kubectl_inbox` reads and
votes on ToolApprovals with the user's kubeconfig). Both hand the pages (:mod:`.pages`) an :class:`.source.InboxSource`;
the pages never know which one they show (only whether it can approve with edited arguments: :class:`.source.EditingSource`).

Modules: ``cards`` (pure: what one request looks like on the page) → ``source`` (the protocol) → ``runtime_inbox``
(the runtime's source) → ``login`` (exchanging a credential for the session cookie) → ``headers`` (CSP and friends,
the Host check) → ``pages`` (routes, templates, the live event stream).
"""

__all__: list[str] = []
