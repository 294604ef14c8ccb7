"""The approval gate's per-call decision (agent_runtime/server/gate.py), called directly as ADK calls it.

What the model sees for each call (runs: ``None``; paused: the placeholder; refused: an ``{"error": ...}``) and
what the client will be asked (a :class:`PendingCall` in the run's scope, ``request_confirmation`` on the tool
context). The approvals table is the real one on sqlite; only ADK's ``ToolContext`` is stood in for by
:class:`FakeToolContext`, which offers just what the gate reads and writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext

from agent_runtime.approvals import ApprovalRecord, ApprovalService, Resolution, args_hash
from agent_runtime.approvals.grants import GrantTerms
from agent_runtime.contract.agent_config import ApproversConfig, RedactConfig, RuleConfig
from agent_runtime.contract.authority import Vote
from agent_runtime.infra.database import Database, default_database_url
from agent_runtime.questions.tool import QuestionTool
from agent_runtime.runs.run_scope import CURRENT_RUN, PendingCall, RunScope
from agent_runtime.server.gate import PLACEHOLDER, Gate, confirmation_payload
from agent_runtime.telemetry.metrics import Metrics
from tests.support.configs import files_config

DELETE = BaseTool(name="delete_file", description="delete a file")
READ = BaseTool(name="read_file", description="read a file")
WRITE = BaseTool(name="write_file", description="write a file")
REQUIRE_HINT = "delete_file on files requires approval (requireApproval)"


@dataclass
class FakeActions:
    skip_summarization: bool | None = None


@dataclass
class FakeToolContext:
    """The part of ADK's ToolContext the gate uses."""

    function_call_id: str | None = "call-1"
    tool_confirmation: ToolConfirmation | None = None
    state: dict[str, Any] = field(default_factory=dict)
    actions: FakeActions = field(default_factory=FakeActions)
    confirmations: list[dict[str, Any]] = field(default_factory=list)

    def request_confirmation(self, *, hint: str | None = None, payload: Any | None = None) -> None:
        self.confirmations.append({"hint": hint, "payload": payload})


async def before(gate: Gate, tool: BaseTool, args: dict[str, Any], ctx: FakeToolContext) -> dict[str, Any] | None:
    """``gate.before_tool`` as ADK calls it, with the fake in place of ADK's ToolContext."""
    return await gate.before_tool(tool, args, cast(ToolContext, ctx))


async def after(gate: Gate, tool: BaseTool, args: dict[str, Any], ctx: FakeToolContext, response: Any) -> dict[str, Any] | None:
    return await gate.after_tool(tool, args, cast(ToolContext, ctx), response)


async def exec_state(approvals: ApprovalService, request_id: str = "apr-1") -> str:
    record = await approvals.get(request_id)
    assert record is not None
    return record.exec_state


_config = files_config


@pytest.fixture
async def approvals(tmp_path: Path) -> AsyncIterator[ApprovalService]:
    db = Database(default_database_url(tmp_path))
    service = ApprovalService(db)
    await service.create_tables()
    yield service
    await db.dispose()


@contextmanager
def run_scope(task_id: str = "t1", owner: str = "", context_id: str = "c1") -> Iterator[RunScope]:
    """The scope the turn runner sets around one ADK run."""
    scope = RunScope(task_id, context_id, owner)
    token = CURRENT_RUN.set(scope)
    try:
        yield scope
    finally:
        CURRENT_RUN.reset(token)


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def _recorded(approvals: ApprovalService, status: str, args: dict[str, Any], scope: str = "once",
                    reason: str = "") -> ApprovalRecord:
    """A paused call ``call-1`` as the turn runner stores it, then decided ``status``."""
    record = ApprovalRecord(
        id="apr-1", task_id="t1", context_id="c1", confirmation_id="conf-1", call_id="call-1", tool="delete_file",
        server="files", args=args, args_hash=args_hash("delete_file", args), hint=REQUIRE_HINT, created_at=100.0,
        expires_at=160.0,
    )
    await approvals.add_pending([record])
    (decided,) = await approvals.decide("t1", {"apr-1": Resolution(status, reason, scope)}, "a2a")
    return decided


