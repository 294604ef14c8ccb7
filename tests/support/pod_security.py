"""The Kubernetes Pod Security Standards, ``baseline`` and ``restricted``, as a pure checker of a pod spec.

Written out from https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the controls as of
Kubernetes 1.30-1.33, the "latest" version a namespace label ``pod-security.kubernetes.io/enforce: restricted``
applies), one function per control, each returning what breaks it::

    baseline    hostProcess, host namespaces, privileged, capabilities (a short list may be added), hostPath
                volumes, host ports, AppArmor, SELinux, /proc mount type, seccomp (not Unconfined), sysctls
    restricted  everything in baseline, plus: volume types, privilege escalation, running as non-root,
                runAsUser != 0, seccomp (RuntimeDefault or Localhost, required), capabilities (drop ALL;
                add NET_BIND_SERVICE at most)

:func:`violations` takes a Deployment, a pod template or a Pod (``metadata.annotations`` count for AppArmor) and
checks every container (init and ephemeral ones included). Windows pods (``spec.os.name: windows``) have
exceptions in the standard that are not modelled here: the runtime is a Linux image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

__all__ = ["BASELINE", "RESTRICTED", "violations"]

Level = Literal["baseline", "restricted"]
Pod = tuple[dict[str, Any], dict[str, Any]]  # (metadata, spec)

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
}
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or []:
            yield f"{field}[{container.get('name', '?')}]", container


def _sc(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("securityContext") or {}


def _contexts(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The pod's securityContext and every container's, with where each is."""
    yield "spec.securityContext", _sc(spec)
    for where, container in _containers(spec):
        yield f"{where}.securityContext", _sc(container)


# -- baseline ---------------------------------------------------------------------------------------------------


def host_process(pod: Pod) -> list[str]:
    return [f"{where}.windowsOptions.hostProcess is true" for where, sc in _contexts(pod[1])
            if (sc.get("windowsOptions") or {}).get("hostProcess")]


def host_namespaces(pod: Pod) -> list[str]:
    return [f"spec.{field} is true" for field in ("hostNetwork", "hostPID", "hostIPC") if pod[1].get(field)]


def privileged(pod: Pod) -> list[str]:
    return [f"{where}.securityContext.privileged is true" for where, c in _containers(pod[1]) if _sc(c).get("privileged")]


