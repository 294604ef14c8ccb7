"""Bar 4's kubectl half: a ToolApproval patch to the tool having run, and the mirror keeping up.

Against the emulated Kubernetes API of the tests (``tests.support.kube_server.serve``: kmock's emulator with the
CRDs of ``crds/``, schema and CEL validation, on 127.0.0.1 in a thread of the bench process), the bench applies the
example ModelConfig, RemoteMCPServer (pointed at the bench's demo-tools server) and Agent, and starts the default
target (``gatehouse``: authentication on) with the mirror on::

    gatehouse-runtime serve ... --kubeconfig WORK/kubeconfig --kube-namespace default \\
        --trust-kubectl-without-admission-policy

(as ``tests/kube/test_e2e.py`` does: no operator reports the admission policy as enforcing here). The bench sees
the emulator's ToolApprovals through an in-process watcher on its store (:class:`Tap`): every ADDED and MODIFIED
event with the emulator's own emit time (``time.monotonic``), so waiting adds no API requests.

1. **patch -> tool ran** (:func:`patch_path`): per iteration, a pause over A2A; the bench waits until its
   ToolApproval is Pending in the store, then sends what ``kubectl gatehouse approve`` sends
   (``toolapproval_client.cast_vote``): a merge patch of ``spec.votes`` + the caller's ballot ``{by, groups,
   action: Approve, reason}``, guarded by ``metadata.resourceVersion``, over HTTP as the emulator's admin (its
   username and groups from one SelfSubjectReview first, as the plugin does). Timed from just before the PATCH to the
   tool's line in the demo-tools journal; the task is waited for (completed) before the next one. An A2A decision
   on the same runtime is interleaved (the order alternating), for reference. p50/p90 after the warm-ups.
2. **mirror creation lag** (:func:`mirror_lag`): M more conversations paused, 40 at a time, never decided (the
   backlog's ``_hold``); for each, from its pause answered (an httpx response hook) to its ToolApproval ADDED in the
   emulator; p50/p99, the time until all M exist, and how many were still missing when the last pause was answered.
   Then the patch path again, a few iterations, with the M ToolApprovals held.

:func:`kubectl_results` reports "not available" (with why) when the test support cannot be imported, like the
operator rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import itertools
import json
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.gatehouse_adapter import EXAMPLE, GatehouseTarget
from bench.protocols import StepError, approve, pause
from bench.scenarios import JournalClock, _hold, _until_completed, client, percentile
from bench.targets import Server, Target, ToolsServer, running

__all__ = ["KubeGatehouseTarget", "Tap", "kubectl_results", "lag_stats", "mirror_lag", "mirror_steps", "not_run",
           "patch_path", "timing_stats"]

GROUP, VERSION, NS = "gatehouse.dev", "v1alpha1", "default"
TA = f"{GROUP}/{VERSION}/toolapprovals"
AGENT = "file-manager"
BENCH_AGENT = "gatehouse-bench/1"
MERGE_PATCH = "application/merge-patch+json"


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def timing_stats(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """n, p50/p90/p99/mean/min/max in milliseconds (None without samples)."""
    if not seconds:
        return {"n": 0, "p50": None, "p90": None, "p99": None, "mean": None, "min": None, "max": None}
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "p50": round(percentile(ms, 50), 2), "p90": round(percentile(ms, 90), 2),
            "p99": round(percentile(ms, 99), 2), "mean": round(sum(ms) / len(ms), 2), "min": round(min(ms), 2),
            "max": round(max(ms), 2)}


def lag_stats(answered: dict[str, float], created: dict[str, float], names: dict[str, str]) -> dict[str, Any]:
    """Creation lag per paused request: ``names`` maps a task id to its ToolApproval's name, ``answered`` a task id to
    when its pause was answered, ``created`` a ToolApproval's name to when it was ADDED (same clock). The lags of
    those that exist, and how many do not."""
    lags = [created[n] - answered[t] for t, n in names.items() if n in created and t in answered]
    return {**timing_stats(lags), "mirrored": sum(1 for n in names.values() if n in created),
            "missing": sum(1 for n in names.values() if n not in created)}


ADMIN_GROUP = "system:masters"  # the emulated API's admin, as whom the bench votes: named among the approvers


@dataclass
class KubeGatehouseTarget(GatehouseTarget):
    """The default target (``api_token`` set) with the ToolApproval mirror on, against ``kubeconfig``."""

    kubeconfig: str = ""
    manifests: list[Path] = field(default_factory=list)

    def command(self, port: int, state_dir: Path, tools_url: str, work: Path) -> list[str]:
        return [*super().command(port, state_dir, tools_url, work), "--kubeconfig", self.kubeconfig,
                "--kube-namespace", NS, "--trust-kubectl-without-admission-policy"]


@dataclass
class _Seen:
    created: float | None = None  # ADDED, emulator time (time.monotonic)
    pending: float | None = None  # first with status.phase Pending
    decided: float | None = None  # first with another phase
    obj: dict[str, Any] = field(default_factory=dict)  # the latest (the emulator never changes a stored dict)


class _Recorder:
    """Stands in for a ``_Watcher``'s queue: ``put_nowait`` runs in the emulator's loop, in its ``_emit``."""

    def __init__(self) -> None:
        self.seen: dict[str, _Seen] = {}
        # put_nowait runs on the emulator's thread, the readers on the bench's: a copy of ``seen`` taken while a new
        # name is added raised "dictionary changed size during iteration" at 10,000.
        self.lock = threading.Lock()

    def put_nowait(self, item: tuple[float, dict[str, Any]]) -> None:
        with self.lock:
            self._record(item)

    def _record(self, item: tuple[float, dict[str, Any]]) -> None:
        emitted, event = item
        obj = event.get("object") or {}
        name = (obj.get("metadata") or {}).get("name")
        if not name or event.get("type") not in ("ADDED", "MODIFIED"):
            return
        seen = self.seen.get(name)
        if seen is None:
            seen = self.seen[name] = _Seen()
        if event["type"] == "ADDED" and seen.created is None:
            seen.created = emitted
        phase = (obj.get("status") or {}).get("phase")
        if phase == "Pending" and seen.pending is None:
            seen.pending = emitted
        elif phase and phase != "Pending" and seen.decided is None:
            seen.decided = emitted
        seen.obj = obj


class Tap:
    """An in-process watcher on the emulator's ToolApprovals in ``default`` (no API request): what happened to each,
    when, by the emulator's clock (``loop.time()``, i.e. ``time.monotonic()`` in this process)."""

    def __init__(self, api: Any) -> None:
        from kmock._internal import references

        from tests.support.kube_emulator import _Watcher

        self._api = api
        self._recorder = _Recorder()
        self._watcher = _Watcher(references.resource(TA), NS, None, "", "")
        self._watcher.queue = self._recorder  # type: ignore[assignment]
        api.call(lambda: api.emulator._watchers.add(self._watcher))

    def close(self) -> None:
        self._api.call(lambda: self._api.emulator._watchers.discard(self._watcher))

    def get(self, name: str) -> _Seen | None:
        return self._recorder.seen.get(name)

    def pending(self, name: str) -> _Seen | None:
        """What the tap saw of ``name`` once it has been Pending, else None."""
        seen = self._recorder.seen.get(name)
        return seen if seen is not None and seen.pending is not None else None

    def created(self) -> dict[str, float]:
        with self._recorder.lock:
            return {n: s.created for n, s in self._recorder.seen.items() if s.created is not None}

    async def until(self, check: Callable[[], Any], timeout: float, what: str, poll: float = 0.002) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            if time.monotonic() > deadline:
                raise StepError("mirror", f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(poll)
        return found


def _manifests(tools_url: str) -> list[tuple[str, dict[str, Any]]]:
    model = yaml.safe_load((EXAMPLE / "modelconfig.yaml").read_text())
    server = yaml.safe_load((EXAMPLE / "mcp-server.yaml").read_text())
    server["spec"]["url"] = tools_url
    agent = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
    return [("modelconfigs", model), ("remotemcpservers", server), ("agents", agent)]


def _approval_name(request_id: str) -> str:
    from agent_runtime.kube.objects import approval_name

    return approval_name(AGENT, request_id)


@dataclass
class _Kube:
    """The bench's own side of the emulated API: who it is, and how it votes."""

    http: httpx.AsyncClient
    username: str
    groups: list[str]

    async def vote(self, obj: dict[str, Any]) -> httpx.Response:
        """What ``kubectl gatehouse approve`` writes (``toolapproval_client.cast_vote``)."""
        meta = obj["metadata"]
        ballot = {"by": self.username, "groups": self.groups, "action": "Approve", "reason": "bench"}
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]},
                 "spec": {"votes": [*(obj["spec"].get("votes") or []), ballot]}}
        return await self.http.patch(f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/toolapprovals/{meta['name']}",
                                     content=json.dumps(patch), headers={"Content-Type": MERGE_PATCH})


