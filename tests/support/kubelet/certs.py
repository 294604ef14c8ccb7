"""The stand-in's cluster CA and the API server's serving certificate for the pods' network.

Pods verify the API as in a cluster: ``/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`` is this CA, and the
API listener on the bridge address presents a certificate it signed, for that IP and the usual names
(``kubernetes``, ``kubernetes.default``, ``kubernetes.default.svc``, ``kubernetes.default.svc.cluster.local``).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["API_NAMES", "ClusterCA", "make_ca"]

API_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")


def _pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


@dataclass(frozen=True)
class ClusterCA:
    certificate: str  # PEM: what pods trust (ca.crt)
    key: ec.EllipticCurvePrivateKey

    def serving(self, ip: str, names: tuple[str, ...] = API_NAMES) -> tuple[str, str]:
        """A server certificate (PEM) for ``ip`` and ``names``, signed by this CA, and its key (PEM)."""
        key = ec.generate_private_key(ec.SECP256R1())
        ca = x509.load_pem_x509_certificate(self.certificate.encode())
        now = datetime.datetime.now(tz=datetime.UTC)
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)), *(x509.DNSName(n) for n in names)]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem(key)

    def server_context(self, ip: str) -> ssl.SSLContext:
        cert, key = self.serving(ip)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain reads files only
            (Path(tmp) / "tls.crt").write_text(cert + self.certificate)
            (Path(tmp) / "tls.key").write_text(key)
            context.load_cert_chain(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
        return context


def make_ca() -> ClusterCA:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gatehouse-kubelet-ca")])
    now = datetime.datetime.now(tz=datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return ClusterCA(cert.public_bytes(serialization.Encoding.PEM).decode(), key)
