"""One pod: its sandbox, volumes and containers as local processes, their probes, restarts and stop.

A :class:`Pod` runs as one asyncio task in the stand-in's loop. It waits (phase ``Pending``, retried every half
second) until everything it refers to exists -- Secrets, ConfigMaps, the ServiceAccount, claims -- then gets a network
namespace (:mod:`~tests.support.kubelet.network`), writes its volumes (:mod:`~tests.support.kubelet.volumes`), and
starts each container through the launcher (:mod:`~tests.support.kubelet.launcher`), output appended to
``<pod dir>/<container>.log``. A container that exits is restarted after a back-off (0.2 s doubling to 5 s, reset
after 10 s of running: ``CrashLoopBackOff``, compressed from the kubelet's 10 s .. 5 min); a failed liveness or
startup probe stops and restarts it. :meth:`Pod.terminate` sends SIGTERM to each container's process, then SIGKILL
to its process group after ``terminationGracePeriodSeconds`` (capped, 5 s by default); ``preStop`` hooks and init
containers are not run. Its ServiceAccount tokens -- the API server's, and one per audience and lifetime its
projected volumes ask for -- come from the node (``token_for``) and are asked for again at 80 % of their lifetime
and written in place, as the kubelet does. The Pod object in the API is rendered by
:mod:`~tests.support.kubelet.podobject`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.kubelet import envs, hosts, images, probes, volumes
from tests.support.kubelet.network import Sandbox
from tests.support.kubelet.podobject import now_iso

if TYPE_CHECKING:
    from tests.support.kubelet.node import Node

__all__ = ["LAUNCHER", "SA_DIR", "Container", "Pod", "Settings", "Waiting"]

LAUNCHER = Path(__file__).with_name("launcher.py")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
ALWAYS_READ_ONLY = ("secret", "configMap", "projected", "downwardAPI")
API_TOKEN = volumes.TokenProjection(None)  # the kube-api-access token: the API server's audience, an hour
TOKEN_REFRESH = 0.8  # a token is asked for again at this share of its lifetime (the kubelet's rule)


@dataclass(frozen=True)
class Settings:
    """Timing of the stand-in (see the module docstrings and docs/testing-pods.md)."""

    max_grace: float = 5.0  # terminationGracePeriodSeconds is capped at this
    probe_period_cap: float = 0.25  # readiness and startup probes poll at most this far apart
    backoff_base: float = 0.2
    backoff_max: float = 5.0
    node_name: str = "kubelet-stand-in"


class Waiting(Exception):
    """The pod cannot start yet (``reason``: ContainerCreating, CreateContainerConfigError, ErrImagePull...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass
class Container:
    spec: dict[str, Any]
    log: Path
    launch: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    ready: bool = False
    started: bool = False
    state: str = "waiting"
    reason: str = "ContainerCreating"
    message: str = ""
    started_at: str = ""
    last_exit: int | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])