def _resumed(record: ApprovalRecord, *, call_id: str = "call-1", **state: Any) -> FakeToolContext:
    """The tool context of the call on resume: ADK hands over the confirmation the runtime built from the record."""
    payload = confirmation_payload(record.id, record.status, record.reason, record.expires_at - record.created_at)
    confirmation = ToolConfirmation(hint=record.hint, confirmed=record.status == "approved", payload=payload)
    return FakeToolContext(function_call_id=call_id, tool_confirmation=confirmation, state=dict(state))


# --- the first call -------------------------------------------------------------------------------


async def test_an_ungated_call_runs(approvals: ApprovalService) -> None:
    gate, ctx = Gate(_config(), approvals, Metrics("a")), FakeToolContext()
    with run_scope() as scope:
        assert await before(gate, READ, {"path": "notes.txt"}, ctx) is None
    assert ctx.confirmations == [] and scope.pending == [] and ctx.actions.skip_summarization is None


async def test_a_gated_call_pauses_and_the_run_records_it(approvals: ApprovalService) -> None:
    metrics = Metrics("a")
    gate, ctx = Gate(_config(), approvals, metrics), FakeToolContext(function_call_id="call-7")
    args = {"path": "a.txt"}
    with run_scope() as scope:
        result = await before(gate, DELETE, args, ctx)
    assert result == PLACEHOLDER == {"error": "waiting for a human decision"}
    (asked,) = ctx.confirmations
    request_id = asked["payload"]["request_id"]
    assert asked == {"hint": REQUIRE_HINT, "payload": {"request_id": request_id}} and request_id.startswith("apr-")
    assert ctx.actions.skip_summarization is True  # no model call for the pause itself
    assert scope.pending == [PendingCall(request_id, "call-7", "delete_file", "files", {"path": "a.txt"}, REQUIRE_HINT,
                                         redact=RedactConfig(), rule="spec.tools[files].mcpServer.requireApproval")]
    args["path"] = "changed.txt"
    assert scope.pending[0].args == {"path": "a.txt"}  # what the human is shown is a copy
    assert _sample(metrics, "gatehouse_approval_requests_total", agent="a", tool="delete_file") == 1
    assert await approvals.for_task("t1") == []  # stored by the turn runner once ADK ends the run, not here


async def test_each_gated_call_of_a_turn_gets_its_own_request(approvals: ApprovalService) -> None:
    gate = Gate(_config(), approvals, Metrics("a"))
    with run_scope() as scope:
        for call_id, path in (("call-1", "a"), ("call-2", "b")):
            await before(gate, DELETE, {"path": path}, FakeToolContext(function_call_id=call_id))
    assert [(p.call_id, p.args) for p in scope.pending] == [("call-1", {"path": "a"}), ("call-2", {"path": "b"})]
    assert len({p.request_id for p in scope.pending}) == 2


async def test_a_deny_rule_refuses_without_pausing(approvals: ApprovalService) -> None:
    metrics = Metrics("a")
    rule = RuleConfig(tool="write_file", action="deny", arg="path", glob="/etc/**")
    gate, ctx = Gate(_config(rules=[rule]), approvals, metrics), FakeToolContext()
    with run_scope() as scope:
        result = await before(gate, WRITE, {"path": "/etc/passwd"}, ctx)
        assert await before(gate, WRITE, {"path": "/tmp/x"}, FakeToolContext()) is None
    assert result == {"error": "refused by policy: argument 'path' matches glob '/etc/**'"}
    assert ctx.confirmations == [] and scope.pending == []
    assert _sample(metrics, "gatehouse_decisions_total", outcome="refused", source="policy") == 1


