"""The chart's ToolApproval admission policy as data: requests, each with the verdict the policy must give.

One table for every backend. ``tests/chart/test_admission_policy.py`` evaluates each case's CEL with cel-python
(:class:`tests.support.admission.PolicyEvaluator`); ``tests/kube/test_toolapproval_admission_emulated.py`` sends
each as an HTTP request to the emulated API server with the chart's policy loaded; a real kube-apiserver can take
the same cases:

1. store :attr:`Case.old` as it is, past admission (the emulator's ``seed``; a real server: with the policy's binding
   removed while storing, then its status through ``/status``), in namespace :data:`NAMESPACE`;
2. send :meth:`Case.http` as :attr:`Case.user` with :attr:`Case.groups` (a token or impersonation), with
   ``metadata.resourceVersion`` of the stored object set on a PUT;
3. expect a 2xx when :attr:`Case.refused` is ``None``, else a 403/422 whose message contains it.

Who is who: :data:`RUNTIME` is the file-manager Agent's runtime, the ServiceAccount its objects' ``gatehouse.dev/agent``
label names; :data:`OTHER_RUNTIME` is another Agent's runtime in the same namespace (its Role may patch status and
delete ToolApprovals there too); :data:`ALICE` and :data:`BOB` approvers; :data:`BRIDGE` the Slack bridge, which
votes on behalf of people. Every object here is a valid ToolApproval (schema and CEL of ``crds/toolapproval.yaml``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

NAMESPACE = "default"
ALICE = "alice@example.com"
BOB = "bob@example.com"
GROUPS = ("approvers", "system:authenticated")
RUNTIME = f"system:serviceaccount:{NAMESPACE}:file-manager"
OTHER_RUNTIME = f"system:serviceaccount:{NAMESPACE}:other-agent"
RUNTIME_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated")
BRIDGE = "system:serviceaccount:gatehouse-system:gatehouse-slack"
BRIDGE_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:gatehouse-system", "system:authenticated")
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
CONTROLLER_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
COLLECTION = f"/apis/gatehouse.dev/v1alpha1/namespaces/{NAMESPACE}/toolapprovals"

CREATED: dict[str, Any] = {
    "apiVersion": "gatehouse.dev/v1alpha1",
    "kind": "ToolApproval",
    "metadata": {"name": "apr-1", "namespace": NAMESPACE,
                 "labels": {"gatehouse.dev/agent": "file-manager", "gatehouse.dev/context": "ctx-1"}},
    "spec": {
        "agentRef": "file-manager",
        "contextId": "ctx-1",
        "taskId": "task-1",
        "requestId": "apr-1",
        "callId": "adk-1",
        "tool": "delete_file",
        "arguments": {"path": "/data/a.txt", "options": {"force": False}},
        "hint": "delete_file needs approval",
        "requestedAt": "2026-11-21T10:00:00Z",
        "expiresAt": "2026-11-21T10:15:00Z",
    },
}
PENDING = {"phase": "Pending", "approvals": "0/1", "required": 1}
APPROVED = {"phase": "Approved", "decidedBy": ALICE, "decidedAt": "2026-11-21T10:01:00Z", "source": "kubectl"}


def groups_of(user: str) -> tuple[str, ...]:
    """The groups the API server reports for each user of these cases."""
    if user in (RUNTIME, OTHER_RUNTIME) or user.startswith(f"system:serviceaccount:{NAMESPACE}:"):
        return RUNTIME_GROUPS
    if user == BRIDGE:
        return BRIDGE_GROUPS
    if user.startswith("system:serviceaccount:kube-system:"):
        return CONTROLLER_GROUPS
    return GROUPS


# -- objects ----------------------------------------------------------------------------------------------------


def decided(by: str = ALICE, action: str = "Approve", **extra: str) -> dict[str, Any]:
    obj = copy.deepcopy(CREATED)
    obj["spec"]["decision"] = {"action": action, "decidedBy": by, **extra}
    return obj


def vote(by: str = ALICE, action: str = "Approve", groups: tuple[str, ...] | None = GROUPS, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"by": by, "action": action, **extra}
    if groups is not None:
        out["groups"] = list(groups)
    return out


def voted(*votes: dict[str, Any], obj: dict[str, Any] = CREATED) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["votes"] = [copy.deepcopy(v) for v in votes]
    return out


def question(obj: dict[str, Any], kind: str = "hitl_request") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["labels"]["gatehouse.dev/kind"] = kind
    return out


def with_spec(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """``obj`` with these spec fields set (``None``: removed)."""
    out = copy.deepcopy(obj)
    for key, value in spec.items():
        if value is None:
            out["spec"].pop(key)
        else:
            out["spec"][key] = value
    return out


def labelled(obj: dict[str, Any], **labels: str | None) -> dict[str, Any]:
    """``obj`` with these labels set (``None``: removed); ``gatehouse_dev__agent`` is ``gatehouse.dev/agent``."""
    out = copy.deepcopy(obj)
    for key, value in labels.items():
        label = key.replace("__", "/").replace("_", ".")
        if value is None:
            out["metadata"]["labels"].pop(label, None)
        else:
            out["metadata"]["labels"][label] = value
    return out


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {}).update(annotations)
    return out


def in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["namespace"] = namespace
    return out


def with_status(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"] = copy.deepcopy(status)
    return out


# -- cases ------------------------------------------------------------------------------------------------------

Operation = Literal["CREATE", "UPDATE", "DELETE"]


@dataclass(frozen=True)
class Case:
    """One request and the policy's verdict on it."""

    id: str
    operation: Operation
    user: str
    old: dict[str, Any] | None  # the stored object (None: CREATE)
    new: dict[str, Any] | None  # what the request sends (None: DELETE)
    refused: str | None = None  # None: admitted; else a part of the denial's message
    subresource: Literal["", "status"] = ""

    @property
    def groups(self) -> tuple[str, ...]:
        return groups_of(self.user)

    @property
    def namespace(self) -> str:
        obj = self.new if self.new is not None else self.old
        assert obj is not None
        return str(obj["metadata"].get("namespace") or NAMESPACE)

    @property
    def name(self) -> str:
        obj = self.new if self.new is not None else self.old
        assert obj is not None
        return str(obj["metadata"]["name"])

    def http(self, resource_version: str | None = None) -> tuple[str, str, dict[str, Any] | None]:
        """(method, path, body): POST a CREATE, PUT an UPDATE (``resource_version``: the stored object's), DELETE."""
        collection = f"/apis/gatehouse.dev/v1alpha1/namespaces/{self.namespace}/toolapprovals"
        if self.operation == "CREATE":
            return "POST", collection, copy.deepcopy(self.new)
        path = f"{collection}/{self.name}" + (f"/{self.subresource}" if self.subresource else "")
        if self.operation == "DELETE":
            return "DELETE", path, None
        body = copy.deepcopy(self.new)
        assert body is not None
        if resource_version is not None:
            body["metadata"]["resourceVersion"] = resource_version
        return "PUT", path, body


