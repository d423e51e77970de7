#!/bin/bash
# Image build step: build munge from its release tarball, checksum verified, on the base OSes whose table row says
# munge=source (Amazon Linux 2023, which packages no munge); a no-op elsewhere. Checked on paper only (docs/images.md):
# the machines `make test` runs on cannot reach AL2023's repositories.
set -euo pipefail
. "$(dirname "$0")/os-lib.sh"
munge_from=$(os_value munge)
[ "$munge_from" = source ] || exit 0
version=0.5.16
sha256=fa27205d6d29ce015b0d967df8f3421067d7058878e75d0d5ec3d91f4d32bb57  # Debian's munge_0.5.16.orig.tar.gz
url="https://deb.debian.org/debian/pool/main/m/munge/munge_${version}.orig.tar.gz"
command -v munged >/dev/null && exit 0
work=$(mktemp -d)
curl -fsSL -o "$work/munge.tar.gz" "$url"
echo "$sha256  $work/munge.tar.gz" | sha256sum --check --quiet
tar -xzf "$work/munge.tar.gz" -C "$work" --strip-components=1
(cd "$work" && ./configure --prefix=/usr --sysconfdir=/etc --localstatedir=/var --runstatedir=/run \
  && make -j "$(nproc)" && make install)
id munge >/dev/null 2>&1 || useradd --system --home-dir /var/lib/munge --shell /sbin/nologin munge
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
rm -rf "$work"
