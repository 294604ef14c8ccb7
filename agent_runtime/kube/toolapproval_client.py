"""Reading and voting on ToolApprovals with the caller's own Kubernetes identity: what ``kubectl gatehouse``
(:mod:`agent_runtime.clients.kubectl_plugin`) and its web inbox (:mod:`agent_runtime.clients.kubectl_inbox`) share.

A decision is the caller's vote, appended to ``spec.votes`` by a merge patch guarded by the object's resourceVersion
(:func:`cast_vote`; two voters at once: one gets a 409). ``by`` and ``groups`` are the caller's identity from a
SelfSubjectReview (:func:`identity`), which the chart's admission policy checks again server-side; the agent's runtime
counts the vote against the request's approvers and says so in the status, which :func:`verdict` reads and
:func:`await_runtime` polls for. Every call here blocks (the ``kubernetes`` client is synchronous).

``client`` is the ``kubernetes.client`` module (its default configuration, as :func:`_api` loads it) or a
:class:`Kube` (one configuration of its own, as :func:`connect` loads it): anything with ``CustomObjectsApi()``,
``CoreV1Api()``, ``AuthenticationV1Api()`` and ``V1SelfSubjectReview``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agent_runtime.contract.channels import BALLOT_CHANNELS
from agent_runtime.contract.resources import GROUP, VERSION
from agent_runtime.contract.resources.tool_approval import KIND_APPROVAL, KIND_HITL, LABEL_KIND, PLURAL

ORPHANED = "Orphaned"
ABANDONED = "Abandoned"  # a gateway's held call nobody waits for any more (docs/gateway.md): it never runs
IGNORED = "VotesIgnored"  # the Warning Event the runtime leaves on a ToolApproval whose votes it ignores
_DONE = {"Approve": "Approved", "Deny": "Denied"}
_NOUN = {"Approve": "approval", "Deny": "denial"}

Failure = Literal["error", "unknown", "forbidden", "conflict", "already", "refused", "invalid"]


class PluginError(Exception):
    """A failure the user can act on; printed without a traceback. ``kind`` tells what happened, for a caller that
    is not a terminal (the inbox): ``unknown`` (404), ``forbidden`` (403), ``conflict`` (409: someone else wrote
    first), ``already`` (decided), ``refused`` (orphaned, or the caller voted already), ``invalid`` (a question, not
    an approval), ``error`` (anything else)."""

    def __init__(self, message: str, kind: Failure = "error") -> None:
        super().__init__(message)
        self.kind: Failure = kind


class Kube:
    """The ``kubernetes.client`` API classes the helpers here use, bound to one ``ApiClient`` (one identity), so that
    several identities can be used in one process (the module's default configuration is global)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    # the kubernetes.client names, so that the module and a Kube are interchangeable
    def CustomObjectsApi(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)

    def CoreV1Api(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def AuthenticationV1Api(self) -> Any:
        from kubernetes import client

        return client.AuthenticationV1Api(self.api_client)

    @property
    def V1SelfSubjectReview(self) -> Any:
        from kubernetes import client

        return client.V1SelfSubjectReview


def _api(context: str | None) -> Any:
    """The ``kubernetes.client`` module with its default configuration loaded: the kubeconfig (``--context``, else
    the current one), else the in-cluster ServiceAccount."""
    from kubernetes import client, config

    try:
        config.load_kube_config(context=context)
    except Exception:
        try:
            config.load_incluster_config()
        except Exception as exc:
            raise PluginError(f"no Kubernetes configuration found ({exc})") from None
    return client


def connect(context: str | None = None, config_file: str | None = None) -> Kube:
    """A :class:`Kube` with a configuration of its own: the kubeconfig (``config_file``, else ``$KUBECONFIG`` or
    ``~/.kube/config``; ``context``, else the current one), else the in-cluster ServiceAccount."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=config_file, context=context, client_configuration=configuration)
    except Exception:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except Exception as exc:
            raise PluginError(f"no Kubernetes configuration found ({exc})") from None
    return Kube(client.ApiClient(configuration))


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
        return PluginError(f'{what} not found in namespace "{namespace}"', "unknown")
    if status == 403:
        role = "gatehouse-approver" if verb == "decide" else "gatehouse-viewer (or gatehouse-approver)"
        return PluginError(f'forbidden: you may not {verb} {what} in namespace "{namespace}" '
                           f"(ask for a RoleBinding to the {role} ClusterRole)", "forbidden")
    if status == 409:
        return PluginError(f"{what} was decided by someone else just now; nothing changed "
                           f"(see: kubectl gatehouse describe {name} -n {namespace})", "conflict")
    if status is None:
        return PluginError(f"cannot reach the Kubernetes API: {exc}")
    body = getattr(exc, "body", None) or str(exc)
    try:
        body = json.loads(body).get("message") or body
    except (TypeError, ValueError, AttributeError):
        pass
    return PluginError(f"API error ({status}): {body}")


def kind_of(obj: dict[str, Any]) -> str:
    """``tool_approval`` or ``hitl_request`` (a question from the model): the label, else told by the tool."""
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_KIND)
    return label or (KIND_HITL if (obj.get("spec") or {}).get("tool") == KIND_HITL else KIND_APPROVAL)


def phase_of(obj: dict[str, Any]) -> str:
    return (obj.get("status") or {}).get("phase") or "Pending"


def owner_of(obj: dict[str, Any]) -> str:
    """Whose runtime holds the call: the Agent's name, or ``gateway/<name>`` for an MCPGateway's held call."""
    spec = obj.get("spec") or {}
    return str(spec.get("agentRef") or (f"gateway/{spec['gatewayRef']}" if spec.get("gatewayRef") else ""))


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


def _get(client: Any, name: str, namespace: str, verb: str = "decide") -> dict[str, Any]:
    try:
        return client.CustomObjectsApi().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except Exception as exc:
        raise _explain(exc, name, namespace, verb) from None


def edited_arguments(obj: dict[str, Any], sets: list[str], arguments: str | None) -> dict[str, Any] | None:
    """The complete new arguments of an edit: ``arguments`` (a JSON object), or the arguments as the ToolApproval shows
    them now (``status.edited`` after an earlier edit, else ``spec``) with each ``key=value`` of ``sets`` applied (the
    value read as JSON where it parses, else as a string); None when neither is given (no edit)."""
    if arguments is not None and sets:
        raise PluginError("give --arguments or --set, not both", "invalid")
    if arguments is not None:
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise PluginError(f"--arguments is not JSON ({exc}); nothing changed", "invalid") from None
        if not isinstance(parsed, dict):
            raise PluginError("--arguments must be a JSON object of the call's complete arguments; nothing changed", "invalid")
        return parsed
    if not sets:
        return None
    edited = ((obj.get("status") or {}).get("edited") or {}).get("arguments")
    out = dict(edited if isinstance(edited, dict) else obj["spec"].get("arguments") or {})
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise PluginError(f"--set {item!r}: use --set name=value; nothing changed", "invalid")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cast_vote(
    client: Any, name: str, namespace: str, action: str, reason: str, edit: Callable[[dict[str, Any]], dict[str, Any] | None]
    = lambda _obj: None, on_behalf_of: tuple[str, list[str]] | None = None,
) -> tuple[dict[str, Any], str]:
    """Append the caller's vote (``edit(obj)``: an approval's new arguments, or None); return the object as written and
    the caller's username. Raise PluginError when it is not found, already decided, orphaned or forbidden.

    ``on_behalf_of`` (user, groups): the caller is a delegator (the Slack bridge) voting for that human; the runtime
    counts it as the human only if the caller is in the Agent's ``spec.access.delegators``. The name returned is then
    ``<user> via <caller>``, the ``seenAs`` the runtime records it under (what :func:`verdict` looks for)."""
    obj = _get(client, name, namespace)
    if kind_of(obj) == KIND_HITL:
        raise PluginError(f'toolapproval "{name}" is a hitl_request: this is a question from the model; answer it in '
                          "the chat (A2A). Nothing changed", "invalid")
    if phase_of(obj) == ORPHANED:
        raise PluginError(f'toolapproval "{name}" is Orphaned: {(obj.get("status") or {}).get("reason", "")}; '
                          "nothing changed", "refused")
    if phase_of(obj) == ABANDONED:
        raise PluginError(f'toolapproval "{name}" is Abandoned: the client that made the call no longer waits for it, '
                          "so it will never run; nothing changed", "refused")
    if phase_of(obj) != "Pending":
        decided = obj["spec"].get("decision") or {}
        by = (obj.get("status") or {}).get("decidedBy") or decided.get("decidedBy") or "?"
        raise PluginError(f'toolapproval "{name}" is already {phase_of(obj)} (by {by}); nothing changed', "already")
    username, groups = identity(client)
    votes = list(obj["spec"].get("votes") or [])
    human = on_behalf_of[0] if on_behalf_of is not None else None
    mine = [v for v in votes if v.get("by") == username and (v.get("onBehalfOf") or {}).get("user") == human]
    if mine or (human is None and (obj["spec"].get("decision") or {}).get("decidedBy") == username):
        who = f"{human} via {username}" if human is not None else username
        raise PluginError(f'you ({who}) have already voted on toolapproval "{name}"; a person counts once', "refused")
    ballot: dict[str, Any] = {"by": username, "groups": groups, "action": action, "reason": reason}
    if on_behalf_of is not None:
        ballot["onBehalfOf"] = {"user": on_behalf_of[0], "groups": list(on_behalf_of[1])}
        username = f"{on_behalf_of[0]} via {username}"
    arguments = edit(obj)
    if arguments is not None:
        ballot["arguments"] = arguments
    votes.append(ballot)
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
    from agent_runtime.contract.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise PluginError(f"--wait {text}: {exc}") from None


Told = Literal["decided", "counted", "refused", "already", "unknown", "sent"]


@dataclass(frozen=True)
class Verdict:
    """What became of a vote: ``ok`` (it counted, or the request ended the way it asked) and what to tell; ``told``
    in one word: ``decided`` (it ended the way the vote asked), ``counted`` (more approvals needed), ``refused`` (the
    runtime did not count it, or ignores the votes), ``already`` (decided otherwise), ``unknown`` (the object is
    gone), ``sent`` (no runtime answered in time)."""

    ok: bool
    message: str
    told: Told = "decided"


def my_vote(status: dict[str, Any], username: str) -> dict[str, Any] | None:
    """The caller's vote as the runtime judged it: its entry in ``status.votes`` (the newest, if several)."""
    mine = None
    for vote in status.get("votes") or []:
        if vote.get("seenAs") is not None:
            # a ballot on the ToolApproval: kubectl's, or a bridge's (slack) since channels are named truly
            if vote.get("seenAs") == username and vote.get("via", "kubectl") in BALLOT_CHANNELS:
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
        return Verdict(False, f'toolapproval "{name}" is Orphaned: {status.get("reason", "")}; your vote changes nothing',
                       "refused")
    edited = status.get("edited") or {}
    if mine is not None and not mine.get("counted", False) and phase == "Pending" and edited.get("by") == username \
            and not str(mine.get("note", "")).startswith("the edit was refused"):
        waiting = status.get("waitingFor") or "other approvers"
        return Verdict(True, f'toolapproval "{name}": your edit was applied (changed: {", ".join(edited.get("changed") or [])})'
                             f", and the edited call waits for {waiting}; your own vote does not count: {mine.get('note')}",
                       "counted")
    if mine is not None and not mine.get("counted", False):
        return Verdict(False, f"your vote does not count: {mine.get('note') or 'the runtime did not count it'} "
                              f'(toolapproval "{name}" stays {phase})', "refused")
    progress = _progress(status)
    if phase == "Pending":
        if mine is None:
            return None
        waiting = status.get("waitingFor") or "more approvals"
        counted = f"{progress} approvals, " if progress else ""
        return Verdict(True, f'toolapproval "{name}": {_NOUN[action]} recorded: {counted}waiting for {waiting}', "counted")
    by = status.get("decidedBy") or "?"
    if phase == _DONE[action]:
        shown = f" ({progress})" if action == "Approve" and progress else f" (by {by})"
        return Verdict(True, f'toolapproval "{name}" {phase.lower()}{shown}', "decided")
    if mine is not None:  # counted, and then someone else decided otherwise
        return Verdict(True, f'toolapproval "{name}": your {_NOUN[action]} counted, but it is {phase} (by {by})', "already")
    return Verdict(False, f'toolapproval "{name}" is {phase} (by {by}); your vote did not decide it', "already")


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
                return Verdict(False, f'the runtime ignores the votes on toolapproval "{name}": {why[0]}', "refused")
        if now >= deadline:
            return Verdict(False, f"no runtime acknowledged your vote within {wait:g}s: is the agent running? (kubectl get "
                                  f"agent {agent} -n {namespace}; the ToolApproval stays Pending, with your vote on it)",
                           "sent")
        time.sleep(poll)
        try:
            obj = client.CustomObjectsApi().get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return Verdict(False, f'toolapproval "{name}" was deleted while waiting for the runtime to count your vote',
                               "unknown")
            raise _explain(exc, name, namespace, "read") from None


__all__ = [
    "IGNORED", "ORPHANED", "Kube", "PluginError", "Verdict", "await_runtime", "cast_vote", "connect", "edited_arguments",
    "identity",
    "ignored_events", "kind_of", "my_vote", "phase_of", "seconds", "verdict",
]