def _create(id: str, user: str, new: dict[str, Any], refused: str | None = None) -> Case:
    return Case(id, "CREATE", user, None, new, refused)


def _update(id: str, user: str, old: dict[str, Any], new: dict[str, Any], refused: str | None = None) -> Case:
    return Case(id, "UPDATE", user, old, new, refused)


def _status(id: str, user: str, old: dict[str, Any], status: dict[str, Any], refused: str | None = None) -> Case:
    return Case(id, "UPDATE", user, old, with_status(old, status), refused, "status")


def _delete(id: str, user: str, old: dict[str, Any], refused: str | None = None) -> Case:
    return Case(id, "DELETE", user, old, None, refused)


NOT_CREATED = "a user cannot create one"
STATUS_REFUSED = "a ToolApproval's status is written by its agent's runtime only (ServiceAccount default/file-manager)"
DELETE_REFUSED = "a ToolApproval is deleted by its agent's runtime only (ServiceAccount default/file-manager)"

CREATES = [
    _create("the agent's runtime creates it", RUNTIME, CREATED),
    _create("the runtime creates a question", RUNTIME, question(CREATED)),
    _create("an empty vote list is no vote", RUNTIME, voted()),
    _create("alice creates one", ALICE, CREATED, "created by the agent's runtime (ServiceAccount default/file-manager)"),
    _create("another agent's runtime creates one", OTHER_RUNTIME, CREATED, NOT_CREATED),
    _create("the runtime of another namespace", RUNTIME, in_namespace(CREATED, "team-b"), "(ServiceAccount team-b/file-manager)"),
    _create("agentRef is not the agent label", RUNTIME, with_spec(CREATED, agentRef="other"), "spec.agentRef must equal"),
    _create("created with a decision", RUNTIME, decided(by=RUNTIME), "carries no spec.decision"),
    _create("created with a vote", RUNTIME, voted(vote(RUNTIME, groups=RUNTIME_GROUPS)), "no spec.votes"),
    _create("created without the agent label", RUNTIME, labelled(CREATED, gatehouse_dev__agent=None),
            "(ServiceAccount default/<the gatehouse.dev/agent label>)"),
]

