"""The web page over HTTPS (issue 30: tokens never in clear text): the controller's certificate
(slurm_plugin/webui/certificate.py — made, kept while it fits, renewed when expiring or not naming the machine, key
0400 for the page's account) and the server (slurm_plugin/webui/server.py — TLS only; a plain-HTTP client or a silent
one is dropped without holding others up)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import pwd
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from slurm_plugin.webui import certificate, templates
from slurm_plugin.webui.__main__ import main as webui_main
from slurm_plugin.webui.server import WebUi, make_server, tls_context

NOW = datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC)


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "webui" / "cert.pem", tmp_path / "webui" / "key.pem"


def test_a_certificate_is_made_for_this_machine_and_kept_while_it_fits(tmp_path: Path) -> None:
    cert_path, key_path = _pair(tmp_path)
    first = certificate.ensure(cert_path, key_path, now=NOW)
    assert first.made and len(first.fingerprint.split(":")) == 32
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {socket.gethostname(), "localhost"} <= set(names.get_values_for_type(x509.DNSName))
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert cert.not_valid_after_utc - NOW > datetime.timedelta(days=certificate.VALID_DAYS - 1)
    assert certificate.ours(cert)
    key, pem = key_path.stat(), cert_path.stat()
    assert (key.st_uid, key.st_mode & 0o777, pem.st_uid, pem.st_mode & 0o777) == (0, 0o400, 0, 0o444)
    # again a day later: kept, the same fingerprint (users compare it once)
    again = certificate.ensure(cert_path, key_path, now=NOW + datetime.timedelta(days=1))
    assert (again.fingerprint, again.made) == (first.fingerprint, False)
    assert again.line() == f"kept the web page's certificate, sha256 {first.fingerprint}"
    # within 30 days of its end: a new one
    late = NOW + datetime.timedelta(days=certificate.VALID_DAYS - certificate.RENEW_DAYS + 1)
    renewed = certificate.ensure(cert_path, key_path, now=late)
    assert renewed.made and renewed.fingerprint != first.fingerprint


def test_the_key_is_the_page_accounts_to_read_and_root_s_to_change(tmp_path: Path) -> None:
    cert_path, key_path = _pair(tmp_path)
    certificate.ensure(cert_path, key_path, owner="nobody", now=NOW)
    key = key_path.stat()
    assert (key.st_uid, key.st_gid, key.st_mode & 0o777) == (0, pwd.getpwnam("nobody").pw_gid, 0o440)
    os.chmod(key_path, 0o444)  # a key anyone can read: made anew
    assert certificate.ensure(cert_path, key_path, owner="nobody", now=NOW).made


def test_our_certificate_is_replaced_when_it_does_not_name_this_machine_is_not_one_or_its_key_is_not_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_path, key_path = _pair(tmp_path)
    first = certificate.ensure(cert_path, key_path, now=NOW)
    monkeypatch.setattr(certificate.socket, "gethostname", lambda: "ip-10-1-2-3")  # a replaced controller's name
    second = certificate.ensure(cert_path, key_path, now=NOW)
    assert second.made and second.fingerprint != first.fingerprint
    key_path.write_bytes(certificate.make(["other"], [], NOW)[1])  # a crash between the two renames: mismatched
    os.chmod(key_path, 0o400)
    assert certificate.ensure(cert_path, key_path, now=NOW).made
    cert_path.write_text("not a certificate")
    assert certificate.ensure(cert_path, key_path, now=NOW).made


def _site_pair(tmp_path: Path, days: int) -> tuple[Path, Path]:
    """A site's certificate (a CA's: not ours) for a name that is not this machine's, valid `days` more."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "slurm.example.internal")])
    ca = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Example Internal CA")])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(ca).public_key(key.public_key())
        .serial_number(1).not_valid_before(NOW - datetime.timedelta(days=1))
        .not_valid_after(NOW + datetime.timedelta(days=days)).sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = _pair(tmp_path)
    cert_path.parent.mkdir(parents=True)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_a_sites_own_certificate_is_never_replaced_only_warned_about(tmp_path: Path) -> None:
    cert_path, key_path = _site_pair(tmp_path / "fine", 200)
    before = cert_path.read_bytes(), key_path.read_bytes()
    kept = certificate.ensure(cert_path, key_path, now=NOW)
    assert (kept.made, kept.site, kept.warning) == (False, True, "")
    assert (cert_path.read_bytes(), key_path.read_bytes()) == before
    assert kept.line().startswith("kept the site's certificate for the web page, sha256 ")
    ending = certificate.ensure(*_site_pair(tmp_path / "ending", 10), now=NOW)
    assert not ending.made and ending.warning == f"it ends on {(NOW + datetime.timedelta(days=10)).date()}: replace it"
    cert_path, key_path = _site_pair(tmp_path / "mismatched", 200)
    key_path.write_bytes(certificate.make(["other"], [], NOW)[1])
    with pytest.raises(certificate.CertificateError, match="is not the private key of the site's certificate"):
        certificate.ensure(cert_path, key_path, now=NOW)