async def patch_path(server: Server, tools: ToolsServer, tap: Tap, kube: _Kube, iterations: int, warmup: int,
                     label: str) -> dict[str, Any]:
    """kubectl's vote and an A2A decision, interleaved: each from just before it is sent to the tool having run."""
    names = [f"{server.target.key}-{label}-{i}.txt" for i in range(2 * (warmup + iterations))]
    tools.touch(names)
    ran_at = JournalClock(tools.journal).ran_at
    times: dict[str, list[float]] = {"kubectl": [], "a2a": [], "patch": [], "approved": [], "pending_wait": []}
    errors: dict[str, int] = {}

    async with client() as http:
        for i in range(warmup + iterations):
            for channel in (("kubectl", "a2a") if i % 2 == 0 else ("a2a", "kubectl")):
                name = names[2 * i + (channel == "a2a")]
                try:
                    paused = await pause(http, server.endpoint, f"delete {name}")
                    if channel == "a2a":
                        sent = time.time()
                        await approve(http, server.endpoint, paused)
                        ran = await ran_at(name)
                        extra: dict[str, float] = {}
                    else:
                        ta = _approval_name(paused.token)
                        answered = time.monotonic()
                        entry = await tap.until(functools.partial(tap.pending, ta), 30.0, f"ToolApproval {ta} Pending")
                        waited = time.monotonic() - answered
                        sent, mono = time.time(), time.monotonic()
                        response = await kube.vote(entry.obj)
                        patched = time.monotonic()
                        if response.status_code != 200:
                            raise StepError("http", f"PATCH {ta}: HTTP {response.status_code}: {response.text[:200]}")
                        ran = await ran_at(name)
                        await _until_completed(http, server, paused.task_id)
                        extra = {"patch": patched - mono, "pending_wait": waited}
                        if entry.decided is not None:  # the recorder updates the entry in place
                            extra["approved"] = entry.decided - mono
                except StepError as exc:
                    errors[f"{channel}:{exc.kind}"] = errors.get(f"{channel}:{exc.kind}", 0) + 1
                    if len(errors) == 1 and sum(errors.values()) == 1:
                        _log(f"  kubectl: first error: {exc}")
                    continue
                if i >= warmup:
                    times[channel].append(ran - sent)
                    for key, value in extra.items():
                        times[key].append(value)
    return {"iterations": iterations, "warmup": warmup, "kubectl_to_tool_ms": timing_stats(times["kubectl"]),
            "a2a_to_tool_ms": timing_stats(times["a2a"]), "patch_roundtrip_ms": timing_stats(times["patch"]),
            "patch_to_approved_status_ms": timing_stats(times["approved"]),
            "pause_to_pending_ms": timing_stats(times["pending_wait"]), "errors": errors}