UPDATES = [
    # allowed
    _update("other labels change, undecided", ALICE, CREATED, labelled(CREATED, team="payments")),
    _update("an annotation is added (the Slack bridge's message)", BRIDGE, CREATED,
            annotated(CREATED, **{"gatehouse.dev/slack-message": "C1/1700000000.1"})),
    _update("no change at all", RUNTIME, CREATED, CREATED),
    _update("alice approves as herself", ALICE, CREATED, decided()),
    _update("alice denies with a reason", ALICE, CREATED, decided(action="Deny", reason="not today")),
    _update("a decided object is re-applied unchanged by someone else", BOB, decided(), decided()),
    _update("metadata changes after the decision", BOB, decided(), {**decided(), "metadata": {
        **decided()["metadata"], "finalizers": ["example.com/keep"]}}),
    _update("a question's other metadata changes", ALICE, question(CREATED), annotated(question(CREATED), x="y")),
    _update("an approval labelled as one is decided", ALICE, question(CREATED, "tool_approval"),
            question(decided(), "tool_approval")),
    _update("alice casts the first vote", ALICE, CREATED, voted(vote())),
    _update("alice votes into an empty list", ALICE, voted(), voted(vote())),
    _update("bob adds his vote after alice's", BOB, voted(vote()), voted(vote(), vote(BOB, "Deny", reason="no"))),
    _update("votes re-applied unchanged by someone else", BOB, voted(vote()), voted(vote())),
    _update("the bridge votes for two people", BRIDGE,
            voted(vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE})),
            voted(vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE}),
                  vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": BOB}))),
    _update("a vote on an approval labelled as one", ALICE, question(CREATED, "tool_approval"),
            question(voted(vote()), "tool_approval")),
    # the legacy decision
    _update("decision names another user", ALICE, CREATED, decided(by="bob"), "decidedBy"),
    _update("decision without decidedBy", ALICE, CREATED, with_spec(CREATED, decision={"action": "Approve"}), "decidedBy"),
    _update("decision flipped", ALICE, decided(), decided(action="Deny"), "immutable"),
    _update("decision reason edited", ALICE, decided(), decided(reason="changed my mind"), "immutable"),
    _update("decision taken back", ALICE, decided(), CREATED, "immutable"),
    _update("decider rewritten", BOB, decided(), decided(by="bob"), "immutable"),
    # the request
    _update("tool changed", ALICE, CREATED, with_spec(CREATED, tool="write_file"), "spec.tool "),
    _update("arguments changed with the decision", ALICE, CREATED,
            with_spec(decided(), arguments={"path": "/etc/passwd", "options": {"force": False}}), "spec.arguments"),
    _update("nested argument changed", ALICE, CREATED,
            with_spec(CREATED, arguments={"path": "/data/a.txt", "options": {"force": True}}), "spec.arguments"),
    _update("expiry pushed back", ALICE, CREATED, with_spec(CREATED, expiresAt="2027-01-01T00:00:00Z"), "spec.expiresAt"),
    _update("expiry removed", ALICE, CREATED, with_spec(CREATED, expiresAt=None), "spec.expiresAt"),
    _update("hint added later", ALICE, with_spec(CREATED, hint=None), CREATED, "spec.hint"),
    _update("agent swapped", ALICE, CREATED, with_spec(CREATED, agentRef="other"), "spec.agentRef"),
    # questions
    _update("a question given a decision", ALICE, question(CREATED), question(decided()), "takes no spec.decision"),
    _update("a question relabelled and decided", ALICE, question(CREATED), question(decided(), "tool_approval"),
            "kind label"),
    _update("a question's kind label removed", ALICE, question(CREATED), CREATED, "kind label"),
    # the labels the runtime reads: a Pending request taken out of its runtime's watch, or handed to another runtime
    _update("an approver removes the agent label", ALICE, CREATED, labelled(CREATED, gatehouse_dev__agent=None),
            "the gatehouse.dev/agent label cannot change"),
    _update("an approver moves it to another agent", ALICE, CREATED, labelled(CREATED, gatehouse_dev__agent="other-agent"),
            "the gatehouse.dev/agent label cannot change"),
    _update("another agent's runtime claims it", OTHER_RUNTIME, CREATED,
            labelled(CREATED, gatehouse_dev__agent="other-agent"), "the gatehouse.dev/agent label cannot change"),
    _update("the agent label is removed after the decision", BOB, decided(), labelled(decided(), gatehouse_dev__agent=None),
            "the gatehouse.dev/agent label cannot change"),
    _update("an approver rewrites the context label", ALICE, CREATED, labelled(CREATED, gatehouse_dev__context="ctx-2"),
            "the gatehouse.dev/context label cannot change"),
    _update("every label replaced", ALICE, CREATED, {**CREATED, "metadata": {**CREATED["metadata"], "labels": {"x": "y"}}},
            "the gatehouse.dev/agent label cannot change"),
    _update("an approval labelled a question", ALICE, CREATED, question(CREATED), "the gatehouse.dev/kind label cannot change"),
    # votes
    _update("a vote in another user's name", ALICE, CREATED, voted(vote(by="ceo@example.com")), "by must be the name"),
    _update("a vote claiming a group alice is not in", ALICE, CREATED, voted(vote(groups=(*GROUPS, "security-leads"))),
            "groups must be the groups"),
    _update("a vote leaving out one of alice's groups", ALICE, CREATED, voted(vote(groups=("approvers",))),
            "groups must be"),
    _update("a vote without groups", ALICE, CREATED, voted(vote(groups=None)), "groups must be the groups"),
    _update("two votes in one request", ALICE, CREATED, voted(vote(), vote(BOB)), "one new vote per request"),
    _update("alice votes twice", ALICE, voted(vote()), voted(vote(), vote(action="Deny")), "a user votes once"),
    _update("the bridge votes twice for alice", BRIDGE,
            voted(vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE})),
            voted(vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": ALICE}),
                  vote(by=BRIDGE, groups=BRIDGE_GROUPS, action="Deny", onBehalfOf={"user": ALICE})), "a user votes once"),
    _update("a vote on behalf of someone in another's name", ALICE, CREATED,
            voted(vote(by=BRIDGE, groups=BRIDGE_GROUPS, onBehalfOf={"user": BOB})), "by must be the name"),
    _update("a vote flipped", BOB, voted(vote(), vote(BOB)), voted(vote(), vote(BOB, "Deny")), "append-only"),
    _update("a vote removed", ALICE, voted(vote(), vote(BOB)), voted(vote()), "append-only"),
    _update("all votes cleared", BOB, voted(vote()), CREATED, "append-only"),
    _update("votes reordered", ALICE, voted(vote(), vote(BOB)), voted(vote(BOB), vote()), "append-only"),
    _update("a vote inserted before the others", ALICE, voted(vote(BOB)), voted(vote(), vote(BOB)), "append-only"),
    _update("a vote on a question", ALICE, question(CREATED), question(voted(vote())), "takes no spec.votes"),
]

