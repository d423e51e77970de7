#!/bin/bash
# Image build step: the AWS agents and mount helpers the boot scripts use — AWS CLI v2 (where the OS packages none),
# the CloudWatch agent (ships /var/log/slurm), amazon-efs-utils (`mount -t efs`, TLS to EFS) and the Lustre client
# (FSx for Lustre). Production only: everything here is downloaded from AWS-hosted locations the machines `make test`
# runs on cannot reach, so this step is the one build step the local cloud's image root skips (docs/local-cloud.md).
set -euo pipefail
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
  curl -fsSLo "$work/awscliv2.zip" "https://awscli.amazonaws.com/awscli-exe-linux-${arch}.zip"
  python3 -m zipfile -e "$work/awscliv2.zip" "$work" && chmod -R +x "$work/aws" && "$work/aws/install"
fi

cwa="https://amazoncloudwatch-agent.s3.amazonaws.com"
if [ ! -x /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl ]; then
  case "$cloudwatch_agent" in
    package) dnf install -y amazon-cloudwatch-agent ;;
    rpm-url) dnf install -y "$cwa/redhat/$deb_arch/latest/amazon-cloudwatch-agent.rpm" ;;
    deb-url) curl -fsSLo "$work/cwa.deb" "$cwa/debian/$deb_arch/latest/amazon-cloudwatch-agent.deb" && dpkg -i "$work/cwa.deb" ;;
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