def baseline_capabilities(pod: Pod) -> list[str]:
    out = []
    for where, c in _containers(pod[1]):
        extra = sorted(set((_sc(c).get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES)
        if extra:
            out.append(f"{where} adds capabilities {extra}")
    return out


def host_path_volumes(pod: Pod) -> list[str]:
    return [f"volume {v.get('name')} is a hostPath" for v in pod[1].get("volumes") or [] if "hostPath" in v]


def host_ports(pod: Pod) -> list[str]:
    return [f"{where} port {p.get('containerPort')} has hostPort {p['hostPort']}"
            for where, c in _containers(pod[1]) for p in c.get("ports") or [] if p.get("hostPort")]


def app_armor(pod: Pod) -> list[str]:
    out = [f"{where}.appArmorProfile.type is {sc['appArmorProfile'].get('type')}" for where, sc in _contexts(pod[1])
           if sc.get("appArmorProfile") and sc["appArmorProfile"].get("type") not in ("RuntimeDefault", "Localhost")]
    for key, value in (pod[0].get("annotations") or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and not (value == "runtime/default" or value.startswith("localhost/")):
            out.append(f"annotation {key} is {value}")
    return out


def se_linux(pod: Pod) -> list[str]:
    out = []
    for where, sc in _contexts(pod[1]):
        options = sc.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            out.append(f"{where}.seLinuxOptions.type is {options['type']}")
        out += [f"{where}.seLinuxOptions.{field} is set" for field in ("user", "role") if options.get(field)]
    return out


def proc_mount(pod: Pod) -> list[str]:
    return [f"{where}.securityContext.procMount is {_sc(c)['procMount']}" for where, c in _containers(pod[1])
            if _sc(c).get("procMount") not in (None, "Default")]


def baseline_seccomp(pod: Pod) -> list[str]:
    return [f"{where}.seccompProfile.type is Unconfined" for where, sc in _contexts(pod[1])
            if (sc.get("seccompProfile") or {}).get("type") == "Unconfined"]


def sysctls(pod: Pod) -> list[str]:
    return [f"sysctl {s.get('name')} is not a safe one" for s in _sc(pod[1]).get("sysctls") or []
            if s.get("name") not in SAFE_SYSCTLS]


# -- restricted -------------------------------------------------------------------------------------------------


def volume_types(pod: Pod) -> list[str]:
    out = []
    for volume in pod[1].get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {volume.get('name')} is {sorted(kinds - RESTRICTED_VOLUMES)}")
    return out


def privilege_escalation(pod: Pod) -> list[str]:
    return [f"{where}.securityContext.allowPrivilegeEscalation is not false" for where, c in _containers(pod[1])
            if _sc(c).get("allowPrivilegeEscalation") is not False]


def run_as_non_root(pod: Pod) -> list[str]:
    pod_level = _sc(pod[1]).get("runAsNonRoot")
    out = []
    for where, c in _containers(pod[1]):
        own = _sc(c).get("runAsNonRoot")
        if own is False or (own is None and pod_level is not True):
            out.append(f"{where} may run as root (runAsNonRoot is not true)")
    return out


def run_as_user(pod: Pod) -> list[str]:
    return [f"{where}.runAsUser is 0" for where, sc in _contexts(pod[1]) if sc.get("runAsUser") == 0]


def restricted_seccomp(pod: Pod) -> list[str]:
    allowed = ("RuntimeDefault", "Localhost")
    pod_type = (_sc(pod[1]).get("seccompProfile") or {}).get("type")
    out = []
    if pod_type is not None and pod_type not in allowed:
        out.append(f"spec.securityContext.seccompProfile.type is {pod_type}")
    for where, c in _containers(pod[1]):
        own = (_sc(c).get("seccompProfile") or {}).get("type")
        if (own is not None and own not in allowed) or (own is None and pod_type not in allowed):
            out.append(f"{where} has no RuntimeDefault or Localhost seccomp profile")
    return out


def restricted_capabilities(pod: Pod) -> list[str]:
    out = []
    for where, c in _containers(pod[1]):
        capabilities = _sc(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            out.append(f"{where} does not drop ALL capabilities")
        extra = sorted(set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"})
        if extra:
            out.append(f"{where} adds capabilities {extra}")
    return out


Check = Callable[[Pod], list[str]]
BASELINE: dict[str, Check] = {
    "hostProcess": host_process,
    "host namespaces": host_namespaces,
    "privileged containers": privileged,
    "capabilities (baseline)": baseline_capabilities,
    "hostPath volumes": host_path_volumes,
    "host ports": host_ports,
    "AppArmor": app_armor,
    "SELinux": se_linux,
    "/proc mount type": proc_mount,
    "seccomp (baseline)": baseline_seccomp,
    "sysctls": sysctls,
}
RESTRICTED: dict[str, Check] = {
    **BASELINE,
    "volume types": volume_types,
    "privilege escalation": privilege_escalation,
    "running as non-root": run_as_non_root,
    "running as non-root user": run_as_user,
    "seccomp (restricted)": restricted_seccomp,
    "capabilities (restricted)": restricted_capabilities,
}


def _pod(obj: dict[str, Any]) -> Pod:
    if obj.get("kind") == "Pod":
        return obj.get("metadata") or {}, obj.get("spec") or {}
    template = obj["spec"]["template"] if obj.get("kind") else obj  # a workload, or a bare pod template
    return template.get("metadata") or {}, template.get("spec") or {}


def violations(obj: dict[str, Any], level: Level = "restricted") -> list[str]:
    """Every way ``obj`` (a Deployment, Pod or pod template) breaks the ``level`` profile, as "control: what"."""
    pod = _pod(obj)
    checks = RESTRICTED if level == "restricted" else BASELINE
    return [f"{name}: {problem}" for name, check in checks.items() for problem in check(pod)]