STATUS = [
    _status("the runtime writes the status", RUNTIME, CREATED, PENDING),
    _status("the runtime records the outcome", RUNTIME, with_status(voted(vote()), PENDING), APPROVED),
    _status("another agent's runtime rewrites the status", OTHER_RUNTIME, with_status(CREATED, PENDING), APPROVED,
            STATUS_REFUSED),
    _status("another agent's runtime orphans it", OTHER_RUNTIME, with_status(CREATED, PENDING),
            {"phase": "Orphaned", "reason": "unknown request"}, STATUS_REFUSED),
    _status("an approver writes the status", ALICE, with_status(CREATED, PENDING), APPROVED, STATUS_REFUSED),
    _status("the bridge writes the status", BRIDGE, with_status(CREATED, PENDING), APPROVED, STATUS_REFUSED),
    _status("a runtime of the same name in another namespace", "system:serviceaccount:team-b:file-manager",
            with_status(CREATED, PENDING), APPROVED, STATUS_REFUSED),
]

DELETES = [
    _delete("the runtime deletes its own", RUNTIME, with_status(decided(), APPROVED)),
    _delete("the runtime deletes a pending one", RUNTIME, with_status(CREATED, PENDING)),
    _delete("the garbage collector deletes it with its Agent", GARBAGE_COLLECTOR, with_status(CREATED, PENDING)),
    _delete("the namespace controller deletes it", NAMESPACE_CONTROLLER, with_status(CREATED, PENDING)),
    _delete("another agent's runtime deletes a pending one", OTHER_RUNTIME, with_status(CREATED, PENDING), DELETE_REFUSED),
    _delete("another agent's runtime deletes a decided one", OTHER_RUNTIME, with_status(decided(), APPROVED),
            DELETE_REFUSED),
    _delete("an approver deletes it", ALICE, with_status(voted(vote()), PENDING), DELETE_REFUSED),
    _delete("the bridge deletes it", BRIDGE, with_status(CREATED, PENDING), DELETE_REFUSED),
    _delete("a runtime deletes one without the agent label", RUNTIME, labelled(CREATED, gatehouse_dev__agent=None),
            "deleted by its agent's runtime only (ServiceAccount default/<the gatehouse.dev/agent label>)"),
]