async def test_the_built_in_human_tool_is_never_gated(approvals: ApprovalService) -> None:
    gate = Gate(_config(require_for_all_tools=True), approvals, Metrics("a"))
    ask = QuestionTool("hitl_request")
    with run_scope() as scope:
        assert await before(gate, ask, {"question": "q?", "options": ["a"]}, FakeToolContext()) is None
        # require_for_all_tools does gate every other tool
        assert await before(gate, READ, {"path": "a"}, FakeToolContext()) == PLACEHOLDER
    assert [p.tool for p in scope.pending] == ["read_file"]


async def _granted(approvals: ApprovalService, args: dict[str, Any], terms: GrantTerms | None = None,
                   ttl: float = 3600.0) -> ApprovalRecord:
    """alice's paused call ``apr-1`` in context c1, approved by her for the session (a grant of ``terms``)."""
    record = ApprovalRecord(
        id="apr-1", task_id="t1", context_id="c1", confirmation_id="conf-1", call_id="call-1", tool="delete_file",
        server="files", args=args, args_hash=args_hash("delete_file", args), hint=REQUIRE_HINT, created_at=100.0,
        expires_at=160.0, requested_by="alice",
    )
    await approvals.add_pending([record])
    (voted,) = await approvals.vote(
        "t1", {"apr-1": Vote("alice", frozenset(), "approve", "", "a2a")}, scope="session", grant=terms, grant_ttl=ttl,
    )
    return voted.record


async def test_a_session_grant_lets_the_same_call_run_and_records_it(approvals: ApprovalService) -> None:
    metrics = Metrics("a")
    gate = Gate(_config(allow_session_grants=True), approvals, metrics)
    await _granted(approvals, {"path": "a"})
    ctx = FakeToolContext(function_call_id="call-2")
    with run_scope(owner="alice") as scope:
        assert await before(gate, DELETE, {"path": "a"}, ctx) is None
        assert await after(gate, DELETE, {"path": "a"}, ctx, {"ok": True}) is None
    assert ctx.confirmations == [] and scope.pending == []
    assert _sample(metrics, "gatehouse_decisions_total", outcome="approved", source="grant") == 1
    (granted,) = [r for r in await approvals.for_task("t1") if r.source == "grant"]
    assert (granted.status, granted.call_id, granted.args, granted.exec_state) == ("approved", "call-2", {"path": "a"}, "done")
    assert granted.reason.startswith("under session grant") and "by alice" in granted.reason
    assert await approvals.deciders_of([granted.id]) == {granted.id: "alice"}


async def test_a_session_grant_covers_only_its_arguments_tool_owner_and_context(approvals: ApprovalService) -> None:
    gate = Gate(_config(allow_session_grants=True, require_for_all_tools=True), approvals, Metrics("a"))
    await _granted(approvals, {"path": "a"})
    with run_scope(owner="alice") as scope:
        assert await before(gate, DELETE, {"path": "b"}, FakeToolContext()) == PLACEHOLDER  # other arguments
        assert await before(gate, WRITE, {"path": "a"}, FakeToolContext()) == PLACEHOLDER  # another tool
    with run_scope(owner="bob") as bobs:  # another principal in the same context id
        assert await before(gate, DELETE, {"path": "a"}, FakeToolContext()) == PLACEHOLDER
    with run_scope(owner="alice", context_id="c2") as other:  # another conversation
        assert await before(gate, DELETE, {"path": "a"}, FakeToolContext()) == PLACEHOLDER
    assert [p.tool for p in scope.pending + bobs.pending + other.pending] == ["delete_file", "write_file", "delete_file",
                                                                            "delete_file"]


async def test_a_glob_grant_covers_matching_paths_only(approvals: ApprovalService) -> None:
    gate = Gate(_config(allow_session_grants=True), approvals, Metrics("a"))
    await _granted(approvals, {"path": "/srv/reports/q1.txt"}, GrantTerms("path", "/srv/reports/*"))
    with run_scope(owner="alice") as scope:
        assert await before(gate, DELETE, {"path": "/srv/reports/q2.txt"}, FakeToolContext(function_call_id="c-2")) is None
        for outside in ("/srv/reports/../secrets.txt", "/srv/reports/sub/x.txt", "/srv/other.txt"):
            assert await before(gate, DELETE, {"path": outside}, FakeToolContext(function_call_id=outside)) == PLACEHOLDER
    assert len(scope.pending) == 3


