"""``kubectl gatehouse``: list, inspect and decide ToolApprovals from the command line, or open the web inbox.

Installed as the console script ``kubectl-gatehouse``, so kubectl finds it as a plugin. A decision is the
caller's vote, appended to ``spec.votes`` by a merge patch guarded by the object's resourceVersion (two
voters at once: one is asked to retry). ``by`` and ``groups`` are the caller's identity from a
SelfSubjectReview, which the chart's admission policy checks again server-side; the agent's runtime counts
the vote against the request's approvers (``APPROVALS 1/2``). How a vote is cast and read back is shared with
the inbox (``kubectl gatehouse inbox``, :mod:`agent_runtime.clients.kubectl_inbox`) in
:mod:`agent_runtime.kube.toolapproval_client`.

Writing the vote is not the end: ``approve`` and ``deny`` then wait (``--wait``, 10 s) until the runtime
acknowledged it in the status (:func:`verdict`): the vote listed in ``status.votes`` (found by ``seenAs``,
the name the API server gave the voter), counted or not, or the phase no longer Pending. Exit 0 when the
vote counted; 1 with the runtime's note when it did not, when the ToolApproval is Orphaned or was decided
otherwise, when a Warning Event ``VotesIgnored`` appears on it, and when no runtime answered in time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import typer
from rich.console import Console

from agent_runtime.contract.resources import GROUP, VERSION
from agent_runtime.contract.resources.tool_approval import PLURAL
from agent_runtime.kube.toolapproval_client import (
    _NOUN,
    IGNORED,
    ORPHANED,
    PluginError,
    Verdict,
    _api,
    _explain,
    _get,
    _namespace,
    _progress,
    await_runtime,
    cast_vote,
    edited_arguments,
    identity,
    ignored_events,
    kind_of,
    my_vote,
    owner_of,
    phase_of,
    seconds,
    verdict,
)

app = typer.Typer(help="Decide Gatehouse tool approvals (on the command line, or in the inbox).", no_args_is_help=True)
out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "?"
    seconds = int((datetime.now(UTC) - datetime.fromisoformat(timestamp.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


@app.command("approvals")
def list_approvals(
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces"),
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    agent: str | None = typer.Option(None, "--agent", help="Only this Agent's approvals."),
    gateway: str | None = typer.Option(None, "--gateway", help="Only this MCPGateway's held calls."),
    show_all: bool = typer.Option(False, "--all", help="Include decided ones, not only Pending."),
    context: str | None = typer.Option(None, "--context"),
) -> None:
    """List pending tool approvals and the model's hitl_request questions (KIND tells them apart)."""
    client = _api(context)
    api = client.CustomObjectsApi()
    if agent and gateway:
        raise typer.BadParameter("give --agent or --gateway, not both")
    selector = f"gatehouse.dev/agent={agent}" if agent else f"gatehouse.dev/gateway={gateway}" if gateway else None
    kwargs = {"label_selector": selector} if selector else {}
    ns = _namespace(namespace, context)
    try:
        if all_namespaces:
            items = api.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)["items"]
        else:
            items = api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, **kwargs)["items"]
    except Exception as exc:
        raise _explain(exc, "", "*" if all_namespaces else ns, "list") from None
    if agent:  # also filter client-side: not every API server honours label selectors
        items = [i for i in items if i["spec"].get("agentRef") == agent]
    if gateway:
        items = [i for i in items if i["spec"].get("gatewayRef") == gateway]
    if not show_all:
        items = [i for i in items if phase_of(i) == "Pending"]
    if not items:
        out.print("No pending approvals." if not show_all else "No approvals.")
        return
    header = (["NAMESPACE"] if all_namespaces else []) + ["NAME", "AGENT", "KIND", "TOOL", "ARGS", "PHASE", "APPROVALS", "AGE"]
    rows = []
    for item in sorted(items, key=lambda i: i["metadata"].get("creationTimestamp") or ""):
        args = json.dumps(item["spec"].get("arguments") or {}, sort_keys=True)
        row = [item["metadata"]["name"], owner_of(item), kind_of(item), item["spec"]["tool"],
               args if len(args) <= 48 else args[:45] + "...", phase_of(item), (item.get("status") or {}).get("approvals", ""),
               _age(item["metadata"].get("creationTimestamp"))]
        rows.append(([item["metadata"]["namespace"]] if all_namespaces else []) + row)
    typer.echo(columns(header, rows))


