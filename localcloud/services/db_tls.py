"""TLS for the local cloud's MariaDB (the RDS stand-in): a CA made at `local up` and a server certificate for
127.0.0.1 signed by it.

The server requires TLS (`require_secure_transport`, as the accounting stack's parameter group sets on RDS) and
slurmdbd connects with the production slurmdbd.conf line `StorageParameters=SSL_CA=<file>`
(slurm_plugin/render/dbd.py), pointed at this CA instead of the RDS bundle by the render overrides
(localcloud/conf.py): so the local cloud runs slurmdbd's TLS path, certificate check included (the client library
verifies the server's certificate and its address against the CA). The key and certificates are new for each state
directory; nothing here touches the system's own MariaDB or CAs.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_DAYS = 365


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "elastic-slurm local cloud"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])  # fmt: skip


def _pem(path: Path, data: bytes, mode: int) -> None:
    path.write_bytes(data)
    path.chmod(mode)


def make_tls_files(directory: Path, ca_file: Path, cert_file: Path, key_file: Path) -> None:
    """A CA (`ca_file`, readable by everyone: slurmdbd runs as slurm) and the server's certificate and key (the key
    0600: mariadbd runs as root here); kept when they exist (a restart of the same local cloud)."""
    if ca_file.exists() and cert_file.exists() and key_file.exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_after = now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("local accounting CA"))
        .issuer_name(_name("local accounting CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _pem(key_file, key_pem, 0o600)
    _pem(cert_file, server.public_bytes(serialization.Encoding.PEM), 0o644)
    _pem(ca_file, ca.public_bytes(serialization.Encoding.PEM), 0o644)
