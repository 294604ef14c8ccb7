"""``kubectl gatehouse``: list, inspect and decide ToolApprovals from the command line.

Installed as the console script ``kubectl-gatehouse``, so kubectl finds it as a plugin. A decision is the
caller's vote, appended to ``spec.votes`` by a merge patch guarded by the object's resourceVersion (two
voters at once: one is asked to retry). ``by`` and ``groups`` are the caller's identity from a
SelfSubjectReview, which the chart's admission policy checks again server-side; the agent's runtime counts
the vote against the request's approvers (``APPROVALS 1/2``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console

from agent_runtime.resources import GROUP, VERSION
from agent_runtime.resources.tool_approval import KIND_APPROVAL, KIND_HITL, LABEL_KIND, PLURAL

app = typer.Typer(help="Decide Gatehouse tool approvals.", no_args_is_help=True)
out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)


class PluginError(Exception):
    """A failure the user can act on; printed without a traceback."""


def _api(context: str | None) -> Any:
    from kubernetes import client, config

    try:
        config.load_kube_config(context=context)
    except Exception:
        try:
            config.load_incluster_config()
        except Exception as exc:
            raise PluginError(f"no Kubernetes configuration found ({exc})") from None
    return client


def _namespace(namespace: str | None, context: str | None) -> str:
    """``-n``, else the namespace of the kubeconfig context in use (``--context`` or the current one)."""
    if namespace:
        return namespace
    from kubernetes import config

    try:
        contexts, active = config.list_kube_config_contexts()
        if context:
            active = next((c for c in contexts if c.get("name") == context), active)
        return (active or {}).get("context", {}).get("namespace") or "default"
    except Exception:
        return "default"


def _explain(exc: Exception, name: str, namespace: str, verb: str = "decide") -> PluginError:
    """The API's error as something the user can act on (``verb``: what they tried to do)."""
    status = getattr(exc, "status", None)
    what = f'toolapproval "{name}"' if name else "toolapprovals"
    if status == 404:
        return PluginError(f'{what} not found in namespace "{namespace}"')
    if status == 403:
        role = "gatehouse-approver" if verb == "decide" else "gatehouse-viewer (or gatehouse-approver)"
        return PluginError(f'forbidden: you may not {verb} {what} in namespace "{namespace}" '
                           f"(ask for a RoleBinding to the {role} ClusterRole)")
    if status == 409:
        return PluginError(f"{what} was decided by someone else just now; nothing changed "
                           f"(see: kubectl gatehouse describe {name} -n {namespace})")
    if status is None:
        return PluginError(f"cannot reach the Kubernetes API: {exc}")
    body = getattr(exc, "body", None) or str(exc)
    try:
        body = json.loads(body).get("message") or body
    except (TypeError, ValueError, AttributeError):
        pass
    return PluginError(f"API error ({status}): {body}")


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "?"
    seconds = int((datetime.now(UTC) - datetime.fromisoformat(timestamp.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def kind_of(obj: dict[str, Any]) -> str:
    """``tool_approval`` or ``hitl_request`` (a question from the model): the label, else told by the tool."""
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_KIND)
    return label or (KIND_HITL if (obj.get("spec") or {}).get("tool") == KIND_HITL else KIND_APPROVAL)


def phase_of(obj: dict[str, Any]) -> str:
    return (obj.get("status") or {}).get("phase") or "Pending"


def whoami(client: Any) -> str:
    """The caller's username as the API server sees it (SelfSubjectReview, Kubernetes 1.28+)."""
    return identity(client)[0]


def identity(client: Any) -> tuple[str, list[str]]:
    """The caller's username and groups as the API server sees them (SelfSubjectReview, Kubernetes 1.28+)."""
    try:
        review = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())
    except Exception as exc:
        reason = getattr(exc, "reason", None) or exc
        raise PluginError(f"could not determine who you are (SelfSubjectReview failed: {reason})") from None
    user_info = getattr(getattr(review, "status", None), "user_info", None)
    username = getattr(user_info, "username", None)
    if not username:
        raise PluginError("could not determine who you are: the SelfSubjectReview returned no username")
    return username, list(getattr(user_info, "groups", None) or [])


@app.command("approvals")
def list_approvals(
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces"),
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    agent: str | None = typer.Option(None, "--agent", help="Only this Agent's approvals."),
    show_all: bool = typer.Option(False, "--all", help="Include decided ones, not only Pending."),
    context: str | None = typer.Option(None, "--context"),
) -> None:
    """List pending tool approvals and the model's hitl_request questions (KIND tells them apart)."""
    client = _api(context)
    api = client.CustomObjectsApi()
    selector = f"gatehouse.dev/agent={agent}" if agent else None
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
    if not show_all:
        items = [i for i in items if phase_of(i) == "Pending"]
    if not items:
        out.print("No pending approvals." if not show_all else "No approvals.")
        return
    header = (["NAMESPACE"] if all_namespaces else []) + ["NAME", "AGENT", "KIND", "TOOL", "ARGS", "PHASE", "APPROVALS", "AGE"]
    rows = []
    for item in sorted(items, key=lambda i: i["metadata"].get("creationTimestamp") or ""):
        args = json.dumps(item["spec"].get("arguments") or {}, sort_keys=True)
        row = [item["metadata"]["name"], item["spec"]["agentRef"], kind_of(item), item["spec"]["tool"],
               args if len(args) <= 48 else args[:45] + "...", phase_of(item), (item.get("status") or {}).get("approvals", ""),
               _age(item["metadata"].get("creationTimestamp"))]
        rows.append(([item["metadata"]["namespace"]] if all_namespaces else []) + row)
    typer.echo(columns(header, rows))


def columns(header: list[str], rows: list[list[str]]) -> str:
    """Plain aligned columns, like ``kubectl get`` prints them (never wrapped, whatever the terminal)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("   ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows])


def _get(client: Any, name: str, namespace: str, verb: str = "decide") -> dict[str, Any]:
    try:
        return client.CustomObjectsApi().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except Exception as exc:
        raise _explain(exc, name, namespace, verb) from None


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
    out.print(f"[bold]Name:[/]        {name}\n[bold]Namespace:[/]   {ns}\n[bold]Agent:[/]       {spec['agentRef']}")
    out.print(f"[bold]Kind:[/]        {kind_of(obj)}")
    out.print(f"[bold]Tool:[/]        {spec['tool']}\n[bold]Phase:[/]       {phase_of(obj)}")
    out.print(f"[bold]Hint:[/]        {spec.get('hint', '')}")
    out.print(f"[bold]Context:[/]     {spec['contextId']}\n[bold]Task:[/]        {spec['taskId']}")
    out.print(f"[bold]Request:[/]     {spec['requestId']}")
    out.print(f"[bold]Requested:[/]   {spec.get('requestedAt', '')}\n[bold]Expires:[/]     {spec.get('expiresAt', '')}")
    out.print("[bold]Arguments:[/]")
    out.print_json(json.dumps(spec.get("arguments") or {}, sort_keys=True))
    if status.get("decidedBy") or spec.get("decision"):
        out.print(f"[bold]Decided by:[/]  {status.get('decidedBy') or spec['decision'].get('decidedBy')}")
        out.print(f"[bold]Decided at:[/]  {status.get('decidedAt', '')}\n[bold]Source:[/]      {status.get('source', '')}")
        out.print(f"[bold]Reason:[/]      {status.get('reason') or (spec.get('decision') or {}).get('reason', '')}")


def decide(client: Any, name: str, namespace: str, action: str, reason: str) -> dict[str, Any]:
    """Write the decision; raise PluginError when it is not found, already decided or forbidden."""
    obj = _get(client, name, namespace)
    if kind_of(obj) == KIND_HITL:
        raise PluginError(f'toolapproval "{name}" is a hitl_request: this is a question from the model; answer it in '
                          "the chat (A2A). Nothing changed")
    if phase_of(obj) != "Pending":
        decided = obj["spec"].get("decision") or {}
        by = (obj.get("status") or {}).get("decidedBy") or decided.get("decidedBy") or "?"
        raise PluginError(f'toolapproval "{name}" is already {phase_of(obj)} (by {by}); nothing changed')
    username, groups = identity(client)
    votes = list(obj["spec"].get("votes") or [])
    if any(v.get("by") == username for v in votes) or (obj["spec"].get("decision") or {}).get("decidedBy") == username:
        raise PluginError(f'you ({username}) have already voted on toolapproval "{name}"; a person counts once')
    votes.append({"by": username, "groups": groups, "action": action, "reason": reason})
    patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": {"votes": votes}}
    try:
        return client.CustomObjectsApi().patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, patch)
    except Exception as exc:
        raise _explain(exc, name, namespace) from None


@app.command()
def approve(
    name: str,
    reason: str = typer.Option("", "--reason"),
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    context: str | None = typer.Option(None, "--context"),
) -> None:
    """Approve one pending tool call; the agent runs it exactly once."""
    ns = _namespace(namespace, context)
    decide(_api(context), name, ns, "Approve", reason)
    out.print(f'toolapproval "{name}" approved')


@app.command()
def deny(
    name: str,
    reason: str = typer.Option(..., "--reason", help="Told to the model so it can adapt."),
    namespace: str | None = typer.Option(None, "-n", "--namespace"),
    context: str | None = typer.Option(None, "--context"),
) -> None:
    """Deny one pending tool call with a reason."""
    if not reason.strip():
        raise PluginError("--reason must not be empty: the model is told why its call did not run")
    ns = _namespace(namespace, context)
    decide(_api(context), name, ns, "Deny", reason)
    out.print(f'toolapproval "{name}" denied')


def main() -> None:
    try:
        app()
    except PluginError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise SystemExit(1) from None
