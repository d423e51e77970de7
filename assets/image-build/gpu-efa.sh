#!/bin/bash
# GPU image build step (assets/imagebuilder/gpu.yaml): the EFA software from AWS's EFA installer, on the base OSes
# whose row of os-table.env says efa=yes (cluster_config/os_support.py: the installer's supported OSes,
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-changelog.html). Checked on paper only.
set -euo pipefail
. "$(dirname "$0")/os-lib.sh"
efa=$(os_value efa)
[ "$efa" = yes ] || { echo "gpu-efa.sh: the EFA installer does not support $base_os" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
curl -fsSLO https://efa-installer.amazonaws.com/aws-efa-installer-latest.tar.gz
tar xzf aws-efa-installer-latest.tar.gz
cd aws-efa-installer
./efa_installer.sh -y --skip-kmod-check
