"""The chart's Slack bridge (templates/slack.yaml): off by default; when on, what it runs and may do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.chart.conftest import CHART, RELEASE, RELEASE_NAMESPACE, Render

ON = ("--set", "slack.enabled=true", "--set", "slack.namespaces={team-a,team-b}", "--set", "slack.emailDomains={example.com}",
      "--set", "slack.users.U024BE7LH.principal=alice@example.com", "--set", "slack.users.U024BE7LH.groups={sre}")
BRIDGE = f"{RELEASE}-gatehouse-slack"


def _slack(docs: list[dict]) -> list[dict]:
    return [d for d in docs if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "slack"]


def test_off_by_default(render: Render) -> None:
    assert _slack(render()) == []


def test_on_it_runs_gatehouse_slack_with_its_secret_users_and_namespaces(render: Render) -> None:
    docs = _slack(render(*ON))
    kinds = sorted((d["kind"], d["metadata"].get("namespace")) for d in docs)
    assert kinds == sorted([
        ("ServiceAccount", RELEASE_NAMESPACE), ("ConfigMap", RELEASE_NAMESPACE), ("Deployment", RELEASE_NAMESPACE),
        ("Service", RELEASE_NAMESPACE), ("ConfigMap", RELEASE_NAMESPACE), ("Role", RELEASE_NAMESPACE),
        ("RoleBinding", RELEASE_NAMESPACE), ("Role", "team-a"), ("RoleBinding", "team-a"), ("Role", "team-b"),
        ("RoleBinding", "team-b")])
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["gatehouse", "slack"]
    assert container["args"] == ["--port=3000", "--users-file=/etc/gatehouse-slack/users.yaml",
                                 f"--replay-namespace={RELEASE_NAMESPACE}", f"--replay-configmap={BRIDGE}-replays",
                                 "--namespace=team-a", "--namespace=team-b"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env == {"SLACK_BOT_TOKEN": {"name": "gatehouse-slack", "key": "bot-token"},
                   "SLACK_SIGNING_SECRET": {"name": "gatehouse-slack", "key": "signing-secret"}}
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == BRIDGE
    (users,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"{BRIDGE}-users"]
    from agent_runtime.slack.users import Person, UserMap

    mapping = UserMap.load(users["data"]["users.yaml"])  # what the bridge reads
    assert mapping.resolve("U024BE7LH") == Person("alice@example.com", ("sre",))
    assert mapping.resolve("U9", "bob@example.com") == Person("bob@example.com")
    (service,) = [d for d in docs if d["kind"] == "Service"]
    assert service["spec"]["ports"][0]["targetPort"] == "interactions"


def test_its_rbac_reads_agents_and_gateways_and_votes_on_toolapprovals_only(render: Render) -> None:
    roles = [d for d in _slack(render(*ON)) if d["kind"] == "Role" and d["metadata"]["namespace"] != RELEASE_NAMESPACE]
    assert {r["metadata"]["namespace"] for r in roles} == {"team-a", "team-b"}
    for role in roles:
        assert role["rules"] == [
            {"apiGroups": ["gatehouse.dev"], "resources": ["agents", "mcpgateways"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["gatehouse.dev"], "resources": ["toolapprovals"], "verbs": ["get", "list", "watch", "patch"]},
        ]  # an Agent's or a gateway's channel; no create (only runtimes create ToolApprovals), no Secrets, no status
    bindings = [d for d in _slack(render(*ON)) if d["kind"] == "RoleBinding"]
    assert {b["subjects"][0]["name"] for b in bindings} == {BRIDGE}


def test_its_replay_memory_is_one_configmap_it_may_only_read_and_patch(render: Render) -> None:
    docs = _slack(render(*ON))
    (memory,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"{BRIDGE}-replays"]
    assert memory["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert "data" not in memory  # the bridge's entries: an upgrade renders none, so it leaves them be
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == RELEASE_NAMESPACE]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [f"{BRIDGE}-replays"],
                              "verbs": ["get", "patch"]}]  # no create, no delete: nothing else in the namespace
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == RELEASE_NAMESPACE]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": BRIDGE, "namespace": RELEASE_NAMESPACE}]


def test_on_without_namespaces_fails_with_why(helm: Path) -> None:
    done = subprocess.run([str(helm), "template", RELEASE, str(CHART), "--set", "slack.enabled=true"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "slack.enabled needs slack.namespaces" in done.stderr


def test_the_shipped_slack_app_manifest_asks_for_what_the_bridge_uses() -> None:
    manifest = yaml.safe_load((CHART.parents[1] / "deploy" / "slack" / "app-manifest.yaml").read_text())
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {"chat:write", "users:read", "users:read.email"}
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["interactivity"]["request_url"].endswith("/slack/interactions")


def test_the_bridges_manifests_are_valid_for_kubernetes(render: Render) -> None:
    import kubernetes_validate

    problems = []
    for doc in _slack(render(*ON)):
        try:
            kubernetes_validate.validate(doc, "1.32", strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{doc['kind']}: {'.'.join(map(str, exc.path))}: {exc.message}")
    assert not problems, "\n".join(problems)