class Pod:
    def __init__(self, node: Node, deployment: Mapping[str, Any], template: Mapping[str, Any], template_hash: str) -> None:
        meta = deployment["metadata"]
        self.node = node
        self.namespace: str = meta.get("namespace") or "default"
        self.deployment: str = meta["name"]
        self.owner_uid: str = meta.get("uid", "")
        self.hash = template_hash
        self.name = f"{self.deployment}-{template_hash}-{uuid.uuid4().hex[:5]}"
        self.template = json.loads(json.dumps(template))
        self.spec: dict[str, Any] = self.template.get("spec") or {}
        tmeta = self.template.get("metadata") or {}
        self.labels = {**(tmeta.get("labels") or {}), "pod-template-hash": template_hash}
        self.annotations = dict(tmeta.get("annotations") or {})
        self.uid = ""  # the API's, once the object is created
        # Its ServiceAccount tokens, one per (audience, lifetime) asked for: token and when to ask again (monotonic).
        self.tokens: dict[volumes.TokenProjection, tuple[str, float]] = {}
        self._objects: dict[tuple[str, str], dict[str, Any] | None] = {}  # what its volumes were written from
        self.dir = node.root / "pods" / f"{self.namespace}_{self.name}"
        self.created = time.monotonic()
        self.start_time = now_iso()
        self.sandbox: Sandbox | None = None
        self.phase = "Pending"
        self.terminating = False
        self.finished = False
        self.ready_since: float | None = None
        self.volume_paths: dict[str, Path] = {}
        self.containers = [Container(dict(c), self.dir / f"{c['name']}.log") for c in self.spec.get("containers") or []]
        self._stop = asyncio.Event()
        self.transitions: dict[str, tuple[str, str]] = {}  # condition type → (status, since): podobject.status
        self.task: asyncio.Task[None] | None = None

    # -- what others read ----------------------------------------------------------------------------

    @property
    def ip(self) -> str:
        return self.sandbox.ip if self.sandbox else ""

    @property
    def ready(self) -> bool:
        return bool(self.containers) and not self.terminating and all(c.ready for c in self.containers)

    def available(self, min_ready_seconds: float) -> bool:
        return self.ready and self.ready_since is not None and time.monotonic() - self.ready_since >= min_ready_seconds

    @property
    def service_account(self) -> str:
        return str(self.spec.get("serviceAccountName") or self.spec.get("serviceAccount") or "default")

    def facts(self) -> envs.PodFacts:
        return envs.PodFacts(self.namespace, self.name, self.uid, self.labels, self.annotations, self.service_account,
                             self.node.settings.node_name, self.ip, self.node.gateway)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.node.record("created", self)
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"pod {self.namespace}/{self.name}")

    def terminate(self, why: str = "") -> None:
        if not self.terminating:
            self.terminating = True
            self.node.record("stopping", self, why)
            self._changed()
            self._stop.set()

    def _changed(self) -> None:
        was_ready = self.ready_since is not None
        if self.ready and not was_ready:
            self.ready_since = time.monotonic()
            self.node.record("ready", self)
        elif not self.ready and was_ready:
            self.ready_since = None
            self.node.record("unready", self)
        self.node.wake()

    async def _run(self) -> None:
        supervisors: list[asyncio.Task[None]] = []
        try:
            while not self._stop.is_set():
                try:
                    await self._prepare()
                    break
                except Waiting as exc:
                    for c in self.containers:
                        c.reason, c.message = exc.reason, exc.message
                    self._changed()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), 0.5)
            if not self._stop.is_set():
                self.phase = "Running"
                supervisors = [asyncio.create_task(self._supervise(c)) for c in self.containers]
                while not self._stop.is_set():
                    due = self.next_token_refresh()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), None if due is None else
                                               max(due - time.monotonic(), 0.0) + 0.01)
                    if not self._stop.is_set():
                        try:
                            await self.refresh_tokens()
                        except Exception as exc:  # the API away for a moment: the token held is still valid
                            self.node.record("error", self, f"token refresh: {exc!r}")
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(self._stop.wait(), 5)
        except Exception as exc:  # the pod cannot run (e.g. its sandbox): it ends, the Deployment replaces it
            self.node.record("error", self, repr(exc))
            self.terminating = True
        finally:
            for task in supervisors:
                task.cancel()
            await asyncio.gather(*supervisors, return_exceptions=True)
            grace = min(float(self.spec.get("terminationGracePeriodSeconds", 30)), self.node.settings.max_grace)
            await asyncio.gather(*(self._stop_process(c, grace) for c in self.containers))
            if self.sandbox is not None:
                await asyncio.to_thread(self.node.network.remove_pod, self.sandbox)
            for path in self.volume_paths.values():
                if path.is_relative_to(self.dir):
                    shutil.rmtree(path, ignore_errors=True)  # emptyDir and friends go with the pod; logs stay
            self.finished = True
            self.node.record("stopped", self)
            self.node.wake()

    # -- preparing ----------------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        api, ns = self.node.api, self.namespace
        refs = volumes.references(self.spec)
        objects: dict[tuple[str, str], dict[str, Any] | None] = {}
        for kind, names in (("secret", refs.secrets), ("configmap", refs.configmaps)):
            plural = "secrets" if kind == "secret" else "configmaps"
            for name, optional in names.items():
                objects[(kind, name)] = obj = await api.get(f"/api/v1/namespaces/{ns}/{plural}/{name}")
                if obj is None and not optional:
                    raise Waiting("CreateContainerConfigError", f'{kind} "{name}" not found')
        if self.service_account != "default" and await api.get(
                f"/api/v1/namespaces/{ns}/serviceaccounts/{self.service_account}") is None:
            raise Waiting("ContainerCreating", f'serviceaccount "{self.service_account}" not found')
        for claim in refs.claims:
            await self.node.bind_claim(ns, claim)  # raises Waiting while the claim does not exist
        automount = self.spec.get("automountServiceAccountToken", True) is not False
        await self._request_tokens(self._wanted_tokens(automount), only_due=False)
        if self.sandbox is None:
            self.sandbox = await asyncio.to_thread(self.node.network.add_pod)
        self._objects = objects
        try:
            self._write_token_volumes(automount, everything=True)
        except volumes.MissingObject as exc:
            raise Waiting("CreateContainerConfigError", str(exc)) from None
        except volumes.UnsupportedVolume as exc:
            raise Waiting("CreateContainerConfigError", str(exc)) from None
        self.node.write_hosts(self)
        (self.dir / "resolv.conf").write_text(hosts.render_resolv_conf(ns))
        data = {key: volumes.object_data(obj, key[0]) if obj is not None else None for key, obj in objects.items()}
        for c in self.containers:
            c.launch = self._launch_spec(c, data, automount)

    def _wanted_tokens(self, automount: bool) -> list[volumes.TokenProjection]:
        wanted = volumes.token_projections(self.spec)
        if automount and API_TOKEN not in wanted:
            wanted.insert(0, API_TOKEN)
        return wanted

    async def _request_tokens(self, wanted: list[volumes.TokenProjection], only_due: bool) -> bool:
        """Ask the node for each token not held yet (``only_due``: also each past its refresh time); True if any is
        new. Refreshed at 80 % of its lifetime, as the kubelet does, so the file never holds an expired token."""
        fresh = False
        for projection in wanted:
            held = self.tokens.get(projection)
            if held is not None and (not only_due or time.monotonic() < held[1]):
                continue
            token = await self.node.token_for(self.namespace, self.service_account, projection.audience,
                                              projection.seconds, self)
            self.tokens[projection] = (token, time.monotonic() + TOKEN_REFRESH * projection.seconds)
            fresh = True
        return fresh

    def _write_token_volumes(self, automount: bool, everything: bool) -> None:
        """Write the pod's volumes (``everything``) or only those holding tokens, from the tokens held now."""
        tokens = {projection: token for projection, (token, _) in self.tokens.items()}
        facts = self.facts()
        for volume in self.spec.get("volumes") or []:
            holds_token = any("serviceAccountToken" in source
                              for source in (volume.get("projected") or {}).get("sources") or [])
            if everything or holds_token:
                self.volume_paths[volume["name"]] = volumes.write_volume(
                    volume, self.dir, self.node.root / "pvc", facts, self._objects, tokens)
        if automount:
            volumes.write_atomic(self.dir / "serviceaccount", {
                "token": (tokens[API_TOKEN].encode(), 0o644), "ca.crt": (self.node.ca_pem.encode(), 0o644),
                "namespace": (self.namespace.encode(), 0o644)})

    async def refresh_tokens(self) -> None:
        """Renew the tokens past their refresh time and write them where the pod reads them (in place)."""
        automount = self.spec.get("automountServiceAccountToken", True) is not False
        if await self._request_tokens(self._wanted_tokens(automount), only_due=True):
            self._write_token_volumes(automount, everything=False)
            self.node.record("tokens", self, "refreshed")

    def next_token_refresh(self) -> float | None:
        """When (monotonic) the first of its tokens is due, or None without tokens."""
        return min((due for _, due in self.tokens.values()), default=None)

    def _launch_spec(self, c: Container, data: Mapping[tuple[str, str], Mapping[str, bytes] | None],
                     automount: bool) -> dict[str, Any]:
        try:
            image = images.resolve(str(c.spec.get("image", "")), self.node.images)
        except images.UnknownImage as exc:
            raise Waiting("ErrImagePull", str(exc)) from None
        base = {**image.env, "PATH": image.env.get("PATH") or images.path_env(), "HOSTNAME": self.name,
                "HOME": image.home, **self.node.api_env}
        try:
            env = envs.container_env(c.spec, self.facts(), base, data)
        except envs.MissingKey as exc:
            raise Waiting("CreateContainerConfigError", str(exc)) from None
        kinds = {v["name"]: next((k for k in v if k != "name"), "") for v in self.spec.get("volumes") or []}
        mounts = []
        for vm in c.spec.get("volumeMounts") or []:
            if vm["name"] not in self.volume_paths:
                raise Waiting("CreateContainerConfigError", f'volumeMount {vm["mountPath"]}: no volume "{vm["name"]}"')
            source = self.volume_paths[vm["name"]] / vm.get("subPath", "")
            read_only = bool(vm.get("readOnly")) or kinds.get(vm["name"]) in ALWAYS_READ_ONLY
            mounts.append({"source": str(source), "target": vm["mountPath"], "readOnly": read_only})
        if automount and not any(m["target"].rstrip("/") == SA_DIR for m in mounts):
            mounts.append({"source": str(self.dir / "serviceaccount"), "target": SA_DIR, "readOnly": True})
        # The image's executables are this checkout's venv: a checkout under /tmp would vanish under the pod's fresh
        # /tmp, so it is bound back (read-only) at its own path.
        mounts += [{"source": str(p), "target": str(p), "readOnly": True} for p in images.own_files() if _under_tmp(p)]
        mounts.append({"source": str(self.dir / "hosts"), "target": "/etc/hosts", "readOnly": False})
        mounts.append({"source": str(self.dir / "resolv.conf"), "target": "/etc/resolv.conf", "readOnly": False})
        assert self.sandbox is not None
        rootfs = self.dir / f"rootfs-{c.name}"
        rootfs.mkdir(exist_ok=True)
        security = c.spec.get("securityContext") or {}
        return {
            "netns": self.sandbox.path, "rootfs": str(rootfs), "mounts": mounts,
            "workingDir": c.spec.get("workingDir") or image.workdir, "imageDirs": [image.home, image.workdir],
            "readOnlyRootFilesystem": bool(security.get("readOnlyRootFilesystem")),
            "argv": [envs.expand(str(a), env) for a in images.argv(c.spec, image)], "env": env,
        }

    # -- running -------------------------------------------------------------------------------------------

    def _spawn(self, c: Container) -> None:
        spec_file = self.dir / f"{c.name}.launch.json"
        spec_file.write_text(json.dumps(c.launch))
        with c.log.open("ab") as log:
            c.process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), "run", str(spec_file)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.node.processes.add(c.process.pid)
        c.state, c.reason, c.message, c.started_at = "running", "", "", now_iso()
        c.ready = c.started = False
        self.node.record("started", self, c.name)

    async def _exec(self, c: Container, argv: list[str], timeout: float) -> int:
        if c.process is None:
            return 1
        spec_file = self.dir / f"{c.name}.exec.json"
        spec_file.write_text(json.dumps({"argv": argv, "env": c.launch["env"], "workingDir": c.launch["workingDir"]}))
        cmd = [sys.executable, "-I", "-S", str(LAUNCHER), "exec", str(c.process.pid), str(spec_file)]
        try:
            done = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return 1
        return done.returncode

    async def _probe(self, c: Container, probe: probes.Probe) -> str | None:
        assert self.sandbox is not None
        ok = await probes.attempt(probe, self.sandbox.ip, c.spec, self.node.probe_http,
                                  lambda argv, timeout: self._exec(c, argv, timeout))
        return probe.record(ok, time.monotonic())

    async def _supervise(self, c: Container) -> None:
        try:
            await self._keep_running(c)
        except Exception as exc:  # a bug or a machine problem: visible in the history, the pod ends
            self.node.record("error", self, f"{c.name}: {exc!r}")
            self.terminate("its container could not be run")

    async def _keep_running(self, c: Container) -> None:
        """Run ``c`` until the pod stops: start, probe, restart (back-off) on exit or a failed liveness probe."""
        cap = self.node.settings.probe_period_cap
        failures_in_a_row = 0
        while True:
            self._spawn(c)
            began = time.monotonic()
            startup = probes.Probe.parse(c.spec["startupProbe"], cap) if c.spec.get("startupProbe") else None
            readiness = probes.Probe.parse(c.spec["readinessProbe"], cap) if c.spec.get("readinessProbe") else None
            liveness = probes.Probe.parse(c.spec["livenessProbe"]) if c.spec.get("livenessProbe") else None
            for probe in (startup, readiness, liveness):
                if probe is not None:
                    probe.start(began)
            verdict = await self._watch(c, startup, readiness, liveness)
            c.ready = False
            self._changed()
            if verdict != "exited":
                self.node.record("killing", self, f"{c.name}: {verdict}")
                await self._stop_process(c, min(float(self.spec.get("terminationGracePeriodSeconds", 30)),
                                                self.node.settings.max_grace))
            assert c.process is not None
            c.last_exit = c.process.returncode
            c.restarts += 1
            self.node.record("exited", self, f"{c.name}: exit {c.last_exit}")
            failures_in_a_row = 0 if time.monotonic() - began > 10 else failures_in_a_row + 1
            delay = min(self.node.settings.backoff_base * 2 ** max(0, failures_in_a_row - 1), self.node.settings.backoff_max)
            c.state, c.reason, c.message = "waiting", "CrashLoopBackOff", f"back-off {delay:.1f}s restarting {c.name}"
            self._changed()
            await asyncio.sleep(delay)

    async def _watch(self, c: Container, startup: probes.Probe | None, readiness: probes.Probe | None,
                     liveness: probes.Probe | None) -> str:
        assert c.process is not None
        while True:
            if c.process.poll() is not None:
                return "exited"
            now = time.monotonic()
            if not c.started:
                if startup is None:
                    c.started = True
                elif startup.due(now):
                    verdict = await self._probe(c, startup)
                    c.started = verdict == "success"
                    if verdict == "failure":
                        return "startup probe failed"
                if c.started and readiness is None:
                    c.ready = True
                    self._changed()
            else:
                if readiness is not None and readiness.due(now):
                    verdict = await self._probe(c, readiness)
                    if verdict is not None and c.ready != (verdict == "success"):
                        c.ready = verdict == "success"
                        self._changed()
                if liveness is not None and liveness.due(now) and await self._probe(c, liveness) == "failure":
                    return "liveness probe failed"
            await asyncio.sleep(0.05)

    async def _stop_process(self, c: Container, grace: float) -> None:
        process = c.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # the container's other processes, or all of it after the grace
        while process.poll() is None:
            await asyncio.sleep(0.02)
        self.node.processes.discard(process.pid)
        c.state, c.reason = "terminated", "Completed" if process.returncode == 0 else "Error"


def _under_tmp(path: Path) -> bool:
    return path == Path("/tmp") or Path("/tmp") in path.parents
