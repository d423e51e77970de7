"""The web page's TLS certificate: a self-signed one per controller, made by its config apply, kept while it fits.

`python -m slurm_plugin.webui.certificate --certificate PEM --key PEM --owner USER` (run as root by assets/bootstrap/
elastic-slurm-config-apply when clusters[].rest_api is on, with rest-api.env's paths) makes the pair when it is
missing, expires within 30 days, or does not name this machine: an ECDSA P-256 key (mode 0400, owned by USER: the page's server
runs as `slurmrestd` and only reads it) and a certificate valid 397 days (the longest browsers accept) for the
machine's host name, its addresses, `localhost` and 127.0.0.1 (an SSH tunnel's end). It prints the certificate's
SHA-256 fingerprint, the value a user compares with what the browser shows before trusting it (docs/rest-api.md).
A site with its own certificate puts the pair there itself: one that names this machine and is not expiring is kept.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import pwd
import socket
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_DAYS = 397
RENEW_DAYS = 30
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def machine_names() -> tuple[list[str], list[IpAddress]]:
    """This machine's host name (and `localhost`), and its addresses (and 127.0.0.1)."""
    host = socket.gethostname()
    addresses: set[IpAddress] = {ipaddress.ip_address("127.0.0.1")}
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        addresses.update(ipaddress.ip_address(info[4][0]) for info in infos)
    except OSError:
        pass  # no address for the name: the certificate still names the host and localhost
    return sorted({host, "localhost"}), sorted(addresses, key=lambda a: (a.version, int(a)))


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the certificate, as browsers show it (AB:CD:...)."""
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def fits(cert: x509.Certificate, names: list[str], addresses: list[IpAddress], now: datetime.datetime) -> bool:
    """The certificate names every one of `names` and `addresses` and is valid for RENEW_DAYS more."""
    if cert.not_valid_after_utc - now < datetime.timedelta(days=RENEW_DAYS) or cert.not_valid_before_utc > now:
        return False
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(names) <= set(alt.get_values_for_type(x509.DNSName)) and set(addresses) <= set(
        alt.get_values_for_type(x509.IPAddress)
    )


def make(names: list[str], addresses: list[IpAddress], now: datetime.datetime) -> tuple[bytes, bytes]:
    """A self-signed certificate for `names` and `addresses`, and its key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])])
    san = [*(x509.DNSName(n) for n in names), *(x509.IPAddress(a) for a in addresses)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def ensure(
    cert_path: Path, key_path: Path, owner: str | None = None, now: datetime.datetime | None = None
) -> tuple[str, bool]:
    """The certificate and key fit this machine (made anew otherwise); (its fingerprint, made anew)."""
    now = now or datetime.datetime.now(datetime.UTC)
    names, addresses = machine_names()
    if cert_path.is_file() and key_path.is_file():
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            if fits(cert, names, addresses, now):
                return fingerprint(cert), False
        except ValueError:
            pass  # not a certificate: made anew
    for directory in {cert_path.parent, key_path.parent}:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    cert_pem, key_pem = make(names, addresses, now)
    uid, gid = (pwd.getpwnam(owner).pw_uid, pwd.getpwnam(owner).pw_gid) if owner else (-1, -1)
    for path, data, mode in ((key_path, key_pem, 0o400), (cert_path, cert_pem, 0o444)):
        staged = path.with_name(f".{path.name}.new")
        staged.unlink(missing_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chown(staged, uid, gid)
        os.chmod(staged, mode)
        staged.replace(path)  # the server reads the pair when it starts; config apply restarts it after a change
    return fingerprint(x509.load_pem_x509_certificate(cert_pem)), True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slurm_plugin.webui.certificate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--certificate", required=True, type=Path, metavar="PEM", help="the certificate's path")
    parser.add_argument("--key", required=True, type=Path, metavar="PEM", help="its private key's path")
    parser.add_argument("--owner", help="the account that owns the key (the page's server)")
    args = parser.parse_args(argv)
    try:
        if args.owner:
            pwd.getpwnam(args.owner)
        digest, made = ensure(args.certificate, args.key, args.owner)
    except KeyError:
        print(f"certificate: --owner: no account '{args.owner}'", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"certificate: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"{'made' if made else 'kept'} the web page's certificate, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