def columns(header: list[str], rows: list[list[str]]) -> str:
    """Plain aligned columns, like ``kubectl get`` prints them (never wrapped, whatever the terminal)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("   ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows])


@app.command()
def describe(
    name: str,
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    context: str | None = typer.Option(None, "--context"),
) -> None:
    """Show one approval with its arguments pretty-printed."""
    client = _api(context)
    ns = _namespace(namespace, context)
    obj = _get(client, name, ns, "read")
    spec, status = obj["spec"], obj.get("status") or {}
    out.print(f"[bold]Name:[/]        {name}\n[bold]Namespace:[/]   {ns}\n[bold]Agent:[/]       {owner_of(obj)}")
    out.print(f"[bold]Kind:[/]        {kind_of(obj)}")
    out.print(f"[bold]Tool:[/]        {spec['tool']}\n[bold]Phase:[/]       {phase_of(obj)}")
    out.print(f"[bold]Hint:[/]        {spec.get('hint', '')}")
    out.print(f"[bold]Context:[/]     {spec['contextId']}\n[bold]Task:[/]        {spec['taskId']}")
    out.print(f"[bold]Request:[/]     {spec['requestId']}")
    if spec.get("requestedBy"):  # written since the inbox (issue 15); absent on earlier objects
        out.print(f"[bold]Requested by:[/] {spec['requestedBy']}")
    out.print(f"[bold]Requested:[/]   {spec.get('requestedAt', '')}\n[bold]Expires:[/]     {spec.get('expiresAt', '')}")
    out.print("[bold]Arguments:[/]")
    out.print_json(json.dumps(spec.get("arguments") or {}, sort_keys=True))
    if spec.get("redacted"):  # spec.approval.redact: the approval is bound to the real arguments, by their hash
        out.print(f"[bold]Redacted:[/]    {', '.join(spec['redacted'])}")
    if spec.get("argumentsHash"):
        out.print(f"[bold]Args hash:[/]   {spec['argumentsHash']}")
    if status.get("edited"):  # an approver changed the arguments: votes now approve these
        edited = status["edited"]
        out.print(f"[bold]Edited by:[/]   {edited.get('by', '')} (changed: {', '.join(edited.get('changed') or [])})")
        out.print("[bold]Edited arguments:[/]")
        out.print_json(json.dumps(edited.get("arguments") or {}, sort_keys=True))
    if status.get("approvals"):
        waiting = f", waiting for {status['waitingFor']}" if status.get("waitingFor") else ""
        out.print(f"[bold]Approvals:[/]   {status['approvals']}{waiting}")
    if phase_of(obj) == ORPHANED:
        out.print(f"[bold]Reason:[/]      {status.get('reason', '')}")
    elif status.get("decidedBy") or spec.get("decision"):
        out.print(f"[bold]Decided by:[/]  {status.get('decidedBy') or spec['decision'].get('decidedBy')}")
        out.print(f"[bold]Decided at:[/]  {status.get('decidedAt', '')}\n[bold]Source:[/]      {status.get('source', '')}")
        out.print(f"[bold]Reason:[/]      {status.get('reason') or (spec.get('decision') or {}).get('reason', '')}")


def vote(
    name: str, namespace: str | None, context: str | None, action: str, reason: str, wait: str,
    sets: list[str] | None = None, arguments: str | None = None,
) -> None:
    """Cast the vote (an approval with ``sets``/``arguments``: with edited arguments), then (unless ``--wait 0``) wait
    for the runtime's verdict; a failure exits 1."""
    timeout = seconds(wait)
    ns = _namespace(namespace, context)
    client = _api(context)
    seen = ignored_events(client, {"metadata": {"name": name, "namespace": ns}}) if timeout > 0 else {}
    written, username = cast_vote(client, name, ns, action, reason,
                                  lambda obj: edited_arguments(obj, list(sets or []), arguments))
    if timeout <= 0:
        out.print(f'toolapproval "{name}": {_NOUN[action]} sent (not waiting for the runtime to count it)')
        return
    result = await_runtime(client, written, username, action, timeout, seen)
    if not result.ok:
        raise PluginError(result.message)
    out.print(result.message)


WAIT_HELP = "How long to wait for the runtime to count the vote (10s, 1m; 0: do not wait)."


@app.command()
def approve(
    name: str,
    reason: str = typer.Option("", "--reason"),
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    context: str | None = typer.Option(None, "--context"),
    wait: str = typer.Option("10s", "--wait", help=WAIT_HELP),
    set_: list[str] = typer.Option([], "--set", help="Edit and approve: change one argument, name=value (JSON or text); "
                                   "repeatable. Only where the Agent allows editing (allowEdit, editableTools)."),
    arguments: str | None = typer.Option(None, "--arguments", help="Edit and approve: the call's complete new "
                                         "arguments as a JSON object."),
) -> None:
    """Approve one pending tool call; the agent runs it exactly once (with --set/--arguments: edited)."""
    vote(name, namespace, context, "Approve", reason, wait, set_, arguments)


@app.command()
def deny(
    name: str,
    reason: str = typer.Option(..., "--reason", help="Told to the model so it can adapt."),
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    context: str | None = typer.Option(None, "--context"),
    wait: str = typer.Option("10s", "--wait", help=WAIT_HELP),
) -> None:
    """Deny one pending tool call with a reason."""
    if not reason.strip():
        raise PluginError("--reason must not be empty: the model is told why its call did not run")
    vote(name, namespace, context, "Deny", reason, wait)


@app.command()
def inbox(
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces"),
    context: str | None = typer.Option(None, "--context"),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Only print the URL."),
) -> None:
    """Open the approvals inbox in the browser: the tool approvals you may see, decided with your identity.

    Served on 127.0.0.1 only, until Ctrl-C; the URL carries a secret made for this launch."""
    from agent_runtime.clients.kubectl_inbox import serve

    serve(namespace, all_namespaces, context, port, browser=not no_browser)


def main() -> None:
    try:
        app()
    except PluginError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise SystemExit(1) from None


__all__ = [
    "IGNORED", "ORPHANED", "PluginError", "Verdict", "_api", "_explain", "_get", "_namespace", "_progress", "app",
    "await_runtime", "cast_vote", "columns", "identity", "ignored_events", "kind_of", "main", "my_vote", "phase_of",
    "seconds", "verdict",
]