# An MCPGateway's held call (docs/gateway.md): spec.gatewayRef and the gatehouse.dev/gateway label name the gateway,
# whose runtime is the ServiceAccount named like it. Everything else is as for an Agent's.
GATEWAY_RUNTIME = f"system:serviceaccount:{NAMESPACE}:files-gate"
HELD = with_spec(labelled(CREATED, gatehouse_dev__agent=None, gatehouse_dev__gateway="files-gate"),
                 agentRef=None, gatewayRef="files-gate")
GATEWAY_STATUS_REFUSED = "a ToolApproval's status is written by its agent's runtime only (ServiceAccount default/files-gate)"
GATEWAYS = [
    _create("a gateway's runtime creates its held call", GATEWAY_RUNTIME, HELD),
    _create("an agent's runtime creates a gateway's held call", RUNTIME, HELD, NOT_CREATED),
    _create("a gateway's runtime creates it under another gateway's label", GATEWAY_RUNTIME,
            labelled(HELD, gatehouse_dev__gateway="other-gate"), NOT_CREATED),
    _create("gatewayRef is not the gateway label", GATEWAY_RUNTIME, with_spec(HELD, gatewayRef="other-gate"),
            "spec.gatewayRef must equal the gatehouse.dev/gateway label"),
    _create("a gateway's held call also labelled with an agent", GATEWAY_RUNTIME,
            labelled(HELD, gatehouse_dev__agent="files-gate"), "spec.gatewayRef must equal the gatehouse.dev/gateway label"),
    _update("alice votes on a held call", ALICE, with_status(HELD, PENDING), with_status(voted(vote(), obj=HELD), PENDING)),
    _update("an approver relabels a held call", ALICE, HELD, labelled(HELD, gatehouse_dev__gateway="other-gate"),
            "the gatehouse.dev/gateway label cannot change"),
    _status("the gateway's runtime marks it Abandoned", GATEWAY_RUNTIME, with_status(HELD, PENDING),
            {**PENDING, "phase": "Abandoned"}),
    _status("an agent's runtime rewrites a held call's status", RUNTIME, with_status(HELD, PENDING), APPROVED,
            GATEWAY_STATUS_REFUSED),
    _delete("the gateway's runtime deletes its held call", GATEWAY_RUNTIME, with_status(HELD, PENDING)),
]

CASES: list[Case] = CREATES + UPDATES + STATUS + DELETES + GATEWAYS
BY_ID: dict[str, Case] = {case.id: case for case in CASES}
assert len(BY_ID) == len(CASES), "case ids are unique"
