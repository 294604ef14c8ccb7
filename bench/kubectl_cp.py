"""Bar 4's kubectl half on the real control plane (issue 40, bar 5), beside the emulator's (``bench/kubectl_path.py``).

On a fresh real control plane (``bench/control_plane.py``: charts/gatehouse installed by helm, so its CRDs, RBAC and
the ToolApproval ValidatingAdmissionPolicy are the API server's; one node, cordoned), as a platform team runs it:

- the chart's operator (``control_plane.Operator``: the chart's command and environment, its ServiceAccount's token)
  runs throughout, as in a cluster;
- the bench applies the example ModelConfig, RemoteMCPServer (pointed at the bench's demo tools) and Agent (the
  example's approvers, group ``sre``, and the bench's principal) in ``default``, binds ``gatehouse-approver`` to the
  group ``sre`` there, and waits for the Agent ``Accepted`` with ``AdmissionPolicy=True`` (the chart's policy
  enforcing, so kubectl votes count without ``--trust-kubectl-without-admission-policy``);
- the default target (``gatehouse``: authentication on) runs with the mirror on, its only Kubernetes credential a
  token of the ServiceAccount the operator made for the Agent (``--kubeconfig``, ``--kube-namespace default``), so
  the operator's RBAC decides what the mirror may write;
- the voter is ``alice`` (group ``sre``, her client certificate): what ``kubectl gatehouse approve`` sends, a merge
  patch of the ToolApproval's votes guarded by its resourceVersion, through the API server's admission policy.

The bench sees ToolApprovals through a watch (:class:`WatchTap`: list, then watch, as the admin, in a thread), each
event timed when it arrives, so the creation lag is what ``kubectl get toolapprovals -w`` would show, the watch's
delivery included; the emulator's tap reads its store in process, with no delivery. The same two measurements as
the emulator's section, with the same code (``kubectl_path.patch_path`` and ``kubectl_path.mirror_lag``): the
patch to the tool having run, interleaved with A2A decisions; the creation lag of ``held`` ToolApprovals, then the
patch path again with them held. The runtime's requests in the mirror's window come from the API server's audit
log (its ServiceAccount's), the cores from kube-apiserver's and etcd's processes.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import control_plane as cpl
from bench.gatehouse_adapter import AUTH_PRINCIPAL, EXAMPLE, GatehouseTarget
from bench.kubectl_path import AGENT, BENCH_AGENT, GROUP, NS, VERSION, Tap, _Kube, _Recorder, mirror_lag, not_run, patch_path
from bench.protocols import StepError
from bench.targets import Target, ToolsServer, running

__all__ = ["ClusterGatehouseTarget", "WatchTap", "kubectl_cp_results", "measure"]

VOTER = "alice"  # the cluster's user in group sre (tests/support/cluster/launcher.USERS)
APPROVERS_GROUP = "sre"


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class ClusterGatehouseTarget(GatehouseTarget):
    """The default target with the ToolApproval mirror on, against a real API server with the Agent's own
    ServiceAccount token (``kubeconfig``); no ``--trust-kubectl-without-admission-policy``: the chart's policy
    enforces, and the operator says so on the Agent."""

    kubeconfig: str = ""
    namespace: str = NS

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        return [*super().command(port, state_dir, tools_url, work), "--kubeconfig", self.kubeconfig,
                "--kube-namespace", self.namespace]


class WatchTap(Tap):
    """:class:`kubectl_path.Tap` over a real API server: a watch of the ToolApprovals in ``default``, each event timed
    on arrival (``time.monotonic()``, the bench's clock, as the emulator's tap)."""

    def __init__(self, kubeconfig: Path) -> None:  # no super().__init__: that one taps the emulator's store
        self._recorder = _Recorder()
        self._watch = cpl.Watch(kubeconfig, f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/toolapprovals",
                                self._recorder.put_nowait)

    def close(self) -> None:
        self._watch.close()

    @property
    def retries(self) -> int:
        return self._watch.retries


def _manifests(tools_url: str) -> list[tuple[str, dict[str, Any]]]:
    model = yaml.safe_load((EXAMPLE / "modelconfig.yaml").read_text())
    server = yaml.safe_load((EXAMPLE / "mcp-server.yaml").read_text())
    server["spec"]["url"] = tools_url
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    approvers = agent["spec"]["approval"].setdefault("approvers", {})  # as the target's own copy (gatehouse_adapter)
    approvers["users"] = [*approvers.get("users", []), AUTH_PRINCIPAL]
    return [("modelconfigs", model), ("remotemcpservers", server), ("agents", agent)]


def _condition(admin: httpx.Client, kind: str) -> str:
    reply = admin.get(f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/agents/{AGENT}")
    conditions = ((reply.json() if reply.status_code == 200 else {}).get("status") or {}).get("conditions") or []
    return next((str(c.get("status")) for c in conditions if c.get("type") == kind), "")


def _prepare(cp: cpl.ControlPlane, tools_url: str, timeout: float = 120.0) -> None:
    """The example applied, sre bound to gatehouse-approver, the Agent Accepted with its admission policy enforcing."""
    made = cp.cluster.kubectl("create", "rolebinding", "sre-approves", "-n", NS, "--clusterrole=gatehouse-approver",
                              f"--group={APPROVERS_GROUP}")
    if made.returncode != 0:
        raise RuntimeError(f"rolebinding: {made.stderr.strip()}")
    with cp.admin() as admin:
        for plural, doc in _manifests(tools_url):
            admin.post(f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{plural}", json=doc).raise_for_status()
        deadline = time.monotonic() + timeout
        while not (_condition(admin, "Accepted") == "True" and _condition(admin, "AdmissionPolicy") == "True"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Agent was not Accepted with its admission policy enforcing in {timeout:.0f}s "
                                   f"(Accepted={_condition(admin, 'Accepted')!r}, "
                                   f"AdmissionPolicy={_condition(admin, 'AdmissionPolicy')!r})")
            time.sleep(0.3)


async def measure(target: Target, work: Path, tools: ToolsServer, iterations: int, warmup: int, held: int,
                  concurrency: int, quiet: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The section (the module docstring); ``quiet`` is the hygiene check, before each part (``kubectl_cp``,
    ``mirror_cp``)."""
    base = work / "kubectl-cp"
    base.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"iterations": iterations, "warmup": warmup, "held": held,
                           "node": f"{cpl.NODE}: registered, Ready, cordoned; no pod runs (the runtime is a local "
                                   f"process with the Agent's ServiceAccount token)"}
    with cpl.control_plane() as cp:
        operator = cpl.Operator(cp, base / "operator.log", {})
        try:
            await asyncio.to_thread(_prepare, cp, tools.url)
            kubeconfig = cp.cluster.service_account(NS, AGENT)
            runtime_user = cpl.service_account_user(NS, AGENT)
            kube_target = ClusterGatehouseTarget(key=target.key, label=f"{target.label} + ToolApproval mirror",
                                                 api_token=getattr(target, "api_token", ""), kubeconfig=str(kubeconfig))
            name = f"{target.key}-kubectl-cp"
            shutil.rmtree(work / name, ignore_errors=True)
            with running(kube_target, work, tools.url, name) as server:
                tap = WatchTap(cp.cluster.kubeconfig())
                server_url, tls = cpl.tls_context(cp.cluster.kubeconfig(VOTER))
                try:
                    async with httpx.AsyncClient(base_url=server_url, verify=tls, timeout=30,
                                                 headers={"User-Agent": BENCH_AGENT}) as http:
                        review = await http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={
                            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
                        review.raise_for_status()
                        user = (review.json().get("status") or {}).get("userInfo") or {}
                        kube = _Kube(http, user.get("username", ""), list(user.get("groups") or []))
                        out["voter"] = {"username": kube.username, "groups": kube.groups}
                        await asyncio.to_thread(quiet, "kubectl_cp")
                        out["patch"] = await patch_path(server, tools, tap, kube, iterations, warmup, "kubectl-cp")
                        p = out["patch"]
                        _log(f"  kubectl (real control plane) patch -> tool ran p50 {p['kubectl_to_tool_ms']['p50']} ms, "
                             f"p90 {p['kubectl_to_tool_ms']['p90']} ms (A2A p50 {p['a2a_to_tool_ms']['p50']} ms; PATCH "
                             f"round trip p50 {p['patch_roundtrip_ms']['p50']} ms); errors {p['errors'] or 0}")
                        if held > 0:
                            await asyncio.to_thread(quiet, "mirror_cp")
                            audit = cpl.EventLog(cp.cluster.layout.audit_log)
                            await asyncio.to_thread(audit.read)  # the mark
                            pids = {k: v for k, v in cp.pids().items() if k in ("kube-apiserver", "etcd")}
                            m = await mirror_lag(server, tools, tap, held, concurrency, None, others=pids)
                            events = await asyncio.to_thread(audit.read)
                            mine = cpl.by_user(events, runtime_user)
                            m["api_requests"] = cpl.breakdown(mine)
                            m["api_requests_per_approval"] = round(len(mine) / m["paused"], 2) if m["paused"] else None
                            m["api_requests_by_user"] = cpl.users(events)
                            out["mirror"] = m
                            _log(f"  mirror (real control plane): {m['mirrored']:,}/{m['paused']:,} ToolApprovals, "
                                 f"creation lag p50 {m['lag_ms']['p50']} ms, p99 {m['lag_ms']['p99']} ms, max "
                                 f"{m['lag_ms']['max']} ms; all in {m['all_mirrored_seconds']}s "
                                 f"({m['mirrored_per_second']}/s); cores while pausing {m['cores_while_pausing']}, "
                                 f"after {m['cores_after']}; runtime's requests {m['api_requests']}")
                            probes = max(5, iterations // 2)
                            out["patch_at_held"] = await patch_path(server, tools, tap, kube, probes, min(warmup, 2),
                                                                    f"kubectl-cp-held{held}")
                            q = out["patch_at_held"]
                            _log(f"  kubectl (real control plane) with {held:,} held: patch -> tool ran p50 "
                                 f"{q['kubectl_to_tool_ms']['p50']} ms, p90 {q['kubectl_to_tool_ms']['p90']} ms; "
                                 f"errors {q['errors'] or 0}")
                        out["rss_mb"] = round(server.rss_mb(), 1)
                        out["watch_retries"] = tap.retries
                finally:
                    tap.close()
        finally:
            operator.stop()
    return out


async def kubectl_cp_results(target: Target, work: Path, tools: ToolsServer, iterations: int, warmup: int,
                             held: int, concurrency: int, quiet: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The section's results (:func:`measure`), or ``{"reason": ...}`` when there is no real control plane here or
    the section failed."""
    reason = cpl.unavailable()
    if reason:
        return not_run(reason)
    try:
        return await measure(target, work, tools, iterations, warmup, held, concurrency, quiet)
    except (RuntimeError, OSError, StepError, httpx.HTTPError, TimeoutError, AssertionError) as exc:
        _log("kubectl bench on the real control plane failed:\n" + "".join(traceback.format_exc(limit=8)))
        return not_run(f"kubectl bench on the real control plane failed: {type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''}")
