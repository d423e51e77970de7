"""The web page over HTTPS (issue 30: tokens never in clear text): the controller's certificate
(slurm_plugin/webui/certificate.py — made, kept while it fits, renewed when expiring or not naming the machine, key
0400 for the page's account) and the server (slurm_plugin/webui/server.py — TLS only; a plain-HTTP client or a silent
one is dropped without holding others up)."""

from __future__ import annotations

import datetime
import ipaddress
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

from slurm_plugin.webui import certificate, templates
from slurm_plugin.webui.__main__ import main as webui_main
from slurm_plugin.webui.server import WebUi, make_server, tls_context

NOW = datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC)


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "webui" / "cert.pem", tmp_path / "webui" / "key.pem"


def test_a_certificate_is_made_for_this_machine_and_kept_while_it_fits(tmp_path: Path) -> None:
    cert_path, key_path = _pair(tmp_path)
    digest, made = certificate.ensure(cert_path, key_path, now=NOW)
    assert made and len(digest.split(":")) == 32
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {socket.gethostname(), "localhost"} <= set(names.get_values_for_type(x509.DNSName))
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert cert.not_valid_after_utc - NOW > datetime.timedelta(days=certificate.VALID_DAYS - 1)
    assert key_path.stat().st_mode & 0o777 == 0o400 and cert_path.stat().st_mode & 0o777 == 0o444
    # again a day later: kept, the same fingerprint (users compare it once)
    assert certificate.ensure(cert_path, key_path, now=NOW + datetime.timedelta(days=1)) == (digest, False)
    # within 30 days of its end: a new one
    late = NOW + datetime.timedelta(days=certificate.VALID_DAYS - certificate.RENEW_DAYS + 1)
    renewed, made = certificate.ensure(cert_path, key_path, now=late)
    assert made and renewed != digest


def test_a_certificate_that_does_not_name_this_machine_or_is_not_one_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_path, key_path = _pair(tmp_path)
    first, _ = certificate.ensure(cert_path, key_path, now=NOW)
    monkeypatch.setattr(certificate.socket, "gethostname", lambda: "ip-10-1-2-3")  # a replaced controller's name
    second, made = certificate.ensure(cert_path, key_path, now=NOW)
    assert made and second != first
    cert_path.write_text("not a certificate")
    assert certificate.ensure(cert_path, key_path, now=NOW)[1]


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
    cert_a, key_a = _pair(tmp_path / "a")
    cert_b, key_b = _pair(tmp_path / "b")
    certificate.ensure(cert_a, key_a)
    certificate.ensure(cert_b, key_b)
    with pytest.raises(ssl.SSLError):
        tls_context(str(cert_a), str(key_b))
