"""A pod's volumes, written to host directories that the launcher bind-mounts at each ``volumeMount``.

::

    <root>/pods/<namespace>_<pod>/volumes/<volume>/   secret, configMap, projected, downwardAPI: the kubelet's
                                                     "atomic writer" layout (``..<stamp>/`` holds the files,
                                                     ``..data`` links to it, each name links into ``..data``);
                                                     emptyDir: a plain directory, new per pod, gone with it
    <root>/pods/<namespace>_<pod>/serviceaccount/    token, ca.crt, namespace (the kube-api-access volume)
    <root>/pvc/<namespace>/<claim>/                  persistentVolumeClaim: one directory per claim, kept
                                                     across pods (and the session's pods only)
    hostPath                                         the host path itself

File modes follow ``defaultMode``/``mode`` (0644 unless set). Contents are a snapshot taken when the pod starts (a
real kubelet refreshes Secret and ConfigMap volumes within about a minute; pods here see a change after a restart or
a new rollout). Objects are fetched by the caller (:func:`references` says which); missing ones raise
:class:`MissingObject` unless the reference is ``optional``. Each ``serviceAccountToken`` projection gets the token
the caller requested for its audience and expiry (:class:`TokenProjection`, :func:`token_projections`); written
again in place (a new ``..<stamp>``, ``..data`` swapped) when the caller refreshes them, as the kubelet does, so a
container that reads the file on every call sees the new token through its bind mount.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.kubelet.envs import PodFacts, field_value

__all__ = ["MissingObject", "Refs", "TokenProjection", "UnsupportedVolume", "object_data", "references",
           "token_projections", "write_atomic", "write_volume"]

DEFAULT_MODE = 0o644
DEFAULT_TOKEN_SECONDS = 3600  # a projection's expirationSeconds when unset (the API's default)


class MissingObject(LookupError):
    """A referenced Secret, ConfigMap or claim does not exist (the pod waits, as a real one does)."""


class UnsupportedVolume(ValueError):
    """A volume type the stand-in does not emulate."""


@dataclass
class Refs:
    """What a pod spec refers to: Secret and ConfigMap names (→ optional?) and claim names."""

    secrets: dict[str, bool] = field(default_factory=dict)
    configmaps: dict[str, bool] = field(default_factory=dict)
    claims: list[str] = field(default_factory=list)

    def add(self, kind: str, name: str | None, optional: bool | None) -> None:
        if not name:
            return
        table = self.secrets if kind == "secret" else self.configmaps
        table[name] = table.get(name, True) and bool(optional)


@dataclass(frozen=True)
class TokenProjection:
    """What one ``serviceAccountToken`` projection asks for: ``audience`` (``None``: the API server's own) and its
    lifetime in seconds. Projections asking the same share one token, as the kubelet's token cache does."""

    audience: str | None
    seconds: int = DEFAULT_TOKEN_SECONDS

    @classmethod
    def of(cls, source: Mapping[str, Any]) -> TokenProjection:
        return cls(source.get("audience") or None, int(source.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS))


def token_projections(spec: Mapping[str, Any]) -> list[TokenProjection]:
    """Every distinct token the pod's projected volumes ask for, in order."""
    found: list[TokenProjection] = []
    for volume in spec.get("volumes") or []:
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "serviceAccountToken" in source:
                wanted = TokenProjection.of(source["serviceAccountToken"])
                if wanted not in found:
                    found.append(wanted)
    return found


def references(spec: Mapping[str, Any]) -> Refs:
    refs = Refs()
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            refs.add("secret", volume["secret"].get("secretName"), volume["secret"].get("optional"))
        if "configMap" in volume:
            refs.add("configmap", volume["configMap"].get("name"), volume["configMap"].get("optional"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                refs.add("secret", source["secret"].get("name"), source["secret"].get("optional"))
            if "configMap" in source:
                refs.add("configmap", source["configMap"].get("name"), source["configMap"].get("optional"))
        if "persistentVolumeClaim" in volume:
            refs.claims.append(volume["persistentVolumeClaim"]["claimName"])
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for item in container.get("envFrom") or []:
            if "secretRef" in item:
                refs.add("secret", item["secretRef"].get("name"), item["secretRef"].get("optional"))
            if "configMapRef" in item:
                refs.add("configmap", item["configMapRef"].get("name"), item["configMapRef"].get("optional"))
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if "secretKeyRef" in source:
                refs.add("secret", source["secretKeyRef"].get("name"), source["secretKeyRef"].get("optional"))
            if "configMapKeyRef" in source:
                refs.add("configmap", source["configMapKeyRef"].get("name"), source["configMapKeyRef"].get("optional"))
    return refs


def object_data(obj: Mapping[str, Any] | None, kind: str) -> dict[str, bytes]:
    """A Secret's or ConfigMap's keys as bytes (a Secret's ``stringData`` wins, as the API server merges it)."""
    if obj is None:
        return {}
    if kind == "secret":
        out = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        out.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
        return out
    out = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out


def write_atomic(directory: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    """The kubelet's atomic-writer layout in ``directory``: ``..<stamp>/<path>``, ``..data`` → it, names → ``..data``."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    stamp = ".." + datetime.datetime.now(tz=datetime.UTC).strftime("%Y_%m_%d_%H_%M_%S.%f")
    payload = directory / stamp
    payload.mkdir()
    for path, (content, mode) in files.items():
        target = payload / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode)
    (directory / "..data_tmp").symlink_to(stamp)
    os.replace(directory / "..data_tmp", directory / "..data")
    tops = {p.split("/", 1)[0] for p in files}
    for top in tops:
        link = directory / top
        if not link.is_symlink():
            link.symlink_to(f"..data/{top}")
    # What the swap left behind, as the kubelet's writer removes it: older payloads and names no longer written.
    for entry in directory.iterdir():
        if entry.name.startswith("..") and entry.name not in (stamp, "..data"):
            shutil.rmtree(entry)
        elif not entry.name.startswith("..") and entry.is_symlink() and entry.name not in tops:
            entry.unlink()


def _select(data: Mapping[str, bytes], items: list[dict[str, Any]] | None, default_mode: int, what: str,
            optional: bool) -> dict[str, tuple[bytes, int]]:
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    out = {}
    for item in items:
        if item["key"] not in data:
            if optional:
                continue
            raise MissingObject(f'{what} has no key "{item["key"]}"')
        out[item["path"]] = (data[item["key"]], int(item.get("mode", default_mode)))
    return out


def _downward(items: list[dict[str, Any]], facts: PodFacts, default_mode: int) -> dict[str, tuple[bytes, int]]:
    out = {}
    for item in items:
        if "fieldRef" not in item:
            raise UnsupportedVolume(f"downwardAPI item {item.get('path')}: only fieldRef is emulated")
        out[item["path"]] = (field_value(item["fieldRef"]["fieldPath"], facts).encode(), int(item.get("mode", default_mode)))
    return out


def write_volume(
    volume: Mapping[str, Any], pod_dir: Path, pvc_root: Path, facts: PodFacts,
    objects: Mapping[tuple[str, str], Mapping[str, Any] | None], tokens: Mapping[TokenProjection, str],
) -> Path:
    """Materialise ``volume`` for one pod; returns the host path to bind-mount. ``objects``: ``("secret"|"configmap",
    name)`` → the fetched object (``None``: absent). ``tokens``: the token requested for each projection
    (:func:`token_projections`). Called again for a volume already written, it swaps the contents in place."""
    name = str(volume["name"])
    directory = pod_dir / "volumes" / name
    modes = [int(v["defaultMode"]) for v in volume.values() if isinstance(v, dict) and "defaultMode" in v]
    mode = modes[0] if modes else DEFAULT_MODE

    def keys(kind: str, ref: str, items: list[dict[str, Any]] | None, optional: bool) -> dict[str, tuple[bytes, int]]:
        obj = objects.get((kind, ref))
        if obj is None and not optional:
            raise MissingObject(f'{"secret" if kind == "secret" else "configmap"} "{ref}" not found')
        return _select(object_data(obj, kind), items, mode, f'{kind} "{ref}"', optional)

    if "emptyDir" in volume:
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o777)  # as the kubelet makes it: writable by any container user
        return directory
    if "persistentVolumeClaim" in volume:
        claim = pvc_root / facts.namespace / str(volume["persistentVolumeClaim"]["claimName"])
        claim.mkdir(parents=True, exist_ok=True)
        return claim
    if "hostPath" in volume:
        host = Path(volume["hostPath"]["path"])
        if volume["hostPath"].get("type") in ("DirectoryOrCreate",):
            host.mkdir(parents=True, exist_ok=True)
        return host
    files: dict[str, tuple[bytes, int]] = {}
    if "secret" in volume:
        src = volume["secret"]
        files = keys("secret", src["secretName"], src.get("items"), bool(src.get("optional")))
    elif "configMap" in volume:
        src = volume["configMap"]
        files = keys("configmap", src["name"], src.get("items"), bool(src.get("optional")))
    elif "downwardAPI" in volume:
        files = _downward(volume["downwardAPI"].get("items") or [], facts, mode)
    elif "projected" in volume:
        for source in volume["projected"].get("sources") or []:
            if "secret" in source:
                s = source["secret"]
                files.update(keys("secret", s["name"], s.get("items"), bool(s.get("optional"))))
            elif "configMap" in source:
                s = source["configMap"]
                files.update(keys("configmap", s["name"], s.get("items"), bool(s.get("optional"))))
            elif "serviceAccountToken" in source:
                wanted = TokenProjection.of(source["serviceAccountToken"])
                if wanted not in tokens:
                    raise MissingObject(f"projected volume {name}: no token requested for {wanted}")
                files[source["serviceAccountToken"]["path"]] = (tokens[wanted].encode(), mode)
            elif "downwardAPI" in source:
                files.update(_downward(source["downwardAPI"].get("items") or [], facts, mode))
            else:
                raise UnsupportedVolume(f"projected volume {name}: source {sorted(source)} is not emulated")
    else:
        kinds = sorted(k for k in volume if k != "name")
        raise UnsupportedVolume(f"volume {name}: {kinds} is not emulated (docs/testing-pods.md)")
    if directory.exists() and not (directory / "..data").is_symlink():
        shutil.rmtree(directory)  # not an atomic writer's (a volume of another kind by this name): start afresh
    write_atomic(directory, files)
    return directory
