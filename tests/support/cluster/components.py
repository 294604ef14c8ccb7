"""The command lines of etcd and the three control-plane components, as pure functions of a cluster's layout.

The flags follow what a production control plane sets (and Kubernetes' own ``hack/local-up-cluster.sh``): TLS
everywhere but etcd's loopback client port, x509 client certificates, ServiceAccount tokens signed by their own
key with an issuer, the Node and RBAC authorizers, the admission plugins a production cluster runs, an audit log
of every request at Metadata level, and a controller-manager with per-controller ServiceAccount credentials (so
RBAC applies to the controllers too). No leader election: one of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ADMISSION_PLUGINS", "AUDIT_POLICY", "Layout", "apiserver", "controller_manager", "etcd", "scheduler"]

# The defaults a production API server runs, named so that turning one off upstream cannot pass unnoticed, plus
# NodeRestriction (what kubeadm adds) for the node stand-in's credentials.
ADMISSION_PLUGINS = (
    "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "DefaultStorageClass", "DefaultTolerationSeconds",
    "PodSecurity", "Priority", "RuntimeClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize",
    "CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction", "DefaultIngressClass",
    "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook",
    "ResourceQuota", "NodeRestriction",
)
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
"""
SERVICE_CIDR = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclass(frozen=True)
class Layout:
    """Where one cluster keeps its files, and its ports (all on 127.0.0.1)."""

    root: Path
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    controller_manager_port: int
    scheduler_port: int

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    def kubeconfig(self, user: str) -> Path:
        return self.root / f"{user}.kubeconfig"

    def log(self, component: str) -> Path:
        return self.root / "logs" / f"{component}.log"

    @property
    def audit_log(self) -> Path:
        return self.root / "logs" / "audit.log"


def etcd(binary: Path, layout: Layout) -> list[str]:
    client = f"http://127.0.0.1:{layout.etcd_port}"
    peer = f"http://127.0.0.1:{layout.etcd_peer_port}"
    return [
        str(binary), "--name=gatehouse", f"--data-dir={layout.root / 'etcd'}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=gatehouse={peer}",
        # A test cluster lives minutes; fsync on a shared disk only slows every write.
        "--unsafe-no-fsync", "--log-level=warn",
    ]


def apiserver(binary: Path, layout: Layout, advertise_address: str | None = None) -> list[str]:
    pki = layout.pki
    args = [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{layout.etcd_port}",
        "--bind-address=127.0.0.1" if advertise_address is None else "--bind-address=0.0.0.0",
        f"--secure-port={layout.apiserver_port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        # A node's name need not resolve (the real node's does not): reach kubelets at their InternalIP first.
        "--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
        f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-issuer={ISSUER}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
        f"--audit-policy-file={layout.root / 'audit-policy.yaml'}", f"--audit-log-path={layout.audit_log}",
        # As kubeadm sets it: privileged pods exist (CNI, kube-proxy); Pod Security decides where they may run.
        "--allow-privileged=true", "--profiling=false",
    ]
    if advertise_address is not None:
        args.append(f"--advertise-address={advertise_address}")
    return args


def controller_manager(binary: Path, layout: Layout) -> list[str]:
    pki, kubeconfig = layout.pki, layout.kubeconfig("controller-manager")
    return [
        str(binary), f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--use-service-account-credentials", "--controllers=*", "--leader-elect=false",
        f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--bind-address=127.0.0.1", f"--secure-port={layout.controller_manager_port}",
        f"--cert-dir={layout.root / 'controller-manager'}",
    ]


def scheduler(binary: Path, layout: Layout) -> list[str]:
    kubeconfig = layout.kubeconfig("scheduler")
    return [
        str(binary), f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={layout.scheduler_port}",
    ]
