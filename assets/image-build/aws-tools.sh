#!/bin/bash
# Image build step: the AWS agents and mount helpers the boot scripts use — AWS CLI v2 (where the OS packages none),
# the CloudWatch agent (ships /var/log/slurm), amazon-efs-utils (`mount -t efs`, TLS to EFS) and the Lustre client
# (FSx for Lustre). Production only: everything here is downloaded from AWS-hosted locations the machines `make test`
# runs on cannot reach, so this step is the one build step the local cloud's image root skips (docs/local-cloud.md).
# Every package downloaded here outside a signed OS repository is verified before it is installed (issue 30):
# `verify_pgp` checks its detached signature against the publisher's key, refused unless the key's fingerprint is the
# one AWS documents (pinned below). tests/security/test_verified_downloads.py runs these functions on tampered files.
set -euo pipefail

# AWS CLI v2: the key and fingerprint AWS publishes ("Verify the integrity and authenticity of the downloaded installer
# files", https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html), pinned here; this copy's
# self-signature runs to 2027-07-01 (AWS extends it: when the build fails on an expired key, paste AWS's new block).
AWS_CLI_KEY_FINGERPRINT=FB5DB77FD5C118B80511ADA8A6310ACC4672475C
AWS_CLI_KEY=$(cat <<'KEY'
-----BEGIN PGP PUBLIC KEY BLOCK-----

mQINBF2Cr7UBEADJZHcgusOJl7ENSyumXh85z0TRV0xJorM2B/JL0kHOyigQluUG
ZMLhENaG0bYatdrKP+3H91lvK050pXwnO/R7fB/FSTouki4ciIx5OuLlnJZIxSzx
PqGl0mkxImLNbGWoi6Lto0LYxqHN2iQtzlwTVmq9733zd3XfcXrZ3+LblHAgEt5G
TfNxEKJ8soPLyWmwDH6HWCnjZ/aIQRBTIQ05uVeEoYxSh6wOai7ss/KveoSNBbYz
gbdzoqI2Y8cgH2nbfgp3DSasaLZEdCSsIsK1u05CinE7k2qZ7KgKAUIcT/cR/grk
C6VwsnDU0OUCideXcQ8WeHutqvgZH1JgKDbznoIzeQHJD238GEu+eKhRHcz8/jeG
94zkcgJOz3KbZGYMiTh277Fvj9zzvZsbMBCedV1BTg3TqgvdX4bdkhf5cH+7NtWO
lrFj6UwAsGukBTAOxC0l/dnSmZhJ7Z1KmEWilro/gOrjtOxqRQutlIqG22TaqoPG
fYVN+en3Zwbt97kcgZDwqbuykNt64oZWc4XKCa3mprEGC3IbJTBFqglXmZ7l9ywG
EEUJYOlb2XrSuPWml39beWdKM8kzr1OjnlOm6+lpTRCBfo0wa9F8YZRhHPAkwKkX
XDeOGpWRj4ohOx0d2GWkyV5xyN14p2tQOCdOODmz80yUTgRpPVQUtOEhXQARAQAB
tCFBV1MgQ0xJIFRlYW0gPGF3cy1jbGlAYW1hem9uLmNvbT6JAlQEEwEIAD4CGwMF
CwkIBwIGFQoJCAsCBBYCAwECHgECF4AWIQT7Xbd/1cEYuAURraimMQrMRnJHXAUC
akV0ygUJDqP4lQAKCRCmMQrMRnJHXFHjD/9eyZLYcKuQOlLvtqSDtUBiEZf6ZZjM
i3ygYH8rJNtuToUH+HvSpe819urJCquXhDrlK6N+aqW0hCLtNABJG/vsafIgvIYJ
hSGgpgtNnQyMV1jViRWqPjbouw8OkYKBThUfT1i2Y+wn58ifs6ODBCmTexWtXspA
Si+Gt49xDOW0APmbOPnI+a4HJW6tVEo6MWS0WjzpiBayR3d1A4pt4YrPfSdDgpLo
h2SLQqlRqvvVZJaWBjhkErNFpfsBA06sDcPEOb0G8LBUbR4WOcdvhe5LubJbZuxC
AG9kNPCVeQP1ixwjgjXKysaxeQ6rv0VzIQgRp6tLVLWhy6AKDNvLjFSsmXZ1Wl08
Y/RlOHXlzLuQMRE6sR1wOdRxc9TsrNWTGiBK65cvSWOy03JeBkQQ8pesqltiyxI9
U21kkgiXtTSKNGfKK8pO27D81YANhRqPK7iTp6kuFiY2WtOg90KTMNlIT+Ff85Y2
b1rHj6Z0SrCkJujhWk3IBPic/wJgz01LEc/OAdUPlby90RJZcIBhSlWhT7mXnXIO
c0HWlNQrns2s3CTyYwZSiSlYe9ApeLwhjDo8NhbFuCAy61l6O5UsR4AfZxx/rGKv
2wFb1/RN/P4gNe6vmxZAPjR0AQcwD3tc2McimOLr/22kmPz8IH3I0X7WoSFr0Biz
E91G7bb0hOb/cA==
=knv7
-----END PGP PUBLIC KEY BLOCK-----
KEY
)
# CloudWatch agent: AWS publishes its key next to the packages and documents its fingerprint
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/verify-CloudWatch-Agent-Package-Signature.html)
CLOUDWATCH_AGENT_KEY_FINGERPRINT=937616F3450B7D806CBD9725D58167303B789C72

