#!/bin/bash
# Image build step 1: the operating system's packages Slurm's build, munge, the plugin and the boot scripts need.
# One branch per supported base OS, chosen from /etc/os-release. Debian 13 is executed by `make test` (the local
# cloud's image root is built by this script); the other branches follow their distributions' documentation and are
# checked on paper only — see docs/images.md for the per-OS tables this script implements.
set -euo pipefail
. /etc/os-release
os="${ID}${VERSION_ID%%.*}"

# Slurm's build dependencies, named per family. dbus: the cgroup/v2 plugin's scope creation; hwloc/numa: task
# affinity; mariadb: slurmdbd's accounting_storage/mysql; json-c, yaml, http-parser, jwt: slurmrestd and auth/jwt;
# pam: pam_slurm_adopt; lua: job_submit/lua; lz4: sbcast compression. iptables (the nft backend): the boot's
# elastic-slurm-imds-guard, which keeps job users away from the instance metadata service. sssd-ldap with its NSS
# and PAM modules: users and groups from the site's directory (clusters[].directory; started by the boot only then).
deb_packages=(build-essential pkg-config bzip2 perl python3 python3-venv munge libmunge-dev libpam0g-dev
  libreadline-dev libmariadb-dev libjson-c-dev libhttp-parser-dev libyaml-dev libjwt-dev liblua5.3-dev libhwloc-dev
  libnuma-dev libdbus-1-dev liblz4-dev libcurl4-openssl-dev nfs-common jq curl ca-certificates mount procps util-linux
  iptables sssd-ldap libnss-sss libpam-sss)
rpm_packages=(gcc make bzip2 tar perl pkgconf-pkg-config pam-devel readline-devel mariadb-connector-c-devel
  json-c-devel libyaml-devel lua-devel hwloc-devel numactl-devel dbus-devel lz4-devel libcurl-devel nfs-utils jq curl
  iptables-nft python3.11 python3.11-pip sssd-ldap)

case "$os" in
  debian13|ubuntu22|ubuntu24)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${deb_packages[@]}"
    # Debian 13 packages AWS CLI v2; Ubuntu gets the bundled installer in aws-tools.sh
    if [ "$os" = debian13 ]; then apt-get install -y -q --no-install-recommends awscli; fi
    ;;
  rocky9|rhel9|almalinux9)
    # munge-devel, http-parser-devel, libjwt-devel live in CRB (CodeReady Builder) and EPEL
    dnf install -y dnf-plugins-core
    if [ "$ID" = rhel ]; then
      dnf config-manager --set-enabled "codeready-builder-for-rhel-9-$(uname -m)-rhui-rpms" \
        || subscription-manager repos --enable "codeready-builder-for-rhel-9-$(uname -m)-rpms"
    else
      dnf config-manager --set-enabled crb
    fi
    dnf install -y "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm"
    dnf install -y "${rpm_packages[@]}" munge munge-devel http-parser-devel libjwt-devel
    authselect select sssd --force  # nsswitch.conf asks sss (sssd runs only with a directory configured)
    ;;
  amzn2023)
    # Amazon Linux 2023 has neither munge nor EPEL: munge is built from source by build-munge.sh
    dnf install -y --allowerasing "${rpm_packages[@]}" openssl-devel zlib-devel bzip2-devel authselect
    authselect select sssd --force  # nsswitch.conf asks sss (sssd runs only with a directory configured)
    ;;
  *)
    echo "os-packages.sh: unsupported base OS ${PRETTY_NAME:-$os} (supported: debian13, rocky9, rhel9, amzn2023, ubuntu22/24)" >&2
    exit 1
    ;;
esac