async def test_a_glob_grant_never_covers_a_call_another_rule_gives_other_approvers(approvals: ApprovalService) -> None:
    """alice may decide her own deletes, but deletes under /prod need sre-lead: her grant over ``/**`` stops there."""
    prod = RuleConfig(tool="delete_file", action="require", arg="path", glob="/prod/**",
                      approvers=ApproversConfig(users=["sre-lead"]))
    gate = Gate(_config(allow_session_grants=True, rules=[prod]), approvals, Metrics("a"))
    await _granted(approvals, {"path": "/tmp/a"}, GrantTerms("path", "/**"))
    with run_scope(owner="alice") as scope:
        assert await before(gate, DELETE, {"path": "/tmp/b"}, FakeToolContext(function_call_id="c-2")) is None
        assert await before(gate, DELETE, {"path": "/prod/db"}, FakeToolContext(function_call_id="c-3")) == PLACEHOLDER
    assert [(p.args, p.approvers) for p in scope.pending] == [({"path": "/prod/db"}, prod.approvers)]


async def test_a_session_grant_ends_with_its_ttl(approvals: ApprovalService) -> None:
    await _granted(approvals, {"path": "a"}, ttl=0.0)
    with run_scope(owner="alice") as scope:
        assert await before(Gate(_config(allow_session_grants=True), approvals, Metrics("a")), DELETE, {"path": "a"},
                            FakeToolContext()) == PLACEHOLDER
    assert len(scope.pending) == 1


async def test_grants_count_only_where_the_policy_allows_them(approvals: ApprovalService) -> None:
    await _granted(approvals, {"path": "a"})
    not_allowed = Gate(_config(allow_session_grants=False), approvals, Metrics("a"))
    with run_scope(owner="alice") as scope:
        assert await before(not_allowed, DELETE, {"path": "a"}, FakeToolContext()) == PLACEHOLDER
    assert len(scope.pending) == 1


async def test_without_an_approval_channel_a_gated_call_is_not_run(approvals: ApprovalService) -> None:
    gate, ctx = Gate(_config(), approvals, Metrics("a")), FakeToolContext()
    assert CURRENT_RUN.get() is None
    result = await before(gate, DELETE, {"path": "a"}, ctx)
    assert result == {"error": "approval required, but this run has no approval channel; the call was not run"}
    assert ctx.confirmations == []


async def test_a_gated_call_in_a_turn_that_asks_a_question_is_not_run(approvals: ApprovalService) -> None:
    gate, ctx = Gate(_config(), approvals, Metrics("a")), FakeToolContext()
    with run_scope() as scope:
        scope.questions.append("a question is waiting")
        result = await before(gate, DELETE, {"path": "a"}, ctx)
    assert result is not None and result["error"].startswith("not run: this model turn asks the human a question")
    assert ctx.confirmations == [] and scope.pending == []


# --- the resumed call -------------------------------------------------------------------------------


async def test_an_approved_call_runs_exactly_once(approvals: ApprovalService) -> None:
    gate = Gate(_config(), approvals, Metrics("a"))
    record = await _recorded(approvals, "approved", {"path": "a"})
    with run_scope() as scope:
        ctx = _resumed(record)
        assert await before(gate, DELETE, {"path": "a"}, ctx) is None
        assert scope.claimed == {"call-1"} and ctx.confirmations == [] and scope.pending == []
        assert await exec_state(approvals) == "started"
        assert await after(gate, DELETE, {"path": "a"}, ctx, {"ok": True}) is None
        assert scope.claimed == set()
    assert await exec_state(approvals) == "done"
    with run_scope():  # the same confirmation again (a replay, a duplicate resume)
        again = await before(gate, DELETE, {"path": "a"}, _resumed(record))
    assert again == {"error": "this approved call was already executed; it was not run again"}


