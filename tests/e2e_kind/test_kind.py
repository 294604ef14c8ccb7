"""Gatehouse on a real kind cluster: build and load the image, install the chart, apply
examples/file-manager/, pause one gated call, decide it with kubectl and see the task finish.

Needs a Docker engine, ``kind`` and ``kubectl`` (helm comes from tests/support/helm.py). Skipped, with the
reason, where any is missing. Run it with ``make e2e-kind``; ``GATEHOUSE_E2E_KEEP=1`` keeps the cluster.

What it assumes of the operator and runtime (other packages): the runtime Service is named after the
Agent and serves A2A JSON-RPC at ``/`` on its first port; ``gatehouse demo-tools --host --port`` serves the
example's MCP file tools; ToolApprovals carry ``spec.tool`` and ``status.phase``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import helm as helm_support

pytestmark = [pytest.mark.e2e, pytest.mark.e2e_kind, pytest.mark.timeout(1800)]

REPO = helm_support.REPO
IMAGE = "gatehouse:e2e"
NAMESPACE = "default"
RELEASE_NAMESPACE = "gatehouse-system"
DEMO_TOOLS_URL = f"http://file-tools.{NAMESPACE}.svc:8765/mcp"


def _missing_prerequisites() -> list[str]:
    """Why this machine cannot run a kind cluster; empty when it can."""
    missing = []
    if shutil.which("docker") is None:
        missing.append("no Docker engine: no `docker` binary on PATH")
    else:
        try:
            proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                missing.append(f"no Docker engine: `docker info` failed: {last}")
        except subprocess.TimeoutExpired:
            missing.append("no Docker engine: `docker info` timed out")
    missing += [f"no `{tool}` binary on PATH" for tool in ("kind", "kubectl") if shutil.which(tool) is None]
    return missing


@dataclass
class Cluster:
    name: str
    kubeconfig: Path
    helm: Path

    def run(
        self, *cmd: str, stdin: str | None = None, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        proc = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
        if check:
            assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return proc

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, **kw)

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    missing = _missing_prerequisites()
    if missing:
        pytest.skip("; ".join(missing))
    try:
        helm = helm_support.helm_binary()
    except helm_support.HelmUnavailable as exc:
        pytest.skip(f"no helm binary: {exc}")
    c = Cluster(f"gatehouse-e2e-{uuid.uuid4().hex[:6]}", tmp_path_factory.mktemp("kind") / "kubeconfig", helm)
    c.run("kind", "create", "cluster", "--name", c.name, "--kubeconfig", str(c.kubeconfig), "--wait", "180s")
    try:
        yield c
    finally:
        if not os.environ.get("GATEHOUSE_E2E_KEEP"):
            c.run("kind", "delete", "cluster", "--name", c.name, check=False)


def _install(c: Cluster) -> None:
    c.run("docker", "build", "-t", IMAGE, str(REPO), timeout=1200)
    c.run("kind", "load", "docker-image", IMAGE, "--name", c.name)
    c.run(str(c.helm), "install", "gatehouse", str(REPO / "charts" / "gatehouse"), "--namespace", RELEASE_NAMESPACE,
          "--create-namespace", "--set", "image.repository=gatehouse,image.tag=e2e,image.pullPolicy=Never",
          "--wait", "--timeout", "5m")


def _apply_example(c: Cluster) -> None:
    """examples/file-manager/ as a user applies it (the tools server's Deployment and Service included), with the
    image built here and the namespace of this test."""
    docs = []
    for path in sorted((REPO / "examples" / "file-manager").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            doc["metadata"]["namespace"] = NAMESPACE
            if doc["kind"] == "RemoteMCPServer":
                doc["spec"]["url"] = DEMO_TOOLS_URL
            if doc["kind"] == "Deployment":
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    container.update(image=IMAGE, imagePullPolicy="Never")
            docs.append(doc)
    c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    c.kubectl("rollout", "status", "deployment/file-tools", "-n", NAMESPACE, "--timeout=180s")
    c.kubectl("wait", "agent/file-manager", "-n", NAMESPACE, "--for=condition=Ready", "--timeout=300s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def runtime_url(cluster: Cluster) -> Iterator[str]:
    _install(cluster)
    _apply_example(cluster)
    port = cluster.kubectl("get", "service", "file-manager", "-n", NAMESPACE, "-o", "jsonpath={.spec.ports[0].port}").stdout
    local = _free_port()
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    forward = subprocess.Popen(["kubectl", "port-forward", "-n", NAMESPACE, "service/file-manager", f"{local}:{port}"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{local}/.well-known/agent-card.json", timeout=5).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(1)
        yield f"http://127.0.0.1:{local}/"
    finally:
        forward.terminate()
        forward.wait(10)


def _rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    reply = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=120).json()
    assert "error" not in reply, reply
    result = reply["result"]
    return result.get("task", result)


def _wait_for(what: str, probe: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what}")


def _patch_decision(c: Cluster, name: str, user: str, action: str, decided_by: str) -> subprocess.CompletedProcess[str]:
    patch = json.dumps({"spec": {"decision": {"action": action, "decidedBy": decided_by}}})
    return c.kubectl("patch", "toolapproval", name, "-n", NAMESPACE, "--type=merge", "-p", patch, "--as", user, check=False)


def test_one_approval_through_kubectl(cluster: Cluster, runtime_url: str) -> None:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "delete old.txt"}]}
    task = _rpc(runtime_url, "SendMessage", {"message": message})
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task

    def pending() -> list[dict[str, Any]]:
        items = cluster.get_json("toolapprovals", "-n", NAMESPACE)["items"]
        return [i for i in items if i["spec"]["tool"] == "delete_file" and "decision" not in i["spec"]]

    (approval,) = _wait_for("a ToolApproval for delete_file", pending)
    name = approval["metadata"]["name"]

    cluster.kubectl("create", "rolebinding", "e2e-approvers", "-n", NAMESPACE, "--clusterrole=gatehouse-approver", "--user=alice")
    refused = _patch_decision(cluster, name, "bob", "Approve", "bob")
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), "RBAC: bob is no approver"
    refused = _patch_decision(cluster, name, "alice", "Approve", "bob")
    assert refused.returncode != 0 and "decidedBy" in refused.stderr, "admission policy: decidedBy is the requester"
    assert _patch_decision(cluster, name, "alice", "Approve", "alice").returncode == 0
    refused = _patch_decision(cluster, name, "alice", "Deny", "alice")
    assert refused.returncode != 0 and "immutable" in refused.stderr, "admission policy: a decision is final"

    def finished() -> dict[str, Any] | None:
        current = _rpc(runtime_url, "GetTask", {"id": task["id"]})
        return current if current["status"]["state"] == "TASK_STATE_COMPLETED" else None

    _wait_for("the task to complete after the approval", finished)
    def approved() -> bool:
        return cluster.get_json("toolapproval", name, "-n", NAMESPACE).get("status", {}).get("phase") == "Approved"

    assert _wait_for("ToolApproval status Approved", approved)
