"""What a bridge reads off a ToolApproval, whatever the channel. Pure: which request an object (or a button) is about,
its phase, what a person is told when it is already decided, and where its message is (an annotation on the object,
so the bridge keeps no state of its own and catches up from the objects after a restart)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent_runtime.bridges.notifier import Place
from agent_runtime.contract.resources import GROUP, VERSION
from agent_runtime.contract.resources.tool_approval import KIND_HITL, LABEL_KIND, PLURAL

FINGERPRINT = "fp"  # the key, beside the place's own, of what the message last showed


def collection(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"


def object_path(namespace: str, name: str) -> str:
    return f"{collection(namespace)}/{name}"


def agent_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/agents/{name}"


def owner_path(namespace: str, spec: dict[str, Any]) -> str:
    """The object whose policy says where a request is shown: its Agent (``agentRef``) or, for a gateway's held call,
    its MCPGateway (``gatewayRef``: the same ``spec.approval.notify`` block)."""
    if spec.get("gatewayRef"):
        return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/mcpgateways/{spec['gatewayRef']}"
    return agent_path(namespace, str(spec.get("agentRef") or ""))


def owner_name(spec: dict[str, Any]) -> tuple[str, str]:
    """(``Agent`` or ``Gateway``, its name): who holds the call, as a message names it."""
    if spec.get("gatewayRef"):
        return "Gateway", str(spec["gatewayRef"])
    return "Agent", str(spec.get("agentRef") or "?")


@dataclass(frozen=True)
class Ref:
    """Which request a button or dialog is about: the ToolApproval (namespace, name) and its request id, so that a
    click can never decide another request than the one its message shows."""

    namespace: str
    name: str
    request_id: str

    def value(self) -> str:
        return json.dumps({"ns": self.namespace, "name": self.name, "rid": self.request_id}, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> Ref | None:
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            return None
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) and data[k] for k in ("ns", "name", "rid")):
            return None
        return cls(data["ns"], data["name"], data["rid"])


def ref_of(obj: dict[str, Any]) -> Ref:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return Ref(meta.get("namespace", ""), meta.get("name", ""), spec.get("requestId", ""))


def phase(obj: dict[str, Any]) -> str:
    return (obj.get("status") or {}).get("phase") or "Pending"


def is_question(obj: dict[str, Any]) -> bool:
    """A ``hitl_request`` question from the model: answered in the chat, never approved through a bridge."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_KIND) == KIND_HITL \
        or (obj.get("spec") or {}).get("tool") == KIND_HITL


def already_decided(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    return f"This request is already {phase(obj).lower()} by {status.get('decidedBy') or 'someone'}; nothing changed."


def posted(obj: dict[str, Any], annotation: str, keys: tuple[str, ...]) -> dict[str, str] | None:
    """Where the request's message is (the place's ``keys``) and what it last showed (:data:`FINGERPRINT`), from the
    ``annotation``; None when it was never posted (or the annotation is not one a bridge wrote)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(annotation)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(data.get(k) for k in keys):
        return None
    return {k: str(data.get(k) or "") for k in (*keys, FINGERPRINT)}


def place_annotation(place: Place, fingerprint: str) -> str:
    """The annotation's value: the place and the fingerprint, as compact sorted JSON."""
    return json.dumps({**place, FINGERPRINT: fingerprint}, separators=(",", ":"), sort_keys=True)


def same_place(written: dict[str, str], place: Place, keys: tuple[str, ...]) -> bool:
    """Whether ``place`` (where a click says it came from) is the message ``written`` on the object."""
    return all(written.get(k) == place.get(k) for k in keys)


__all__ = ["FINGERPRINT", "Ref", "agent_path", "already_decided", "collection", "is_question", "object_path",
           "owner_name", "owner_path", "phase", "place_annotation", "posted", "ref_of", "same_place"]
