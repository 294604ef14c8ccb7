"""Helpers for the stand-in's end-to-end tests: manifests, and the emulated API over HTTP as a user's tooling uses it."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Any

import httpx

from tests.support.kube_server import RunningEmulator

__all__ = ["GATEHOUSE", "PYTHON", "SLEEPER", "Cluster", "container", "deployment", "python", "service"]

GATEHOUSE = "ghcr.io/gatehouse-dev/gatehouse:test"  # the project's image: executables from the venv
PYTHON = "python:3.11-slim"

_PATHS = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "Pod": "/api/v1/namespaces/{ns}/pods",
}


def python(code: str) -> list[str]:
    """A container command running ``code`` (dedented) with the image's ``python3``."""
    return ["python3", "-c", textwrap.dedent(code)]


def container(name: str, command: list[str], *, image: str = PYTHON, port: int | None = None,
              mounts: Iterable[tuple[str, str]] = (), **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": image, "command": command}
    if port is not None:
        out["ports"] = [{"name": "http", "containerPort": port}]
    if mounts:
        out["volumeMounts"] = [{"name": volume, "mountPath": path} for volume, path in mounts]
    out.update(extra)
    return out


def deployment(name: str, containers: list[dict[str, Any]], *, replicas: int = 1, volumes: Iterable[dict[str, Any]] = (),
               strategy: dict[str, Any] | None = None, **pod_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, "terminationGracePeriodSeconds": 2, **pod_spec}
    if volumes:
        spec["volumes"] = list(volumes)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "strategy": strategy or {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


def service(name: str, port: int = 8080, target: int | str = "http", app: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"app": app or name}, "ports": [{"name": "http", "port": port, "targetPort": target}]}}


class Cluster:
    """Create, read, patch and delete objects over HTTP (as the admin)."""

    def __init__(self, api: RunningEmulator) -> None:
        self.http = httpx.Client(base_url=api.url, trust_env=False, timeout=10)

    @staticmethod
    def _path(kind: str, name: str | None = None, namespace: str = "default") -> str:
        base = _PATHS[kind].format(ns=namespace)
        return f"{base}/{name}" if name else base

    def create(self, *objs: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for obj in objs:
            reply = self.http.post(self._path(obj["kind"], namespace=obj["metadata"].get("namespace", "default")), json=obj)
            assert reply.status_code == 201, reply.text
            out.append(reply.json())
        return out

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        reply = self.http.get(self._path(kind, name, namespace))
        return None if reply.status_code == 404 else dict(reply.json())

    def list(self, kind: str, namespace: str = "default") -> list[dict[str, Any]]:
        return list(self.http.get(self._path(kind, namespace=namespace)).json()["items"])

    def patch(self, kind: str, name: str, body: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
        reply = self.http.patch(self._path(kind, name, namespace), json=body,
                                headers={"Content-Type": "application/merge-patch+json"})
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def delete(self, kind: str, name: str, namespace: str = "default") -> None:
        assert self.http.delete(self._path(kind, name, namespace)).status_code == 200

    def roll(self, name: str, why: str) -> dict[str, Any]:
        """Change the pod template (an annotation), as ``kubectl rollout restart`` does."""
        return self.patch("Deployment", name, {"spec": {"template": {"metadata": {"annotations": {"test/roll": why}}}}})


SLEEPER = deployment("sleeper", [container("sleep", python("import time; time.sleep(3600)"))])