# verify_pgp FILE SIGNATURE KEY_FILE FINGERPRINT: succeeds only when SIGNATURE is a good detached signature of FILE
# made by the key whose primary fingerprint is FINGERPRINT, read from KEY_FILE (a key of another fingerprint is
# refused before it is imported); else one line on stderr and status 1. A throwaway keyring: nothing else is trusted.
verify_pgp() {
  local file=$1 signature=$2 key=$3 fingerprint=$4 home found verified="" status=0
  if ! command -v gpg >/dev/null; then  # Debian 13's and Ubuntu's minimal images verify apt with sqv/gpgv: no gpg
    if command -v apt-get >/dev/null; then DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnupg >&2
    elif command -v dnf >/dev/null; then dnf install -y gnupg2 >&2; fi
  fi
  command -v gpg >/dev/null || { echo "aws-tools: gpg is needed to verify $file" >&2; return 1; }
  home=$(mktemp -d)
  found=$(gpg --homedir "$home" --batch --with-colons --show-keys "$key" 2>/dev/null | awk -F: '$1 == "fpr" {print $10}' | head -n 1) || found=""
  if [ "$found" != "$fingerprint" ]; then
    echo "aws-tools: $key is not the pinned key $fingerprint (found: ${found:-no key}): $file not installed" >&2
    status=1
  else
    # the status lines (not the exit code alone): VALIDSIG's last field is the signing key's primary fingerprint
    gpg --homedir "$home" --batch --quiet --import "$key" 2>/dev/null \
      && verified=$(gpg --homedir "$home" --batch --status-fd 1 --verify "$signature" "$file" 2>/dev/null) || verified=""
    if ! grep -Eq "^\[GNUPG:\] VALIDSIG .* $fingerprint\$" <<<"$verified"; then
      echo "aws-tools: $file: no good signature by $fingerprint in $signature: not installed" >&2
      status=1
    fi
  fi
  rm -rf "$home"
  return "$status"
}

# fetch_verified URL DEST KEY_FILE FINGERPRINT: URL to DEST and URL.sig beside it, verified (verify_pgp); DEST is
# removed when the signature does not hold
fetch_verified() {
  local url=$1 dest=$2 key=$3 fingerprint=$4
  curl --proto '=https' -fsSLo "$dest" "$url"
  curl --proto '=https' -fsSLo "$dest.sig" "$url.sig"
  verify_pgp "$dest" "$dest.sig" "$key" "$fingerprint" || { rm -f "$dest"; return 1; }
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0  # sourced (the tests): the functions only
. "$(dirname "$0")/os-lib.sh"
cloudwatch_agent=$(os_value cloudwatch_agent)
efs_utils=$(os_value efs_utils)
lustre_client=$(os_value lustre_client)
package_manager=$(os_value package_manager)
arch=$(uname -m)
deb_arch=$(dpkg --print-architecture 2>/dev/null || echo "$arch" | sed 's/x86_64/amd64/; s/aarch64/arm64/')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v aws >/dev/null; then
  printf '%s\n' "$AWS_CLI_KEY" > "$work/aws-cli.asc"
  fetch_verified "https://awscli.amazonaws.com/awscli-exe-linux-${arch}.zip" "$work/awscliv2.zip" \
    "$work/aws-cli.asc" "$AWS_CLI_KEY_FINGERPRINT"
  python3 -m zipfile -e "$work/awscliv2.zip" "$work" && chmod -R +x "$work/aws" && "$work/aws/install"
fi

cwa="https://amazoncloudwatch-agent.s3.amazonaws.com"
if [ ! -x /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl ]; then
  case "$cloudwatch_agent" in
    package) dnf install -y amazon-cloudwatch-agent ;;  # the OS's signed repository
    rpm-url | deb-url)
      curl --proto '=https' -fsSLo "$work/cwa.gpg" "$cwa/assets/amazon-cloudwatch-agent.gpg"
      if [ "$cloudwatch_agent" = rpm-url ]; then
        fetch_verified "$cwa/redhat/$deb_arch/latest/amazon-cloudwatch-agent.rpm" "$work/cwa.rpm" \
          "$work/cwa.gpg" "$CLOUDWATCH_AGENT_KEY_FINGERPRINT"
        dnf install -y "$work/cwa.rpm"
      else
        fetch_verified "$cwa/debian/$deb_arch/latest/amazon-cloudwatch-agent.deb" "$work/cwa.deb" \
          "$work/cwa.gpg" "$CLOUDWATCH_AGENT_KEY_FINGERPRINT"
        dpkg -i "$work/cwa.deb"
      fi
      ;;
  esac