async def test_an_approved_call_cut_short_is_not_run_again(approvals: ApprovalService) -> None:
    gate = Gate(_config(), approvals, Metrics("a"))
    record = await _recorded(approvals, "approved", {"path": "a"})
    with run_scope():
        assert await before(gate, DELETE, {"path": "a"}, _resumed(record)) is None
    with run_scope():  # the runtime restarted before the tool returned: no after_tool
        again = await before(gate, DELETE, {"path": "a"}, _resumed(record))
    assert again is not None and "started once already and never reported back" in again["error"]


async def test_an_approval_binds_the_arguments_it_was_shown(approvals: ApprovalService) -> None:
    gate = Gate(_config(), approvals, Metrics("a"))
    record = await _recorded(approvals, "approved", {"path": "a"})
    with run_scope() as scope:
        result = await before(gate, DELETE, {"path": "/etc/passwd"}, _resumed(record))
    assert result == {"error": "the call's arguments differ from the approved ones; it was not run"}
    assert scope.claimed == set() and await exec_state(approvals) == "none"


async def test_a_confirmation_runs_nothing_the_approvals_table_did_not_approve(approvals: ApprovalService) -> None:
    gate = Gate(_config(), approvals, Metrics("a"))
    record = await _recorded(approvals, "denied", {"path": "a"})
    forged = ToolConfirmation(hint="", confirmed=True, payload={"request_id": record.id})
    with run_scope():
        denied = await before(gate, DELETE, {"path": "a"}, FakeToolContext(tool_confirmation=forged))
        unknown_call = FakeToolContext(function_call_id="call-unknown", tool_confirmation=forged)
        unknown = await before(gate, DELETE, {"path": "a"}, unknown_call)
    assert denied == {"error": "the call is denied, not approved; it was not run"}
    assert unknown == {"error": "no approval was recorded for this call; it was not run"}
    assert await exec_state(approvals) == "none"


async def test_a_denied_call_tells_the_model_why(approvals: ApprovalService) -> None:
    gate = Gate(_config(), approvals, Metrics("a"))
    record = await _recorded(approvals, "denied", {"path": "a"}, reason="keep it")
    with run_scope() as scope:
        result = await before(gate, DELETE, {"path": "a"}, _resumed(record))
        no_reason = ToolConfirmation(hint="", confirmed=False, payload={"outcome": "denied", "reason": ""})
        silent = await before(gate, DELETE, {"path": "a"}, FakeToolContext(tool_confirmation=no_reason))
    assert result == {"error": "rejected by the user: keep it"}
    assert silent == {"error": "rejected by the user: no reason given"}
    assert scope.claimed == set() and await exec_state(approvals) == "none"


async def test_a_timed_out_call_tells_the_model_it_did_not_run(approvals: ApprovalService) -> None:
    gate = Gate(_config(timeout_seconds=42), approvals, Metrics("a"))
    record = await _recorded(approvals, "expired", {"path": "a"})
    with run_scope():
        result = await before(gate, DELETE, {"path": "a"}, _resumed(record))
        bare = ToolConfirmation(hint="", confirmed=False, payload={"outcome": "expired"})
        default = await before(gate, DELETE, {"path": "a"}, FakeToolContext(tool_confirmation=bare))
    assert result == {"error": "timeout: no decision within 60s; the call was not run"}  # the request's own window
    assert default == {"error": "timeout: no decision within 42s; the call was not run"}  # else the agent's timeout
    assert await exec_state(approvals) == "none"


async def test_an_approval_once_grants_nothing_more(approvals: ApprovalService) -> None:
    gate = Gate(_config(allow_session_grants=True), approvals, Metrics("a"))
    record = await _recorded(approvals, "approved", {"path": "a"})
    with run_scope():
        assert await before(gate, DELETE, {"path": "a"}, _resumed(record)) is None
    with run_scope() as scope:  # the same call again, in the same conversation
        assert await before(gate, DELETE, {"path": "a"}, FakeToolContext(function_call_id="call-2")) == PLACEHOLDER
    assert len(scope.pending) == 1
