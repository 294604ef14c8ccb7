"""Pure builders (agent_runtime/kube/objects.py) and start-up detection (agent_runtime/kube/settings.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_runtime.approvals import ApprovalRecord, args_hash
from agent_runtime.contract.agent_config import RedactConfig
from agent_runtime.contract.resources.tool_approval import ToolApproval
from agent_runtime.kube import detect, objects
from agent_runtime.questions import question_wire
from agent_runtime.questions.store import QuestionRecord
from tests.support import crd_validation

DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def record(**kw: object) -> ApprovalRecord:
    base: dict[str, object] = dict(
        id="apr-0123456789abcdef", task_id="t-1", context_id="ctx:1/ä", confirmation_id="c", call_id="adk-1",
        tool="delete_file", server="files", args={"path": "x.txt"}, args_hash="h", hint="needs approval",
        created_at=1_700_000_000.0, expires_at=1_700_000_900.0,
    )
    base.update(kw)
    return ApprovalRecord(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("agent", ["file-manager", "File_Manager.v2", "a" * 80, "-x-"])
def test_names_and_labels_are_valid_kubernetes_syntax(agent: str) -> None:
    name = objects.approval_name(agent, "apr-0123456789abcdef")
    assert DNS.match(name) and len(name) <= 63 and name.endswith("-0123456789abcdef")
    for value in (objects.label_value(agent), objects.label_value("ctx:1/ä" * 20), objects.label_value("--")):
        assert LABEL.match(value) and len(value) <= 63


def test_a_tool_approval_validates_against_the_crd() -> None:
    agent = {"metadata": {"name": "file-manager", "namespace": "default", "uid": "u-1"}}
    obj = objects.tool_approval(record(), "file-manager", "default", agent)
    assert obj["metadata"]["name"] == "file-manager-0123456789abcdef"
    assert obj["metadata"]["labels"] == {"gatehouse.dev/agent": "file-manager", "gatehouse.dev/context": "ctx-1",
                                         "gatehouse.dev/kind": "tool_approval"}
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert obj["spec"]["requestedAt"] == "2023-11-14T22:13:20Z" and obj["spec"]["expiresAt"] == "2023-11-14T22:28:20Z"
    assert crd_validation.validate({**obj, "status": objects.status(record())}) == []
    decided = record(status="denied", reason="no", source="kubectl", decided_at=1_700_000_100.0)
    assert crd_validation.validate({**obj, "status": objects.status(decided, "alice")}) == []
    assert "ownerReferences" not in objects.tool_approval(record(), "file-manager", "default", None)["metadata"]


@pytest.mark.parametrize(
    ("status", "source", "phase", "shown_source", "by"),
    [
        ("approved", "kubectl", "Approved", "kubectl", "alice"),
        ("denied", "a2a", "Denied", "a2a", "a2a client"),
        ("expired", "timeout", "Expired", "timeout", "gatehouse (onTimeout)"),
        ("approved", "timeout", "Approved", "timeout", "gatehouse (onTimeout)"),
        ("denied", "cancel", "Canceled", "a2a", "a2a client (task canceled)"),
        ("denied", "rest", "Denied", "rest", "rest"),
        ("approved", "grant", "Granted", "grant", "grant"),
    ],
)
def test_status_follows_every_outcome(status: str, source: str, phase: str, shown_source: str, by: str) -> None:
    r = record(status=status, source=source, reason="why", decided_at=1_700_000_100.0)
    out = objects.status(r, "alice" if source == "kubectl" else "")
    assert out == {"phase": phase, "summary": "path=x.txt", "source": shown_source, "decidedBy": by,
                   "decidedAt": "2023-11-14T22:15:00Z", "reason": "why", "approvals": "0/1", "required": 1, "votes": []}


def test_events_name_the_request_and_the_outcome() -> None:
    agent = {"metadata": {"name": "file-manager", "namespace": "default", "uid": "u-1"}}
    requested = objects.event(record(), agent, "pod-1", "2026-01-01T00:00:00Z")
    assert requested["reason"] == "ApprovalRequested" and requested["reportingComponent"] == "gatehouse.dev"
    assert requested["involvedObject"] == {"apiVersion": "gatehouse.dev/v1alpha1", "kind": "Agent",
                                           "name": "file-manager", "namespace": "default", "uid": "u-1"}
    assert "delete_file(path='x.txt') waits for approval: toolapproval file-manager-0123456789abcdef" == requested["message"]
    denied = objects.event(record(status="denied", source="kubectl", reason="keep"), agent, "pod-1", "now", "bob")
    assert denied["reason"] == "ApprovalDenied" and "denied by bob via kubectl: keep" in denied["message"]
    expired = objects.event(record(status="expired", source="timeout"), agent, "pod-1", "now")
    assert expired["reason"] == "ApprovalExpired"
    granted = objects.event(record(status="approved", source="grant"), agent, "pod-1", "now", "carol")
    assert granted["reason"] == "ApprovalGranted" and "granted by carol via grant" in granted["message"]


SECRET = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"


def secret_record(**kw: object) -> ApprovalRecord:
    args = {"path": "creds.txt", "content": f"write {SECRET}", "headers": {"Authorization": "Basic dXNlcjpwYXNz"}}
    return record(tool="write_file", args=args, args_hash=args_hash("write_file", args),
                  redact=RedactConfig(paths=["headers.authorization"]), **kw)


def test_a_tool_approval_shows_the_arguments_redacted_with_their_hash_and_paths() -> None:
    r = secret_record()
    obj = objects.tool_approval(r, "file-manager", "default", None)
    spec = obj["spec"]
    assert spec["arguments"] == {"path": "creds.txt", "content": "write «redacted»", "headers": {"Authorization": "«redacted»"}}
    assert spec["argumentsHash"] == args_hash("write_file", r.args) == r.args_hash  # of the real arguments
    assert spec["redacted"] == ["$.content", "$.headers.Authorization"]
    assert SECRET not in json.dumps(obj) and "dXNlcjpwYXNz" not in json.dumps(obj)
    assert crd_validation.validate({**obj, "status": objects.status(r)}) == []
    assert ToolApproval.model_validate(obj).spec.redacted == spec["redacted"]
    # the SUMMARY column: the same redacted arguments, in one line
    shown = objects.status(r)["summary"]
    assert shown.startswith("path=creds.txt, content=write «redacted», headers=") and SECRET not in shown


def test_events_show_the_arguments_redacted() -> None:
    agent = {"metadata": {"name": "file-manager", "namespace": "default", "uid": "u-1"}}
    for r in (secret_record(), secret_record(status="approved", source="rest", reason="ok")):
        message = objects.event(r, agent, "pod-1", "now", "alice")["message"]
        assert message.startswith("write_file(path='creds.txt', content='write «redacted»', headers={'Authorization': "
                                  "'«redacted»'})")
        assert SECRET not in message and "dXNlcjpwYXNz" not in message


def test_the_runtime_knows_its_redacted_toolapproval_and_nothing_else() -> None:
    r = secret_record()
    spec = objects.tool_approval(r, "file-manager", "default", None)["spec"]
    assert objects.same_request(spec, r)  # so kubectl votes on it count
    legacy = {k: v for k, v in spec.items() if k not in ("argumentsHash", "redacted")} | {"arguments": r.args}
    assert objects.same_request(legacy, r)  # written before redaction: the real arguments
    changed = [
        {**spec, "arguments": {**spec["arguments"], "path": "other.txt"}},
        {**spec, "arguments": r.args},  # the real arguments under a hash: not what the runtime wrote
        {**spec, "argumentsHash": args_hash("write_file", {})},
        {**spec, "redacted": ["$.content"]},
        {k: v for k, v in spec.items() if k != "argumentsHash"},
        {**legacy, "arguments": spec["arguments"]},  # redacted arguments without the hash
        {**spec, "tool": "delete_file"},
    ]
    assert [objects.same_request(c, r) for c in changed] == [False] * len(changed)


def test_a_hitl_question_shows_no_secret() -> None:
    asked = question(args=question_wire.QuestionArgs(question=f"Use {SECRET}?", options=["yes", "no"]))
    spec = objects.question_approval(asked, "file-manager", "default", None)["spec"]
    assert spec["hint"] == "Use «redacted»?" and spec["arguments"]["question"] == "Use «redacted»?"
    assert spec["redacted"] == ["$.question"]


def test_detect_is_off_locally_unless_a_kubeconfig_is_given(tmp_path: Path) -> None:
    no_sa = tmp_path / "none"
    assert detect(None, None, environ={}, service_account=no_sa) is None
    assert detect(None, None, environ={"KUBECONFIG": "/k"}, service_account=no_sa) is None  # ambient kubeconfig alone
    on = detect(None, "team", 60, environ={"KUBECONFIG": "/k:/other"}, service_account=no_sa)
    assert on is not None and (on.kubeconfig, on.namespace, on.retention_seconds) == (Path("/k"), "team", 60)
    explicit = detect(Path("/kc"), None, default_namespace="agents", environ={}, service_account=no_sa)
    assert explicit is not None
    assert (explicit.kubeconfig, explicit.namespace, explicit.in_cluster) == (Path("/kc"), "agents", False)
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    (sa / "namespace").write_text("prod\n")
    pod = detect(None, None, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, service_account=sa)
    assert pod is not None and pod.in_cluster and pod.namespace == "prod" and pod.kubeconfig is None


def question(**kw: object) -> QuestionRecord:
    base: dict[str, object] = dict(
        id="hitl-0123456789abcdef", task_id="t-1", context_id="ctx-1", confirmation_id="c", call_id="adk-2",
        tool="hitl_request", created_at=1_700_000_000.0, expires_at=1_700_000_900.0,
        args=question_wire.QuestionArgs(question="Deploy where?", options=["staging", "prod"], defaultOption="staging",
                           metadata={"ticket": "T-1"}, confirmationMessage="recorded"),
    )
    base.update(kw)
    return QuestionRecord(**base)  # type: ignore[arg-type]


def test_a_hitl_question_is_a_tool_approval_of_its_own_kind() -> None:
    obj = objects.question_approval(question(), "file-manager", "default", None)
    assert obj["metadata"]["name"] == "file-manager-hitl-0123456789abcdef"
    assert obj["metadata"]["labels"]["gatehouse.dev/kind"] == "hitl_request" and objects.is_question(obj)
    assert not objects.is_question(objects.tool_approval(record(), "file-manager", "default", None))
    spec = obj["spec"]
    assert (spec["tool"], spec["hint"], spec["requestId"], spec["callId"]) == (
        "hitl_request", "Deploy where?", "hitl-0123456789abcdef", "adk-2")
    assert spec["arguments"] == {"question": "Deploy where?", "options": ["staging", "prod"], "requireConfirmation": False,
                                 "defaultOption": "staging", "metadata": {"ticket": "T-1"}}
    assert spec["expiresAt"] == "2023-11-14T22:28:20Z"
    assert objects.question_status(question()) == {"phase": "Pending", "summary": "question=Deploy where?"}
    assert crd_validation.validate({**obj, "status": objects.question_status(question())}) == []


def _done(status: str, source: str, message: str, selected: str | None, record_source: str | None = None) -> QuestionRecord:
    result = question_wire.QuestionResult(ok=status == "confirmed", status=status, confirmed=status == "confirmed",  # type: ignore[arg-type]
                             selected_option=selected, source=source, request_id="hitl-0123456789abcdef",  # type: ignore[arg-type]
                             message=message)
    return question(stage="done", selected=selected, result=result, updated_at=1_700_000_100.0,
                    source=record_source or ("timeout" if source == "timeout" else "user"))


@pytest.mark.parametrize(
    ("done", "phase", "source", "by", "reason"),
    [
        (_done("confirmed", "user", "the user chose 'prod'", "prod"), "Approved", "a2a", "a2a client",
         "the user chose 'prod'; selected option: prod"),
        (_done("canceled", "user", "the user canceled", None), "Denied", "a2a", "a2a client", "the user canceled"),
        (_done("timeout", "timeout", "no answer in time; took the default option 'staging'", "staging"), "Expired",
         "timeout", "gatehouse (onTimeout)", "no answer in time; took the default option 'staging'; selected option: staging"),
        (_done("canceled", "user", "the task was canceled", None, "cancel"), "Canceled", "a2a", "a2a client",
         "the task was canceled"),
    ],
)
def test_a_hitl_outcome_becomes_a_status(done: QuestionRecord, phase: str, source: str, by: str, reason: str) -> None:
    status = objects.question_status(done)
    assert status == {"phase": phase, "summary": "question=Deploy where?", "source": source, "decidedBy": by,
                      "reason": reason, "decidedAt": "2023-11-14T22:15:00Z"}
    obj = objects.question_approval(done, "file-manager", "default", None)
    assert crd_validation.validate({**obj, "status": status}) == []
    waiting = objects.question_status(question(stage="confirm", selected="prod"))
    assert waiting["phase"] == "Pending" and "'prod'" in waiting["reason"]


def test_the_summary_column_is_the_redacted_arguments_in_one_short_line() -> None:
    assert objects.summary({"path": "old.txt", "force": True, "n": 2}) == "path=old.txt, force=true, n=2"
    assert objects.summary({"text": "line one\n  line two"}) == "text=line one line two"
    long = objects.summary({"content": "x" * 200})
    assert len(long) == objects.SUMMARY_LIMIT and long.endswith("…")
    assert objects.summary({}) == ""
