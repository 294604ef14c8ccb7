"""``kubectl gatehouse``: list, inspect and decide ToolApprovals from the command line.

Installed as the console script ``kubectl-gatehouse``, so kubectl finds it as a plugin. A decision is the
caller's vote, appended to ``spec.votes`` by a merge patch guarded by the object's resourceVersion (two
voters at once: one is asked to retry). ``by`` and ``groups`` are the caller's identity from a
SelfSubjectReview, which the chart's admission policy checks again server-side; the agent's runtime counts
the vote against the request's approvers (``APPROVALS 1/2``).

Writing the vote is not the end: ``approve`` and ``deny`` then wait (``--wait``, 10 s) until the runtime
acknowledged it in the status (:func:`verdict`): the vote listed in ``status.votes`` (found by ``seenAs``,
the name the API server gave the voter), counted or not, or the phase no longer Pending. Exit 0 when the
vote counted; 1 with the runtime's note when it did not, when the ToolApproval is Orphaned or was decided
otherwise, when a Warning Event ``VotesIgnored`` appears on it, and when no runtime answered in time.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console

from agent_runtime.resources import GROUP, VERSION
from agent_runtime.resources.tool_approval import KIND_APPROVAL, KIND_HITL, LABEL_KIND, PLURAL

app = typer.Typer(help="Decide Gatehouse tool approvals.", no_args_is_help=True)
out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)

ORPHANED = "Orphaned"
IGNORED = "VotesIgnored"  # the Warning Event the runtime leaves on a ToolApproval whose votes it ignores
_DONE = {"Approve": "Approved", "Deny": "Denied"}
_NOUN = {"Approve": "approval", "Deny": "denial"}


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
    if spec.get("redacted"):  # spec.approval.redact: the approval is bound to the real arguments, by their hash
        out.print(f"[bold]Redacted:[/]    {', '.join(spec['redacted'])}")
    if spec.get("argumentsHash"):
        out.print(f"[bold]Args hash:[/]   {spec['argumentsHash']}")
    if status.get("approvals"):
        waiting = f", waiting for {status['waitingFor']}" if status.get("waitingFor") else ""
        out.print(f"[bold]Approvals:[/]   {status['approvals']}{waiting}")
    if phase_of(obj) == ORPHANED:
        out.print(f"[bold]Reason:[/]      {status.get('reason', '')}")
    elif status.get("decidedBy") or spec.get("decision"):
        out.print(f"[bold]Decided by:[/]  {status.get('decidedBy') or spec['decision'].get('decidedBy')}")
        out.print(f"[bold]Decided at:[/]  {status.get('decidedAt', '')}\n[bold]Source:[/]      {status.get('source', '')}")
        out.print(f"[bold]Reason:[/]      {status.get('reason') or (spec.get('decision') or {}).get('reason', '')}")


def cast_vote(client: Any, name: str, namespace: str, action: str, reason: str) -> tuple[dict[str, Any], str]:
    """Append the caller's vote; return the object as written and the caller's username. Raise PluginError when it is
    not found, already decided, orphaned or forbidden."""
    obj = _get(client, name, namespace)
    if kind_of(obj) == KIND_HITL:
        raise PluginError(f'toolapproval "{name}" is a hitl_request: this is a question from the model; answer it in '
                          "the chat (A2A). Nothing changed")
    if phase_of(obj) == ORPHANED:
        raise PluginError(f'toolapproval "{name}" is Orphaned: {(obj.get("status") or {}).get("reason", "")}; nothing changed')
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
        written = client.CustomObjectsApi().patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, patch)
    except Exception as exc:
        raise _explain(exc, name, namespace) from None
    return written, username


def seconds(text: str) -> float:
    """``--wait``: ``10s``, ``1m``, ``2.5`` (seconds), ``0`` (do not wait)."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d*)?", text):
        return float(text)
    if re.fullmatch(r"0+[smh]", text):
        return 0.0
    from agent_runtime.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise PluginError(f"--wait {text}: {exc}") from None


@dataclass(frozen=True)
class Verdict:
    """What became of a vote: ``ok`` (it counted, or the request ended the way it asked) and what to tell."""

    ok: bool
    message: str


def my_vote(status: dict[str, Any], username: str) -> dict[str, Any] | None:
    """The caller's vote as the runtime judged it: its entry in ``status.votes`` (the newest, if several)."""
    mine = None
    for vote in status.get("votes") or []:
        if vote.get("seenAs") is not None:
            if vote.get("seenAs") == username and vote.get("via", "kubectl") == "kubectl":
                mine = vote
        elif vote.get("by") == username:  # a runtime from before seenAs
            mine = vote
    return mine


