"""The platform story on the real control plane (issue 32), with the kubelet stand-in as its node.

``helm install`` (the session's ``chart``) made the operator's Deployment; once the stand-in registers as a Node the
real scheduler binds its pods there and the stand-in runs them: the chart's operator, two replicas, one leading on
the Lease. Then, with real tools only:

1. ``kubectl apply -f examples/file-manager/`` as shipped; the real controllers make the runtime's and the tools
   server's pods, the stand-in runs them, the Agent turns Ready with the operator's conditions;
2. an in-cluster client pod (its ServiceAccount's token projected for the audience ``gatehouse.dev/a2a``, as
   docs/operator.md shows; its API-server token is refused with 401) asks the Agent, through its Service name, to
   delete a file: the call pauses; the token is renewed, as the kubelet does, and the next calls send the new one;
   ``kubectl get toolapprovals`` lists it; alice (group ``sre``: the Agent's approvers, bound to the
   chart's ``gatehouse-approver`` role) approves it with ``kubectl gatehouse approve``: the tool runs exactly once
   (the tools server's journal of the calls it ran);
3. two calls wait while the Agent is edited (sqlite on its claim: a Recreate rollout by the real Deployment
   controller); on the new pod one is approved with ``kubectl gatehouse approve`` and runs once, the other is
   denied with ``kubectl gatehouse deny`` and nothing runs;
4. the Agent moves to Postgres (a real server, its URL in a Secret) with two replicas; a call waits into a
   RollingUpdate and is approved halfway through it: it runs once;
5. the Slack bridge, switched on by its chart value, runs and is Ready;
6. the Agent deleted: the real garbage collector removes its children.

Service names resolve through the stand-in's own ``/etc/hosts`` (no kube-proxy, no DNS): docs/control-plane.md.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.kube.objects import approval_name
from tests.support.cluster import Cluster
from tests.support.cluster.chart import CHART, Release, helm
from tests.support.cluster.operators import wait
from tests.support.kubelet.clusternode import ClusterNode
from tests.support.kubelet.fixture import require
from tests.support.postgres import find_bin_dir, running_postgres
from tests.support.runtime import request_ids, status_text

pytestmark = pytest.mark.e2e

NS = "default"  # the example's own namespace
AGENT = "file-manager"
EXAMPLE = Path(__file__).parents[2] / "examples" / "file-manager"
CLIENT = "a2a-client"
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
FINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED")
TOKEN_DIR = "/var/run/secrets/gatehouse.dev/a2a"  # the client pod's token for Gatehouse (docs/operator.md)
# The in-cluster client: one A2A call (SendMessage) with its ServiceAccount's token for Gatehouse to the Agent's
# Service by name, then GetTask until the task is final; each step one JSON line on stdout. The token file is read on
# every call (the kubelet renews it). A connection refused or a name that does not resolve yet is retried (nothing was
# sent). With a third argument it then sends the same message with its API-server token and reports the HTTP status.
# The pod then idles, so the stand-in does not restart it.
CLIENT_SCRIPT = """
import json, sys, time, urllib.error, urllib.request, uuid
URL = sys.argv[1]
FOR_GATEHOUSE = "TOKEN_DIR/token"
FOR_THE_API = "/var/run/secrets/kubernetes.io/serviceaccount/token"
def call(method, params, token_file=FOR_GATEHOUSE):
    token = open(token_file).read().strip()
    body = json.dumps({"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}).encode()
    req = urllib.request.Request(URL, body, {"Content-Type": "application/json", "A2A-Version": "1.0",
                                             "Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as reply:
        return json.load(reply)
def out(kind, **fields):
    print(json.dumps({"kind": kind, **fields}), flush=True)
message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": sys.argv[2]}]}
while True:
    try:
        reply = call("SendMessage", {"message": message})
        break
    except urllib.error.URLError as exc:
        if not isinstance(exc.reason, OSError):
            raise
        out("retry", error=repr(exc))
        time.sleep(0.5)
task = reply["result"]["task"]
out("sent", task=task)
if len(sys.argv) > 3:
    again = {**message, "messageId": str(uuid.uuid4())}
    try:
        call("SendMessage", {"message": again}, FOR_THE_API)
        out("api-token", status=200)
    except urllib.error.HTTPError as exc:
        out("api-token", status=exc.code)
while task["status"]["state"] not in FINAL_STATES:
    time.sleep(0.5)
    try:
        task = call("GetTask", {"id": task["id"]})["result"]
    except (OSError, KeyError) as exc:  # a rollout: the Service's pod is being replaced
        out("retry", error=repr(exc))
out("done", task=task)
time.sleep(10 ** 7)
""".replace("FINAL_STATES", repr(FINAL)).replace("TOKEN_DIR", TOKEN_DIR)


@pytest.fixture(scope="module")
def node(cluster: Cluster, chart: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterNode]:
    require()  # root, network and mount namespaces (skips, or fails under CI, with the reason)
    running = ClusterNode(cluster, tmp_path_factory.mktemp("node"))
    running.start()
    yield running
    running.stop()


class Story:
    def __init__(self, cluster: Cluster, chart: Release, node: ClusterNode) -> None:
        self.cluster, self.chart, self.node = cluster, chart, node
        self.calls = 0

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = self.cluster.kubectl(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def rollout(self, deployment: str, namespace: str = NS, timeout: int = 120) -> None:
        done = self.cluster.kubectl("rollout", "status", f"deployment/{deployment}", "-n", namespace,
                                    f"--timeout={timeout}s", timeout=timeout + 10)
        assert done.returncode == 0, f"{deployment}: {done.stdout}{done.stderr}\n{self.node.describe()}"

    def agent(self) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", "agent", AGENT, "-n", NS, "-o", "json")))

    def condition(self, type_: str) -> dict[str, Any]:
        return next((c for c in self.agent().get("status", {}).get("conditions", []) if c["type"] == type_), {})

    def ask(self, text: str, *, try_api_token: bool = False) -> str:
        """An in-cluster client pod sends ``text`` (``try_api_token``: then again with its API-server token);
        returns the pod's name. Its token for Gatehouse is projected as docs/operator.md's client pod shows."""
        self.calls += 1
        name = f"{CLIENT}-{self.calls}"
        command = ["python3", "-c", CLIENT_SCRIPT, f"http://{AGENT}.{NS}.svc.cluster.local:8080/", text]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
               "spec": {"serviceAccountName": CLIENT, "restartPolicy": "Never", "securityContext": RESTRICTED,
                        "containers": [{"name": "client", "image": "python:3.11-slim", "securityContext":
                                        CONTAINER_RESTRICTED, "command": command + (["probe"] if try_api_token else []),
                                        "volumeMounts": [{"name": "gatehouse-token", "mountPath": TOKEN_DIR,
                                                          "readOnly": True}]}],
                        "volumes": [{"name": "gatehouse-token", "projected": {"sources": [{"serviceAccountToken": {
                            "audience": "gatehouse.dev/a2a", "expirationSeconds": 600, "path": "token"}}]}}]}}
        self.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        return name

    def lines(self, pod: str) -> list[dict[str, Any]]:
        try:
            text = self.node.logs(pod, namespace=NS)
        except LookupError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def token(self, pod: str) -> tuple[str, dict[str, Any]]:
        """The client pod's token for Gatehouse, as its file holds it now, and its claims (read, not verified)."""
        token = (self.node.volume_path(pod, "gatehouse-token", NS) / "token").read_text()
        payload = token.split(".")[1]
        return token, dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))

    def step(self, pod: str, kind: str, timeout: float = 60) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def seen() -> bool:
            found[:] = [line for line in self.lines(pod) if line["kind"] == kind]
            return bool(found)

        try:
            wait(f"{pod}: {kind}", seen, timeout=timeout)
        except AssertionError:
            print(self.node.logs(pod, namespace=NS), self.runtime_logs())
            raise
        return dict(found[-1].get("task") or found[-1])

    def paused(self, pod: str) -> str:
        task = self.step(pod, "sent")
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        (request,) = request_ids(task)
        return approval_name(AGENT, request)

    def phase(self, approval: str) -> str:
        got = self.cluster.kubectl("get", "toolapproval", approval, "-n", NS, "-o", "jsonpath={.status.phase}")
        return got.stdout.strip()

    def vote(self, verb: str, approval: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """``kubectl gatehouse approve|deny`` as alice, with her own client certificate."""
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig("alice")),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run([str(self.cluster.kubectl_path), "gatehouse", verb, approval, "-n", NS, *extra],
                              capture_output=True, text=True, env=env, timeout=120)

    def sandbox(self) -> Path:
        (tools,) = [p for p in self.node.pods(NS) if p.deployment == "file-tools" and not p.terminating]
        return self.node.volume_path(tools.name, "sandbox", NS)

    def tool_calls(self) -> list[dict[str, Any]]:
        """Every tool call the tools server ran: its journal (``--journal``, one JSON line per executed call)."""
        (tools,) = [p for p in self.node.pods(NS) if p.deployment == "file-tools" and not p.terminating]
        journal = self.node.volume_path(tools.name, "tmp", NS) / "journal.jsonl"
        return [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []

    def deletes(self) -> list[str]:
        return [c["args"]["path"] for c in self.tool_calls() if c["tool"] == "delete_file"]

    def runtime_logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{self.node.logs(p.name, namespace=NS)[-3000:]}"
                         for p in self.node.pods(NS) if p.deployment == AGENT)


def test_the_platform_story_on_the_real_control_plane(cluster: Cluster, chart: Release, node: ClusterNode,
                                                      tmp_path: Path) -> None:
    s = Story(cluster, chart, node)
    started = time.monotonic()

    def mark(what: str) -> None:
        print(f"\n{time.monotonic() - started:6.1f} s  {what}", flush=True)

    # The chart's operator, as pods on the node: two replicas, one leads.
    s.rollout(f"{chart.fullname}-operator", chart.namespace)
    listed = json.loads(s.kubectl("get", "pods", "-n", chart.namespace, "-l", "app.kubernetes.io/component=operator",
                                  "-o", "json"))["items"]
    operators = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
    replicas = json.loads(s.kubectl("get", "deployment", f"{chart.fullname}-operator", "-n", chart.namespace,
                                    "-o", "json"))["spec"]["replicas"]
    assert len(operators) == replicas >= 2 and {p["spec"]["nodeName"] for p in operators} == {node.name}
    names = [p["metadata"]["name"] for p in operators]

    def leaders() -> list[str]:
        return [n for n in names if "and acts" in node.logs(n, namespace=chart.namespace)]

    # (The Lease's holderIdentity starts with the host's name, not the pod's: the stand-in gives pods no UTS namespace.)
    wait("one operator pod leading", leaders, timeout=60)
    assert len(leaders()) == 1, [node.logs(n, namespace=chart.namespace)[-2000:] for n in names]

    mark("operator pods running, one leads")
    s.kubectl("create", "serviceaccount", CLIENT, "-n", NS)
    s.kubectl("create", "rolebinding", "sre-approves", "-n", NS, "--clusterrole=gatehouse-approver", "--group=sre")
    # The example as shipped; its tools server also keeps a journal of the calls it runs, for counting them.
    tools = list(yaml.safe_load_all((EXAMPLE / "tools-server.yaml").read_text()))
    tools[0]["spec"]["template"]["spec"]["containers"][0]["command"] += ["--journal", "/tmp/journal.jsonl"]
    for stem in ("modelconfig", "mcp-server", "agent"):
        s.kubectl("apply", "-f", str(EXAMPLE / f"{stem}.yaml"))
    s.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(tools))
    s.rollout("file-tools")
    s.rollout(AGENT)
    wait("the Agent Ready", lambda: s.condition("Ready").get("status") == "True", timeout=90)
    assert s.condition("AdmissionPolicy").get("status") == "True", s.condition("AdmissionPolicy")

    mark("example applied, Agent Ready")
    # 1. A pause over A2A from an in-cluster client pod, with its token for Gatehouse (the stand-in asked TokenRequest
    # for the projection's audience and lifetime, bound to the pod); its API-server token is refused.
    first = s.ask("delete old.txt", try_api_token=True)
    approval = s.paused(first)
    assert s.step(first, "api-token")["status"] == 401, s.lines(first)
    issued, claims = s.token(first)
    assert claims["aud"] == ["gatehouse.dev/a2a"] and claims["exp"] - claims["iat"] == 600, claims
    bound = claims["kubernetes.io"]
    assert bound["pod"]["name"] == first and bound["serviceaccount"]["name"] == CLIENT, claims
    # Renewed as at 80 % of its lifetime: the file holds a new token, and the client's next calls (GetTask until the
    # task is done, below) send it.
    node.refresh_tokens(first, NS)
    renewed, again = s.token(first)
    assert renewed != issued and again["aud"] == ["gatehouse.dev/a2a"] and again["iat"] >= claims["iat"], again
    # alice approves with kubectl: the tool runs once.
    wait("the ToolApproval Pending", lambda: s.phase(approval) == "Pending", timeout=30)
    listed = s.kubectl("get", "toolapprovals", "-n", NS)
    assert approval in listed and "Pending" in listed, listed
    assert (s.sandbox() / "old.txt").exists()
    voted = s.vote("approve", approval)
    assert voted.returncode == 0, voted.stdout + voted.stderr
    done = s.step(first, "done")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED" and "Delete of old.txt: deleted" in status_text(done), done
    assert not (s.sandbox() / "old.txt").exists()
    assert s.deletes() == ["old.txt"], "the approved call ran exactly once"
    wait("Approved", lambda: s.phase(approval) == "Approved", timeout=30)

    mark("approved over kubectl, ran once")
    # 2. sqlite on its claim, Recreate: two calls wait through the rollout; on the new pod one is approved and runs
    # once, the other is denied and nothing runs.
    second, third = s.ask("delete notes.txt"), s.ask("delete report.md")
    denied, waiting = s.paused(second), s.paused(third)
    before = {p.name for p in node.pods(NS) if p.deployment == AGENT}
    s.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge", "-p",
              json.dumps({"spec": {"description": "Edited: rolls the pods."}}))
    wait("the runtime pod replaced", lambda: {p.name for p in node.pods(NS) if p.deployment == AGENT} - before,
         timeout=60)
    s.rollout(AGENT)
    assert (s.phase(denied), s.phase(waiting)) == ("Pending", "Pending")
    refused = s.vote("deny", denied, "--reason", "keep the notes")
    assert refused.returncode == 0, refused.stdout + refused.stderr + s.runtime_logs()
    voted = s.vote("approve", waiting)
    assert voted.returncode == 0, voted.stdout + voted.stderr + s.runtime_logs()
    done = s.step(third, "done", timeout=90)
    assert "Delete of report.md: deleted" in status_text(done), done
    done = s.step(second, "done", timeout=90)
    assert "delete_file" in json.dumps(done) and (s.sandbox() / "notes.txt").exists(), done
    assert s.deletes() == ["old.txt", "report.md"], "the approved call ran once, the denied one not at all"
    wait("Denied", lambda: s.phase(denied) == "Denied", timeout=30)

    mark("Recreate rollout with two calls pending: one approved, one denied")
    # 3. Postgres from a Secret, two replicas, RollingUpdate: a call waits through the rollout, then runs once.
    bin_dir = find_bin_dir()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL binaries (initdb): make postgres-bin installs them")
        pytest.skip("no PostgreSQL binaries (initdb)")
    assert node.network.subnet is not None
    with running_postgres(bin_dir, also_listen=node.gateway, allow_from=str(node.network.subnet)) as pg:
        url = pg.create_database().replace("127.0.0.1", node.gateway)
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-db", "namespace": NS},
                  "data": {"url": base64.b64encode(url.encode()).decode()}}
        s.kubectl("apply", "-f", "-", stdin=json.dumps(secret))
        s.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {
            "state": {"sqlite": None, "postgres": {"urlSecretRef": {"name": "agent-db"}}},
            "deployment": {"replicas": 2}}}))
        wait("the Deployment on Postgres with 2 replicas", lambda: json.loads(s.kubectl(
            "get", "deployment", AGENT, "-n", NS, "-o", "json"))["spec"]["replicas"] == 2, timeout=60)
        s.rollout(AGENT, timeout=180)
        strategy = json.loads(s.kubectl("get", "deployment", AGENT, "-n", NS, "-o", "json"))["spec"]["strategy"]
        assert strategy["type"] == "RollingUpdate", strategy
        mark("on Postgres, 2 replicas")
        fourth = s.ask("delete a.txt")
        pending = s.paused(fourth)
        old = {p.name for p in node.pods(NS) if p.deployment == AGENT}
        s.kubectl("patch", "agent", AGENT, "-n", NS, "--type=merge", "-p",
                  json.dumps({"spec": {"description": "Edited again: a rolling update."}}))

        def midway() -> bool:  # a new pod Ready, an old one gone or going: decided in the middle of the rollout
            pods = [p for p in node.pods(NS) if p.deployment == AGENT]
            return (any(p.name not in old and p.ready for p in pods)
                    and len([p for p in pods if p.name in old and not p.terminating]) < len(old))

        wait("the rolling update halfway", midway, timeout=120)
        assert s.phase(pending) == "Pending"
        voted = s.vote("approve", pending)
        assert voted.returncode == 0, voted.stdout + voted.stderr + s.runtime_logs()
        done = s.step(fourth, "done", timeout=90)
        assert "Delete of a.txt: deleted" in status_text(done), done
        assert s.deletes() == ["old.txt", "report.md", "a.txt"]
        assert not (s.sandbox() / "a.txt").exists()

        mark("RollingUpdate with a call pending, decided halfway")
        s.rollout(AGENT, timeout=180)
        # 5. The Slack bridge, switched on by its chart value, runs and is Ready.
        s.kubectl("create", "secret", "generic", "gatehouse-slack", "-n", chart.namespace,
                  "--from-literal=bot-token=xoxb-test", "--from-literal=signing-secret=test-signing-secret")
        upgraded = helm(cluster, "upgrade", chart.name, str(CHART), "-n", chart.namespace, "--reuse-values",
                        "--set", "slack.enabled=true", "--set", f"slack.namespaces={{{NS}}}")
        assert upgraded.returncode == 0, upgraded.stderr
        s.rollout(f"{chart.fullname}-slack", chart.namespace)
        (bridge,) = [p for p in node.pods(chart.namespace) if p.deployment == f"{chart.fullname}-slack"]
        assert bridge.ready, bridge

        mark("Slack bridge Ready")
        # 6. The Agent deleted: the real garbage collector removes its children.
        s.kubectl("delete", "agent", AGENT, "-n", NS, "--wait=true")
        wait("the runtime's Deployment and Service collected", lambda: all(
            cluster.kubectl("get", kind, AGENT, "-n", NS).returncode == 1 for kind in ("deployment", "service")),
            timeout=60)
        wait("its pods stopped", lambda: not [p for p in node.pods(NS) if p.deployment == AGENT], timeout=60)
        mark("the Agent collected")
