#!/bin/bash
# Image build step 2: build Slurm from its source release, the checksum verified before anything is unpacked, and
# install it with its systemd units, the slurm account and its directories.
#
#   build-slurm.sh SOURCE SHA256 VERSION
#
# SOURCE is a URL or a local file (the local cloud passes its cached copy of the same tarball); the recipe's values
# come from cluster_config/slurm_release.py. Executed by `make test` on Debian 13.
set -euo pipefail  # and so no grep -q reading a pipe (tests/unit/test_pipefail_greps.py)
. "$(dirname "$0")/os-lib.sh"
source_ref="$1" sha256="$2" version="$3"
pmix=$(os_value pmix)
# The slurm account has the same ids on every image: what it owns on EFS (Slurm's state on the controllers' own file
# system, shared by the primary and the backup; the plugin's files on the users' one) keeps its owner on every node.
SLURM_UID=64030 SLURM_GID=64030

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -f "$source_ref" ]; then cp "$source_ref" "$work/slurm.tar"; else curl -fsSL -o "$work/slurm.tar" "$source_ref"; fi
if ! echo "$sha256  $work/slurm.tar" | sha256sum --check --quiet; then
  echo "build-slurm.sh: $source_ref does not match sha256 $sha256" >&2
  exit 1
fi
mkdir "$work/src"
tar -xaf "$work/slurm.tar" -C "$work/src" --strip-components=1
meta_version="$(awk '$1=="Major:"{M=$2} $1=="Minor:"{m=$2} $1=="Micro:"{u=$2} END{print M"."m"."u}' "$work/src/META")"
if [ "$meta_version" != "$version" ]; then
  echo "build-slurm.sh: the source is Slurm $meta_version, the image asks for $version" >&2
  exit 1
fi

cd "$work/src"
# --enable-cgroupv2 makes configure fail without the dbus headers the cgroup/v2 plugin needs (instead of silently
# building no plugin); --with-systemdsystemunitdir puts the units where systemd looks. --with-pmix finds the OS's PMIx
# through pkg-config (Debian's lives in /usr/lib/<multiarch>/pmix2) and makes configure fail when there is none,
# instead of silently building no mpi/pmix plugin (`srun --mpi=pmix`). --disable-static: nothing on a node links Slurm
# statically, and libtool would compile every source a second time for the .a archives (326 MB of the 389 MB in
# /usr/lib/slurm; measured on 2 cores: make 247 s -> 158 s, 415 -> 274 CPU-seconds).
if [ "$pmix" = package ]; then pmix_flag=--with-pmix; else pmix_flag=--without-pmix; fi
./configure --prefix=/usr --sysconfdir=/etc/slurm --localstatedir=/var --runstatedir=/run --disable-static \
  --with-munge --enable-pam --enable-cgroupv2 "$pmix_flag" --with-systemdsystemunitdir=/usr/lib/systemd/system \
  > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log" >&2; exit 1; }
make -j "$(nproc)" > "$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
make install > /dev/null
if [ "$pmix" = package ] && ! compgen -G "/usr/lib/slurm/mpi_pmix*.so" > /dev/null; then
  echo "build-slurm.sh: the build installed no mpi/pmix plugin" >&2
  exit 1
fi
# nss_slurm (clusters[].nss_slurm): libnss_slurm.so.2 into the libdir, /usr/lib, which ldconfig caches and glibc's NSS
# loads from. The image's nsswitch.conf does not name it: a compute node's bootstrap adds it when the cluster asks.
make -C contribs/nss_slurm > "$work/nss_slurm.log" 2>&1 || { tail -40 "$work/nss_slurm.log" >&2; exit 1; }
make -C contribs/nss_slurm install > /dev/null
# pam_slurm_adopt (directory.pam_slurm_adopt): an SSH session to a compute node joins the user's job there and ends
# with it; installed in configure's PAM_DIR (the OS's security/ directory), found there by elastic-slurm-directory
make -C contribs/pam_slurm_adopt > "$work/pam_slurm_adopt.log" 2>&1 || { tail -40 "$work/pam_slurm_adopt.log" >&2; exit 1; }
make -C contribs/pam_slurm_adopt install > /dev/null
if ! find /lib /lib64 /usr/lib /usr/lib64 -path '*/security/pam_slurm_adopt.so' 2>/dev/null | grep . > /dev/null; then
  echo "build-slurm.sh: the build installed no pam_slurm_adopt.so" >&2
  exit 1
fi
ldconfig
# x86_64/aarch64 RPM systems search /usr/lib64, not /usr/lib (Debian finds it): tell their loader where it is
if ! ldconfig -p | grep 'libnss_slurm\.so\.2 ' > /dev/null; then echo /usr/lib > /etc/ld.so.conf.d/slurm-usr-lib.conf; ldconfig; fi

getent group slurm >/dev/null || groupadd --system --gid "$SLURM_GID" slurm
id slurm >/dev/null 2>&1 || useradd --system --uid "$SLURM_UID" --gid slurm --home-dir /var/lib/slurm \
  --shell /usr/sbin/nologin slurm
install -d -o slurm -g slurm -m 0755 /etc/slurm /var/spool/slurmctld /var/log/slurm /var/lib/slurm
install -d -o root -g root -m 0755 /var/spool/slurmd
echo "Slurm $version built from $source_ref (sha256 $sha256)" > /etc/slurm/BUILD-INFO
