#!/bin/bash
# Image validate step: what every image must hold, checked on the built image (AWS: the validate phase; tests: the
# local cloud's image root right after its build).
#
#   validate.sh VERSION
set -euo pipefail
# No `| grep -q` here: grep -q quits at the first match, the writer dies of SIGPIPE and pipefail fails the check at
# random (ldconfig -p did); `grep ... > /dev/null` reads to the end (tests/unit/test_pipefail_greps.py).
version="$1"
prefix=/opt/elastic-slurm
fail() { echo "validate.sh: $*" >&2; exit 1; }

for daemon in slurmctld slurmd; do
  "/usr/sbin/$daemon" -V | grep -x "slurm $version" > /dev/null || fail "$daemon is not Slurm $version: $(/usr/sbin/$daemon -V)"
done
# slurmdbd -V reads slurmdbd.conf first (24.11), which an image has not: check it is there and fully linked
[ -x /usr/sbin/slurmdbd ] || fail "no slurmdbd"
! ldd /usr/sbin/slurmdbd | grep "not found" > /dev/null || fail "slurmdbd misses libraries: $(ldd /usr/sbin/slurmdbd | grep 'not found')"
for client in sinfo squeue sbatch srun scontrol sacctmgr; do command -v "$client" >/dev/null || fail "no $client"; done
plugins=$(dirname "$(find /usr/lib /usr/lib64 -name cgroup_v2.so -path '*slurm*' 2>/dev/null | head -1)")
[ "$plugins" != . ] || fail "no cgroup/v2 plugin (was Slurm configured without dbus?)"
for plugin in accounting_storage_slurmdbd accounting_storage_mysql auth_munge cred_munge select_cons_tres \
    proctrack_cgroup task_cgroup task_affinity; do
  [ -f "$plugins/$plugin.so" ] || fail "no Slurm plugin $plugin in $plugins"
done
# nss_slurm: glibc loads NSS modules by soname through the loader cache, so that is where it must be
ldconfig -p | grep 'libnss_slurm\.so\.2 ' > /dev/null || fail "no libnss_slurm.so.2 in the loader cache (contribs/nss_slurm)"
! ldd "$(ldconfig -p | sed -n 's/.*libnss_slurm\.so\.2 .*=> //p' | head -1)" | grep "not found" > /dev/null \
  || fail "libnss_slurm.so.2 misses libraries"
command -v munged >/dev/null || fail "no munged"
id slurm >/dev/null || fail "no slurm account"
id munge >/dev/null || fail "no munge account"
for unit in slurmctld slurmd slurmdbd slurm-clustermgr slurm-license-sync slurm-longcheck slurm-config-sync \
    slurm-exporter slurm-bootwatch elastic-slurm-imds-guard; do
  [ -f "/etc/systemd/system/$unit.service" ] || [ -f "/usr/lib/systemd/system/$unit.service" ] || fail "no unit $unit"
done
for program in elastic-slurm-node-bootstrap elastic-slurm-dirs elastic-slurm-config-apply \
    elastic-slurm-imds-guard elastic-slurm-custom-actions elastic-slurm-smt-off \
    elastic-slurm-directory elastic-slurm-healthcheck prolog-wait-for-boot.sh; do
  [ -x "$prefix/bin/$program" ] || fail "no $prefix/bin/$program"
done
for tool in "$prefix"/venv/bin/slurm-* "$prefix/venv/bin/elastic-slurm"; do
  [ -x "$prefix/bin/$(basename "$tool")" ] || fail "$(basename "$tool") is not linked into $prefix/bin"
done
"$prefix/bin/elastic-slurm" --help >/dev/null || fail "elastic-slurm does not run"
"$prefix/bin/slurm-clustermgr" --help >/dev/null || fail "slurm-clustermgr does not run"
command -v aws >/dev/null || fail "no aws CLI"
command -v iptables >/dev/null || fail "no iptables (elastic-slurm-imds-guard)"
[ -x /usr/sbin/sssd ] && [ -n "$(find /usr/lib* -path '*sssd*' -name 'libsss_ldap*' 2>/dev/null | head -1)" ] \
  || fail "no sssd with its LDAP provider (clusters[].directory)"
grep -Eq '^passwd:.*\bsss\b' /etc/nsswitch.conf && grep -Eq '^group:.*\bsss\b' /etc/nsswitch.conf \
  || fail "nsswitch.conf does not ask sss for passwd and group"
[ -x /usr/sbin/sackd ] && [ -f /usr/lib/systemd/system/sackd.service ] || fail "no sackd (login nodes)"
[ -f /etc/systemd/system/sackd.service.d/elastic-slurm.conf ] || fail "no sackd drop-in (login nodes)"
# slurmd runs from Slurm's unit with our drop-in (the bootstrap's options, limits, restarts); slurmctld's keeps the
# plugin's workers over a restart
[ -f /usr/lib/systemd/system/slurmd.service ] || fail "no slurmd.service from Slurm (compute nodes start slurmd with it)"
grep -q '^ExecStart=.*\$SLURMD_OPTIONS' /usr/lib/systemd/system/slurmd.service \
  || fail "Slurm's slurmd.service does not take \$SLURMD_OPTIONS (the bootstrap's node options)"
grep -qx 'EnvironmentFile=-/etc/elastic-slurm/slurmd.env' /etc/systemd/system/slurmd.service.d/elastic-slurm.conf \
  || fail "no slurmd drop-in reading the bootstrap's options"
grep -qx 'KillMode=process' /etc/systemd/system/slurmctld.service.d/elastic-slurm.conf || fail "no slurmctld drop-in"
# clusters[].rest_api: slurmrestd with JWT, its drop-in and account, the web page's unit and the job templates
[ -x /usr/sbin/slurmrestd ] && [ -f /usr/lib/systemd/system/slurmrestd.service ] || fail "no slurmrestd (rest_api)"
for plugin in auth_jwt rest_auth_jwt openapi_slurmctld data_parser_v0_0_45; do
  [ -f "$plugins/$plugin.so" ] || fail "no Slurm plugin $plugin in $plugins (rest_api)"
done
[ -f /etc/systemd/system/slurmrestd.service.d/elastic-slurm.conf ] || fail "no slurmrestd drop-in (rest_api)"
[ -f /etc/systemd/system/slurm-webui.service ] || fail "no unit slurm-webui (rest_api)"
id slurmrestd >/dev/null || fail "no slurmrestd account (rest_api)"
ls "$prefix"/job-templates/*.sbatch >/dev/null || fail "no job templates in $prefix/job-templates"
echo "image valid: Slurm $version, plugin $("$prefix/venv/bin/pip" show elastic-slurm | sed -n 's/^Version: //p')"