class _Cpu:
    """CPU seconds so far of the runtime (and its children), the emulated API's thread and the rest of the bench
    process (its client), to tell which of them was busy."""

    def __init__(self, server: Server, others: Mapping[str, int] | None = None) -> None:
        import psutil

        self._runtime = psutil.Process(server.pid)
        self._bench = psutil.Process()
        emulator = next((t for t in threading.enumerate() if t.name == "kube-emulator"), None)
        self._emulator_tid = emulator.native_id if emulator is not None else None
        # other processes by name (the real control plane's kube-apiserver and etcd: bench/kubectl_cp.py)
        self._others = {name: psutil.Process(pid) for name, pid in (others or {}).items()}

    def read(self) -> dict[str, float]:
        import psutil

        runtime = 0.0
        for proc in [self._runtime, *self._runtime.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                runtime += t.user + t.system
        total = self._bench.cpu_times()
        emulator = sum(t.user_time + t.system_time for t in self._bench.threads() if t.id == self._emulator_tid)
        out = {"runtime": runtime, "bench_client": total.user + total.system - emulator}
        if self._emulator_tid is not None:
            out["emulated_api"] = emulator
        for name, proc in self._others.items():
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                out[name] = t.user + t.system
        return out

    @staticmethod
    def used(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
        """Cores each used on average between two readings ``seconds`` apart."""
        return {k: round((after[k] - before[k]) / seconds, 2) for k in before} if seconds > 0 else {}


def mirror_steps(seen: Sequence[tuple[float, float | None]], split: float) -> dict[str, dict[str, float | None]]:
    """Where the mirror's time per ToolApproval goes, from ``(created, pending)`` emit times (in creation order):
    ``created -> pending`` (the runtime stores the object's uid, then PATCHes the status) and ``pending -> next
    created`` (its Event POSTed, the next write taken from the queue and its body built), p50 in ms, for the ones
    created before ``split`` (while the bench was still pausing) and after."""
    out: dict[str, dict[str, float | None]] = {}
    ordered = sorted(seen)
    for phase, keep in (("while_pausing", lambda t: t < split), ("after", lambda t: t >= split)):
        status = [p - c for c, p in ordered if keep(c) and p is not None]
        following = [n - p for (c, p), (n, _) in itertools.pairwise(ordered) if keep(c) and p is not None]
        out[phase] = {"created_to_pending_ms": round(percentile(status, 50) * 1000, 2) if status else None,
                      "pending_to_next_created_ms": round(percentile(following, 50) * 1000, 2) if following else None}
    return out


def _by_verb(requests: Sequence[Any]) -> dict[str, int]:
    """The emulated API's requests by verb and resource (``POST toolapprovals``, ``PATCH toolapprovals/status``)."""
    counts: dict[str, int] = {}
    for r in requests:
        if r.params.get("watch") in ("true", "1"):
            continue
        what = (r.resource.plural if r.resource is not None else "?") + (f"/{r.subresource}" if r.subresource else "")
        key = f"{str(r.method.value).upper()} {what}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


async def mirror_lag(server: Server, tools: ToolsServer, tap: Tap, held: int, concurrency: int, api: Any = None,
                     stall: float = 60.0, others: Mapping[str, int] | None = None) -> dict[str, Any]:
    """``held`` conversations paused ``concurrency`` at a time (never decided); each one's ToolApproval creation lag,
    how busy the runtime, the emulated API (or the ``others`` processes by name) and the bench's client were
    meanwhile, and the runtime's requests (the emulator's; ``api`` None: none counted here)."""
    key = server.target.key
    names = [f"{key}-mirror-{i}.txt" for i in range(held)]
    answered: dict[str, float] = {}

    async def on_response(response: httpx.Response) -> None:
        await response.aread()
        at = time.monotonic()
        with contextlib.suppress(ValueError, AttributeError):
            task = ((response.json() or {}).get("result") or {}).get("task") or {}
            if task.get("id"):
                answered[task["id"]] = at

    limits = httpx.Limits(max_connections=2 * concurrency, max_keepalive_connections=2 * concurrency)
    before = set(tap.created())
    cpu = _Cpu(server, others)
    mark = api.emulator.request_count if api is not None else 0
    cpu_start = cpu.read()
    start = time.monotonic()
    async with httpx.AsyncClient(timeout=120.0, limits=limits, event_hooks={"response": [on_response]}) as http:
        paused, errors = await _hold(http, server.endpoint, names, concurrency)
    filled = time.monotonic()
    cpu_filled = cpu.read()
    wanted = {p.task_id: _approval_name(p.token) for p in paused}
    missing_at_fill = sum(1 for n in wanted.values() if n not in tap.created())
    _log(f"  mirror: {len(paused):,} paused in {filled - start:.1f}s ({len(paused) / (filled - start):.0f}/s); "
         f"{missing_at_fill:,} ToolApprovals not yet created then")
    remaining = set(wanted.values())
    progress_at = time.monotonic()
    while remaining:  # until every one exists, or nothing new appeared for ``stall`` seconds (the ADDED times are
        # the emulator's, so polling slowly loses no precision; it only keeps the bench's own CPU off the emulator's)
        done = {n for n in remaining if (seen := tap.get(n)) is not None and seen.created is not None}
        if done:
            remaining -= done
            progress_at = time.monotonic()
        elif time.monotonic() - progress_at > stall:
            _log(f"  mirror: {len(remaining):,} ToolApprovals still missing after {stall:.0f}s without progress")
            break
        await asyncio.sleep(0.2)
    drained = time.monotonic()
    cpu_drained = cpu.read()
    requests = _by_verb(api.emulator.requests_since(mark)) if api is not None else {}
    created = tap.created()
    mine = [created[n] for n in wanted.values() if n in created and n not in before]
    lag = lag_stats(answered, created, wanted)
    pending = sum(1 for n in wanted.values() if (s := tap.get(n)) is not None and s.pending is not None)
    steps = mirror_steps([(s.created, s.pending) for n in wanted.values()
                          if (s := tap.get(n)) is not None and s.created is not None], filled)
    return {"held": held, "paused": len(paused), "pause_errors": dict(errors), "concurrency": concurrency,
            "fill_seconds": round(filled - start, 2),
            "fill_per_second": round(len(paused) / (filled - start), 1) if filled > start else None,
            "missing_when_last_paused": missing_at_fill,
            "all_mirrored_seconds": round(max(mine) - start, 2) if mine and lag["missing"] == 0 else None,
            "mirrored_per_second": round(len(mine) / (max(mine) - start), 1) if mine and max(mine) > start else None,
            "pending_status": pending, "lag_ms": {k: v for k, v in lag.items() if k not in ("mirrored", "missing")},
            "mirrored": lag["mirrored"], "missing": lag["missing"],
            "created_per_second_while_pausing": round((len(paused) - missing_at_fill) / (filled - start), 1)
            if filled > start else None,
            "created_per_second_after": round(missing_at_fill / (max(mine) - filled), 1)
            if missing_at_fill and mine and max(mine) > filled else None,
            "cores_while_pausing": _Cpu.used(cpu_start, cpu_filled, filled - start),
            "cores_after": _Cpu.used(cpu_filled, cpu_drained, drained - filled),
            "api_requests": requests, "steps": steps,
            "api_requests_per_approval": round(sum(requests.values()) / len(paused), 2) if paused and requests else None}


@contextlib.contextmanager
def _cluster(work: Path, tools_url: str) -> Iterator[tuple[Any, Path, Tap]]:
    from tests.support.kube_server import serve, write_kubeconfig

    with serve() as api:
        kubeconfig = write_kubeconfig(work / "kubeconfig", api.url)
        with httpx.Client(base_url=api.url, headers={"User-Agent": BENCH_AGENT}, timeout=30) as http:
            for plural, doc in _manifests(tools_url):
                http.post(f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{plural}", json=doc).raise_for_status()
        tap = Tap(api)
        try:
            yield api, kubeconfig, tap
        finally:
            tap.close()


async def measure(target: Target, work: Path, tools: ToolsServer, iterations: int, warmup: int, held: int,
                  concurrency: int, quiet: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The kubectl section: the patch path (:func:`patch_path`), then the mirror lag at ``held`` (:func:`mirror_lag`,
    0 skips it) and the patch path again with them held. ``quiet`` is the hygiene check, run before each part
    (sections ``kubectl`` and ``mirror``)."""
    base = work / "kubectl"
    base.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"iterations": iterations, "warmup": warmup, "held": held}
    with _cluster(base, tools.url) as (api, kubeconfig, tap):
        kube_target = KubeGatehouseTarget(key=target.key, label=f"{target.label} + ToolApproval mirror",
                                          api_token=getattr(target, "api_token", ""), kubeconfig=str(kubeconfig),
                                          approver_groups=(ADMIN_GROUP,))
        name = f"{target.key}-kubectl"
        shutil.rmtree(work / name, ignore_errors=True)  # a fresh state: a kept --work holds an earlier run's pauses
        with running(kube_target, work, tools.url, name) as server:
            async with httpx.AsyncClient(base_url=api.url, headers={"User-Agent": BENCH_AGENT}, timeout=30) as http:
                review = await http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                         json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
                review.raise_for_status()
                user = (review.json().get("status") or {}).get("userInfo") or {}
                kube = _Kube(http, user.get("username", ""), list(user.get("groups") or []))
                out["voter"] = {"username": kube.username, "groups": kube.groups}
                await asyncio.to_thread(quiet, "kubectl")
                out["patch"] = await patch_path(server, tools, tap, kube, iterations, warmup, "kubectl")
                p = out["patch"]
                _log(f"  kubectl patch -> tool ran p50 {p['kubectl_to_tool_ms']['p50']} ms, p90 "
                     f"{p['kubectl_to_tool_ms']['p90']} ms (A2A decision on the same runtime p50 "
                     f"{p['a2a_to_tool_ms']['p50']} ms; PATCH round trip p50 {p['patch_roundtrip_ms']['p50']} ms); "
                     f"errors {p['errors'] or 0}")
                if held > 0:
                    await asyncio.to_thread(quiet, "mirror")
                    out["mirror"] = await mirror_lag(server, tools, tap, held, concurrency, api)
                    m = out["mirror"]
                    _log(f"  mirror: {m['mirrored']:,}/{m['paused']:,} ToolApprovals, creation lag p50 "
                         f"{m['lag_ms']['p50']} ms, p99 {m['lag_ms']['p99']} ms, max {m['lag_ms']['max']} ms; all in "
                         f"{m['all_mirrored_seconds']}s ({m['mirrored_per_second']}/s); created "
                         f"{m['created_per_second_while_pausing']}/s while pausing, {m['created_per_second_after']}/s "
                         f"after; per ToolApproval {m['steps']}; cores while pausing {m['cores_while_pausing']}, "
                         f"after {m['cores_after']}; API "
                         f"requests {m['api_requests']}")
                    probes = max(5, iterations // 2)
                    out["patch_at_held"] = await patch_path(server, tools, tap, kube, probes, min(warmup, 2),
                                                            f"kubectl-held{held}")
                    q = out["patch_at_held"]
                    _log(f"  kubectl with {held:,} held: patch -> tool ran p50 {q['kubectl_to_tool_ms']['p50']} ms, "
                         f"p90 {q['kubectl_to_tool_ms']['p90']} ms; errors {q['errors'] or 0}")
                out["rss_mb"] = round(server.rss_mb(), 1)
        out["api_requests"] = api.emulator.request_count
    return out


def not_run(reason: str) -> dict[str, Any]:
    return {"reason": reason}


async def kubectl_results(target: Target, work: Path, tools: ToolsServer, iterations: int, warmup: int,
                          held: int, concurrency: int, quiet: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The kubectl section's results (:func:`measure`), or ``{"reason": ...}`` when it cannot run (the tests'
    emulated API is not importable) or failed."""
    for module in ("kmock", "kubernetes", "tests.support.kube_server"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return not_run(f"kubectl bench not available ({module} is not importable)")
    try:
        return await measure(target, work, tools, iterations, warmup, held, concurrency, quiet)
    except (RuntimeError, OSError, StepError, httpx.HTTPError, TimeoutError) as exc:
        _log("kubectl bench failed:\n" + "".join(traceback.format_exc(limit=8)))
        return not_run(f"kubectl bench failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