def test_the_command_names_a_missing_owner_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cert_path, key_path = _pair(tmp_path)
    argv = ["--certificate", str(cert_path), "--key", str(key_path), "--owner", "no-such-account"]
    assert certificate.main(argv) == 2
    assert capsys.readouterr().err == "certificate: --owner: no account 'no-such-account'\n"
    assert not cert_path.exists()
    assert certificate.main(argv[:4]) == 0
    assert capsys.readouterr().out.startswith("made the web page's certificate, sha256 ")


def plain_http_answer(host: str, port: int) -> bytes:
    """What a plain-HTTP request to host:port gets back (b'' when the server closes or resets the connection)."""
    with socket.create_connection((host, port), timeout=10) as plain:
        plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return plain.recv(4096)
        except ConnectionResetError:
            return b""


@pytest.fixture
def https(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    cert_path, key_path = _pair(tmp_path)
    certificate.ensure(cert_path, key_path)
    ui = WebUi("http://127.0.0.1:9", templates.load(None), dict)
    server = make_server("127.0.0.1", 0, ui, tls_context(str(cert_path), str(key_path)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", cert_path
    server.shutdown()
    server.server_close()


def test_the_page_answers_over_tls_to_a_client_that_trusts_its_certificate(https: tuple[str, Path]) -> None:
    address, cert_path = https
    trusting = ssl.create_default_context(cafile=str(cert_path))
    with urllib.request.urlopen(f"https://{address}/", timeout=10, context=trusting) as page:
        assert page.status == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://{address}/", timeout=10, context=ssl.create_default_context())
    assert tls_context(str(cert_path), str(cert_path.with_name("key.pem"))).minimum_version == ssl.TLSVersion.TLSv1_2


def test_plain_http_gets_no_answer_and_a_silent_client_holds_no_one_up(https: tuple[str, Path]) -> None:
    address, cert_path = https
    host, port = address.split(":")
    assert not plain_http_answer(host, int(port)).startswith(b"HTTP/")
    with socket.create_connection((host, int(port)), timeout=10):  # connects, never starts the handshake
        started = time.monotonic()
        trusting = ssl.create_default_context(cafile=str(cert_path))
        with urllib.request.urlopen(f"https://{address}/", timeout=10, context=trusting) as page:
            assert page.status == 200
        assert time.monotonic() - started < 10


def test_the_server_refuses_half_a_pair_or_a_key_that_is_not_the_certificates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--listen", "127.0.0.1:0", "--slurmrestd", "http://127.0.0.1:9", "--manifest", str(tmp_path / "m.json")]
    assert webui_main([*base, "--certificate", str(tmp_path / "c.pem")]) == 2
    assert capsys.readouterr().err == "slurm-webui: --certificate and --key go together\n"
    assert webui_main([*base, "--certificate", "", "--key", ""]) == 2  # the unit's ${ES_WEBUI_CERT} unset
    assert capsys.readouterr().err == "slurm-webui: --certificate and --key may not be empty\n"
    cert_a, key_a = _pair(tmp_path / "a")
    cert_b, key_b = _pair(tmp_path / "b")
    certificate.ensure(cert_a, key_a)
    certificate.ensure(cert_b, key_b)
    with pytest.raises(ssl.SSLError):
        tls_context(str(cert_a), str(key_b))
