#!/bin/bash
# Image build step 1: the operating system's packages Slurm's build, munge, the plugin and the boot scripts need.
# The packages of each base OS are its row of os-table.env (generated from cluster_config/os_support.py); this script
# only knows how each package manager installs them. Debian 13 is executed by `make test` (the local cloud's image
# root is built by this script); the other rows follow their distributions' documentation and are checked on paper
# only — see docs/images.md.
#
# What the packages are for: Slurm's build (dbus: the cgroup/v2 plugin's scope creation; hwloc/numa: task affinity;
# mariadb: slurmdbd's accounting_storage/mysql; json-c, yaml, http-parser, jwt: slurmrestd and auth/jwt; pam:
# pam_slurm_adopt; lua: job_submit/lua; lz4: sbcast compression), munge, the plugin's Python (>= 3.11), iptables (the
# nft backend: the boot's elastic-slurm-imds-guard keeps job users away from the instance metadata service), sssd-ldap
# with its NSS and PAM modules (users and groups from the site's directory, clusters[].directory).
set -euo pipefail
. "$(dirname "$0")/os-lib.sh"
package_list=$(os_value packages)
package_manager=$(os_value package_manager)
extra_repos=$(os_value extra_repos)
read -r -a packages <<< "$package_list"

case "$package_manager" in
  apt)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${packages[@]}"
    ;;
  dnf)
    case "$extra_repos" in
      none) ;;
      # munge-devel, http-parser-devel, libjwt-devel live in CRB (CodeReady Builder) and EPEL
      rhui-crb-epel | crb-epel)
        dnf install -y dnf-plugins-core
        if [ "$extra_repos" = rhui-crb-epel ]; then
          dnf config-manager --set-enabled "codeready-builder-for-rhel-9-$(uname -m)-rhui-rpms" \
            || subscription-manager repos --enable "codeready-builder-for-rhel-9-$(uname -m)-rpms"
        else
          dnf config-manager --set-enabled crb
        fi
        dnf install -y "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm"
        ;;
    esac
    dnf install -y --allowerasing "${packages[@]}"
    authselect select sssd --force  # nsswitch.conf asks sss (sssd runs only with a directory configured)
    ;;
esac