def _progress(status: dict[str, Any]) -> str:
    got, _, required = str(status.get("approvals") or "").partition("/")
    return f"{got} of {required}" if required else ""


def verdict(obj: dict[str, Any], username: str, action: str) -> Verdict | None:
    """What the ToolApproval's status says of the caller's vote; None while the runtime has not acknowledged it."""
    name, status = obj["metadata"]["name"], obj.get("status") or {}
    phase, mine = phase_of(obj), my_vote(status, username)
    if phase == ORPHANED:
        return Verdict(False, f'toolapproval "{name}" is Orphaned: {status.get("reason", "")}; your vote changes nothing')
    if mine is not None and not mine.get("counted", False):
        return Verdict(False, f"your vote does not count: {mine.get('note') or 'the runtime did not count it'} "
                              f'(toolapproval "{name}" stays {phase})')
    progress = _progress(status)
    if phase == "Pending":
        if mine is None:
            return None
        waiting = status.get("waitingFor") or "more approvals"
        counted = f"{progress} approvals, " if progress else ""
        return Verdict(True, f'toolapproval "{name}": {_NOUN[action]} recorded: {counted}waiting for {waiting}')
    by = status.get("decidedBy") or "?"
    if phase == _DONE[action]:
        shown = f" ({progress})" if action == "Approve" and progress else f" (by {by})"
        return Verdict(True, f'toolapproval "{name}" {phase.lower()}{shown}')
    if mine is not None:  # counted, and then someone else decided otherwise
        return Verdict(True, f'toolapproval "{name}": your {_NOUN[action]} counted, but it is {phase} (by {by})')
    return Verdict(False, f'toolapproval "{name}" is {phase} (by {by}); your vote did not decide it')


def ignored_events(client: Any, obj: dict[str, Any]) -> dict[str, str]:
    """``{event name: message}`` of the ``VotesIgnored`` Warning Events on this very object (empty when the caller
    may not read Events: the chart's approver role does not need to)."""
    meta = obj["metadata"]
    try:
        events = client.CoreV1Api().list_namespaced_event(
            meta["namespace"], field_selector=f"involvedObject.name={meta['name']}", _preload_content=False,
        )
        items = json.loads(events.data).get("items", [])
    except Exception:
        return {}
    uid = meta.get("uid")  # none given: any object of that name
    return {
        e["metadata"]["name"]: e.get("message", "") for e in items
        if e.get("reason") == IGNORED and (e.get("involvedObject") or {}).get("name") == meta["name"]
        and (not uid or (e.get("involvedObject") or {}).get("uid") in (None, uid))
    }


def await_runtime(
    client: Any, written: dict[str, Any], username: str, action: str, wait: float, seen: dict[str, str],
    poll: float = 0.25,
) -> Verdict:
    """Poll the ToolApproval until :func:`verdict` has one, a new ``VotesIgnored`` Event appears (``seen``: the ones
    there before the vote), or ``wait`` seconds passed."""
    meta = written["metadata"]
    name, namespace, agent = meta["name"], meta["namespace"], (written.get("spec") or {}).get("agentRef", "")
    deadline, events_at = time.monotonic() + wait, 0.0
    obj = written
    while True:
        found = verdict(obj, username, action)
        if found is not None:
            return found
        now = time.monotonic()
        if now >= events_at:
            events_at = now + 1.0
            ignored = ignored_events(client, obj)
            why = [m for n, m in ignored.items() if n not in seen] or (list(ignored.values()) if now >= deadline else [])
            if why:
                return Verdict(False, f'the runtime ignores the votes on toolapproval "{name}": {why[0]}')
        if now >= deadline:
            return Verdict(False, f"no runtime acknowledged your vote within {wait:g}s: is the agent running? (kubectl get "
                                  f"agent {agent} -n {namespace}; the ToolApproval stays Pending, with your vote on it)")
        time.sleep(poll)
        try:
            obj = client.CustomObjectsApi().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return Verdict(False, f'toolapproval "{name}" was deleted while waiting for the runtime to count your vote')
            raise _explain(exc, name, namespace, "read") from None


def vote(name: str, namespace: str | None, context: str | None, action: str, reason: str, wait: str) -> None:
    """Cast the vote, then (unless ``--wait 0``) wait for the runtime's verdict; a failure exits 1."""
    timeout = seconds(wait)
    ns = _namespace(namespace, context)
    client = _api(context)
    seen = ignored_events(client, {"metadata": {"name": name, "namespace": ns}}) if timeout > 0 else {}
    written, username = cast_vote(client, name, ns, action, reason)
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
) -> None:
    """Approve one pending tool call; the agent runs it exactly once."""
    vote(name, namespace, context, "Approve", reason, wait)


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


def main() -> None:
    try:
        app()
    except PluginError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise SystemExit(1) from None
