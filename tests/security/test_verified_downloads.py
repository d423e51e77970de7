"""Downloads of the image build are verified before they are installed (issue 30: the AWS CLI and the CloudWatch agent
were installed unverified). assets/image-build/aws-tools.sh's own `verify_pgp` runs here (the script sourced by bash)
on files signed by a throwaway key: a good signature passes; a tampered file, a signature by another key, or a key
whose fingerprint is not the pinned one are refused with one line. The pinned AWS CLI key is AWS's (its fingerprint
is the one AWS documents) and still valid.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "image-build" / "aws-tools.sh"
AWS_CLI_FINGERPRINT = "FB5DB77FD5C118B80511ADA8A6310ACC4672475C"  # AWS CLI user guide, "Verify the integrity ..."
CLOUDWATCH_AGENT_FINGERPRINT = "937616F3450B7D806CBD9725D58167303B789C72"  # CloudWatch user guide

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")


@dataclass(frozen=True)
class Signer:
    home: Path
    key_file: Path
    fingerprint: str

    def sign(self, path: Path, suffix: str = ".sig") -> Path:
        signature = path.with_name(path.name + suffix)
        _gpg(self.home, "--detach-sign", "--output", str(signature), str(path))
        return signature


def _gpg(home: Path, *args: str) -> str:
    done = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", "", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _signer(name: str) -> Iterator[Signer]:
    home = Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp"))  # short: gpg-agent's socket path has a length limit
    home.chmod(0o700)
    try:
        _gpg(home, "--quick-gen-key", f"{name} <{name}@example.com>", "ed25519", "sign", "never")
        colons = _gpg(home, "--with-colons", "--list-keys")
        fingerprint = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
        key_file = home / "public.asc"
        key_file.write_text(_gpg(home, "--armor", "--export", fingerprint))
        yield Signer(home, key_file, fingerprint)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def publisher() -> Iterator[Signer]:
    yield from _signer("publisher")


@pytest.fixture(scope="module")
def attacker() -> Iterator[Signer]:
    yield from _signer("attacker")


def _verify(file: Path, signature: Path, key: Path, fingerprint: str) -> subprocess.CompletedProcess[str]:
    """aws-tools.sh's verify_pgp, sourced."""
    command = f'. "{SCRIPT}"; verify_pgp "$1" "$2" "$3" "$4"'
    return subprocess.run(
        ["bash", "-c", command, "verify", str(file), str(signature), str(key), fingerprint],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def package(tmp_path: Path, publisher: Signer) -> tuple[Path, Path]:
    path = tmp_path / "amazon-cloudwatch-agent.deb"
    path.write_bytes(b"\x7fELF a package" * 1000)
    return path, publisher.sign(path)


def test_a_package_with_the_publishers_signature_is_accepted(package: tuple[Path, Path], publisher: Signer) -> None:
    result = _verify(*package, publisher.key_file, publisher.fingerprint)
    assert result.returncode == 0, result.stderr


def test_a_tampered_package_is_refused(package: tuple[Path, Path], publisher: Signer) -> None:
    path, signature = package
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01  # one bit
    path.write_bytes(bytes(data))
    result = _verify(path, signature, publisher.key_file, publisher.fingerprint)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "no good signature" in result.stderr


def test_a_package_signed_by_another_key_is_refused(
    package: tuple[Path, Path], publisher: Signer, attacker: Signer
) -> None:
    """The attacker replaces package, signature and the downloaded key: the key's fingerprint is not the pinned one."""
    path, _ = package
    forged = attacker.sign(path, ".forged.sig")
    result = _verify(path, forged, attacker.key_file, publisher.fingerprint)
    assert result.returncode == 1 and "is not the pinned key" in result.stderr
    # with the right key file but the attacker's signature: no valid signature by the pinned key
    result = _verify(path, forged, publisher.key_file, publisher.fingerprint)
    assert result.returncode == 1 and "no good signature" in result.stderr


def test_a_missing_signature_is_refused(package: tuple[Path, Path], publisher: Signer, tmp_path: Path) -> None:
    path, _ = package
    result = _verify(path, tmp_path / "absent.sig", publisher.key_file, publisher.fingerprint)
    assert result.returncode == 1


def _script_value(name: str) -> str:
    done = subprocess.run(
        ["bash", "-c", f'. "{SCRIPT}"; printf "%s" "${name}"'], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_the_pinned_aws_cli_key_is_aws_and_not_expired(tmp_path: Path) -> None:
    assert _script_value("AWS_CLI_KEY_FINGERPRINT") == AWS_CLI_FINGERPRINT
    assert _script_value("CLOUDWATCH_AGENT_KEY_FINGERPRINT") == CLOUDWATCH_AGENT_FINGERPRINT
    key = tmp_path / "aws-cli.asc"
    key.write_text(_script_value("AWS_CLI_KEY") + "\n")
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    colons = _gpg(home, "--with-colons", "--show-keys", str(key)).splitlines()
    assert [line.split(":")[9] for line in colons if line.startswith("fpr:")] == [AWS_CLI_FINGERPRINT]
    expires = int(next(line for line in colons if line.startswith("pub:")).split(":")[6])
    assert expires > time.time(), "AWS's CLI key copy expired: paste the block AWS's user guide now shows"


def test_every_download_of_a_package_goes_through_the_verification() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    installs = re.findall(r"(?:curl|dnf install -y)[^\n]*https://[^\n]*\.(?:zip|rpm|deb)\b", text)
    assert installs == [], installs  # no package is fetched or installed straight from a URL
    assert text.count('fetch_verified "') == 3  # AWS CLI, CloudWatch agent rpm, deb