fi

if ! command -v mount.efs >/dev/null; then
  case "$efs_utils" in
    package) dnf install -y amazon-efs-utils ;;
    source)
      # Outside Amazon Linux AWS documents building the package from its source (it needs Rust since 2.0)
      case "$package_manager" in
        dnf) dnf install -y git rpm-build make rust cargo openssl-devel ;;
        apt) apt-get install -y -q --no-install-recommends git binutils rustc cargo pkg-config libssl-dev stunnel4 ;;
      esac
      git clone --depth 1 https://github.com/aws/efs-utils "$work/efs-utils"
      cd "$work/efs-utils"
      if command -v dnf >/dev/null; then make rpm && dnf install -y build/amazon-efs-utils*.rpm
      else ./build-deb.sh && apt-get install -y ./build/amazon-efs-utils*.deb; fi
      cd /
      ;;
  esac
fi

# FSx for Lustre clients exist for Amazon Linux, RHEL/Rocky and Ubuntu (lustre_client=none for Debian: the validator
# refuses FSx for Lustre there, reading the same table).
case "$lustre_client" in
  none) ;;
  amzn) dnf install -y lustre-client ;;
  el9)
    curl -fsSL https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-rpm-public-key.asc -o /tmp/fsx-rpm.asc
    rpm --import /tmp/fsx-rpm.asc
    curl -fsSL "https://fsx-lustre-client-repo.s3.amazonaws.com/el/9/fsx-lustre-client.repo" \
      -o /etc/yum.repos.d/aws-fsx.repo
    dnf install -y kmod-lustre-client lustre-client
    ;;
  ubuntu)
    curl -fsSL https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc \
      | gpg --dearmor > /usr/share/keyrings/fsx-ubuntu-public-key.gpg
    echo "deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu ${VERSION_CODENAME} main" \
      > /etc/apt/sources.list.d/fsxlustreclientrepo.list
    apt-get update -q && apt-get install -y -q "lustre-client-modules-$(uname -r)"
    ;;
esac

# The RDS CA bundle (every region's Amazon RDS root CAs): slurmdbd connects to the accounting database over TLS and
# checks its certificate against this file (StorageParameters=SSL_CA, slurm_plugin/render/dbd.py RDS_CA_BUNDLE).
# Fetched over HTTPS only from AWS's trust store, whose server certificate curl checks against the OS's CAs. Not
# pinned by sha256: AWS adds CAs to this one file (new regions, rotations), so a pin would fail every build after
# each addition; instead the file must parse as certificates that are all Amazon RDS CAs, else the build fails.
rds_ca=/opt/elastic-slurm/share/rds-global-bundle.pem
curl --proto '=https' --tlsv1.2 -fsSLo "$work/rds-ca.pem" \
  https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
python3 - "$work/rds-ca.pem" <<'PY'
import ssl, sys
context = ssl.create_default_context(cafile=sys.argv[1])  # fails on anything but PEM certificates
units = [dict(field[0] for field in ca["subject"]).get("organizationalUnitName") for ca in context.get_ca_certs()]
if not units or any(unit != "Amazon RDS" for unit in units):
    sys.exit(f"aws-tools: {sys.argv[1]}: not a bundle of Amazon RDS CA certificates (subjects' OU: {units[:3]})")
PY
install -D -m 0644 "$work/rds-ca.pem" "$rds_ca"
