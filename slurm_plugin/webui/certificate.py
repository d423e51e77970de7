"""The web page's TLS certificate: a self-signed one per controller, made by its config apply, kept while it fits.

`python -m slurm_plugin.webui.certificate --certificate PEM --key PEM --owner USER` (run as root by assets/bootstrap/
elastic-slurm-config-apply when clusters[].rest_api is on, with rest-api.env's paths) makes the pair when it is
missing, ends within 30 days, does not name this machine, or its key is not the certificate's or has the wrong owner
or mode: an ECDSA P-256 key (root's, mode 0440 for USER's group: the page's server runs as `slurmrestd` and only reads
it) and a certificate (root's, 0444) valid 397 days (the longest browsers accept) for the machine's host name, its
addresses, `localhost` and 127.0.0.1 (an SSH tunnel's end). It prints the certificate's SHA-256 fingerprint, made or
kept: the value a user compares with what the browser shows before trusting it (docs/rest-api.md).
A site's own certificate (any other than ours: `ours`) is never replaced: it is kept while its key matches it (exit 1
otherwise), with a warning once it ends within 30 days.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import pwd
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ORGANIZATION = "elastic-slurm web page"  # marks the certificates `make` makes (`ours`)
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
    if _ending(cert, now) or cert.not_valid_before_utc > now:
        return False
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(names) <= set(alt.get_values_for_type(x509.DNSName)) and set(addresses) <= set(
        alt.get_values_for_type(x509.IPAddress)
    )


def _ending(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_after_utc - now < datetime.timedelta(days=RENEW_DAYS)


def ours(cert: x509.Certificate) -> bool:
    """Made by `make` (self-signed, our organisation name): renewed here; any other is a site's, never replaced."""
    return cert.issuer == cert.subject and cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == [
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION)
    ]


def make(names: list[str], addresses: list[IpAddress], now: datetime.datetime) -> tuple[bytes, bytes]:
    """A self-signed certificate for `names` and `addresses`, and its key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64]),
        ]
    )
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


def _matching_key(cert: x509.Certificate, key_path: Path) -> bool:
    """The key file holds the certificate's private key."""
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return False
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return key.public_key().public_bytes(der, spki) == cert.public_key().public_bytes(der, spki)


def _modes(owner: str | None) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(uid, gid, mode) of the certificate (root's, world-readable) and of the key (root's, readable by the owner's
    group only: the page's account reads it and can change neither)."""
    group = pwd.getpwnam(owner).pw_gid if owner else 0
    return (0, 0, 0o444), (0, group, 0o440 if owner else 0o400)


def _as_wanted(path: Path, wanted: tuple[int, int, int]) -> bool:
    info = path.stat()
    return (info.st_uid, info.st_gid, info.st_mode & 0o777) == wanted


@dataclass(frozen=True)
class Result:
    fingerprint: str
    made: bool  # a new pair was written (the page must restart)
    site: bool = False  # a site's own certificate, kept
    warning: str = ""

    def line(self) -> str:
        what = "the site's certificate for the web page" if self.site else "the web page's certificate"
        said = f"{'made' if self.made else 'kept'} {what}, sha256 {self.fingerprint}"
        return f"{said}; warning: {self.warning}" if self.warning else said


class CertificateError(Exception):
    """A site's pair that cannot serve (one line)."""


def ensure(cert_path: Path, key_path: Path, owner: str | None = None, now: datetime.datetime | None = None) -> Result:
    """Our certificate fits this machine, its key matches it and both have their owners and modes (made anew
    otherwise); a site's certificate is kept as it is (CertificateError when its key does not match it)."""
    now = now or datetime.datetime.now(datetime.UTC)
    names, addresses = machine_names()
    cert_mode, key_mode = _modes(owner)
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes()) if cert_path.is_file() else None
    except ValueError:
        cert = None  # not a certificate: made anew
    if cert is not None and not ours(cert):
        if not _matching_key(cert, key_path):
            raise CertificateError(f"{key_path} is not the private key of the site's certificate {cert_path}")
        end = cert.not_valid_after_utc.date().isoformat()
        return Result(fingerprint(cert), False, True, f"it ends on {end}: replace it" if _ending(cert, now) else "")
    if (
        cert is not None
        and fits(cert, names, addresses, now)
        and _matching_key(cert, key_path)
        and _as_wanted(cert_path, cert_mode)
        and _as_wanted(key_path, key_mode)
    ):
        return Result(fingerprint(cert), False)
    cert_pem, key_pem = make(names, addresses, now)
    for directory in {cert_path.parent, key_path.parent}:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    for path, data, (uid, gid, mode) in ((key_path, key_pem, key_mode), (cert_path, cert_pem, cert_mode)):
        staged = path.with_name(f".{path.name}.new")
        staged.unlink(missing_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chown(staged, uid, gid)
        os.chmod(staged, mode)
        staged.replace(path)  # the server reads the pair when it starts; config apply restarts it after a change
    for directory in {cert_path.parent, key_path.parent}:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)  # both renames on disk: a crash between them leaves a mismatch the next run repairs
        finally:
            os.close(fd)
    return Result(fingerprint(x509.load_pem_x509_certificate(cert_pem)), True)


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
        result = ensure(args.certificate, args.key, args.owner)
    except KeyError:
        print(f"certificate: --owner: no account '{args.owner}'", file=sys.stderr)
        return 2
    except CertificateError as exc:
        print(f"certificate: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"certificate: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    print(result.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
