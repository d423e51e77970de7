#!/bin/bash
# GPU image build step (assets/imagebuilder/gpu.yaml): the NVIDIA open kernel driver, the CUDA toolkit and NCCL from
# NVIDIA's CUDA repository of this base OS and architecture — its row of os-table.env (cluster_config/os_support.py),
# where the validator also refuses a GPU pool on an OS/architecture that has no repository. Repository layout and
# install commands: NVIDIA's driver and CUDA installation guides (docs.nvidia.com/datacenter/tesla/
# driver-installation-guide/). Checked on paper only: no GPU and no NVIDIA repository on the test machines.
set -euo pipefail
. "$(dirname "$0")/os-lib.sh"
case "$(uname -m)" in
  x86_64) cuda_repo=$(os_value cuda_repo_x86_64) ;;
  aarch64) cuda_repo=$(os_value cuda_repo_arm64) ;;
esac
cuda_toolkit=$(os_value cuda_toolkit)
nvidia_driver=$(os_value nvidia_driver)
package_manager=$(os_value package_manager)
[ -n "${cuda_repo:-}" ] || { echo "gpu-driver-cuda.sh: NVIDIA publishes no CUDA repository for $base_os on $(uname -m)" >&2; exit 1; }
repos=https://developer.download.nvidia.com/compute/cuda/repos

case "$package_manager" in
  dnf)
    dnf install -y dnf-plugins-core "kernel-devel-$(uname -r)" "kernel-headers-$(uname -r)"
    dnf config-manager --add-repo "$repos/$cuda_repo/cuda-${cuda_repo%%/*}.repo"
    case "$nvidia_driver" in
      dnf-module) dnf module install -y nvidia-driver:open-dkms ;;
      dnf-package) dnf install -y nvidia-open ;;
    esac
    dnf install -y "$cuda_toolkit" libnccl libnccl-devel
    ;;
  apt)
    export DEBIAN_FRONTEND=noninteractive
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    curl -fsSLo "$work/cuda-keyring.deb" "$repos/$cuda_repo/cuda-keyring_1.1-1_all.deb"
    dpkg -i "$work/cuda-keyring.deb"
    apt-get update -q
    apt-get install -y -q "linux-headers-$(uname -r)" nvidia-open "$cuda_toolkit" libnccl2 libnccl-dev
    ;;
esac
