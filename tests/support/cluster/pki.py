"""The control plane's own certificates: one CA signs the API server's serving certificate and every client's.

A cluster made here trusts nothing else: kubectl, helm and each component authenticate with a client certificate
whose subject carries the user (CN) and groups (O), exactly as the API server's x509 authenticator reads them.
A separate key signs ServiceAccount tokens. Keys are EC P-256 (small and fast to make; the API server accepts
them for serving, clients and token signing alike).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Authority", "Pair", "write_signing_key"]

_VALID = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, written as PEM files."""

    cert: Path
    key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_signing_key(key_path: Path, public_path: Path) -> None:
    """A fresh key pair for signing ServiceAccount tokens: the private key in SEC1 form and the public key, the two
    forms the API server reads (it finds no public key in a PKCS#8 file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    public_path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo))


class Authority:
    """A self-signed CA in ``directory`` (``ca.crt``/``ca.key``) that issues serving and client certificates."""

    def __init__(self, directory: Path, name: str = "gatehouse-test-cluster-ca") -> None:
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(tz=datetime.UTC)
        self._cert = (
            x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pair = self._write("ca", self._cert, self._key)

    def serving(self, stem: str, hosts: list[str]) -> Pair:
        """A server certificate for each of ``hosts`` (IP addresses or DNS names)."""
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        return self._issue(stem, hosts[0], [], ExtendedKeyUsageOID.SERVER_AUTH, names)

    def client(self, stem: str, user: str, groups: list[str] | tuple[str, ...] = ()) -> Pair:
        """A client certificate for ``user`` in ``groups``, as the API server's x509 authenticator reads it."""
        return self._issue(stem, user, list(groups), ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def _issue(self, stem: str, common_name: str, groups: list[str], usage: x509.ObjectIdentifier,
               names: list[x509.GeneralName]) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
                            + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(tz=datetime.UTC)
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(self._name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return self._write(stem, builder.sign(self._key, hashes.SHA256()), key)

    def _write(self, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
        pair = Pair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key))
        pair.key.chmod(0o600)
        return pair
