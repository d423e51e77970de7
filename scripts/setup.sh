#!/usr/bin/env bash
# Installs everything `make demo` / `make test` need on a fresh Debian 12 / Ubuntu 22.04+ machine, idempotently:
#   apt packages (MariaDB, mmdebstrap, node), the Python venv (.venv), the CDK CLI (node_modules) and the root file
#   systems the local cloud runs Slurm from: the image root (Debian 13 + Slurm 26.05.3 built from SchedMD's source by
#   the image component's own scripts, ~9 min on 2 cores the first time; the tarball comes from
#   $ELASTIC_SLURM_SOURCE_MIRROR or ../shared/sources when the machine cannot reach GitHub) and Debian 13's packaged
#   Slurm 24.11 for the older-release compatibility run (~1 min); cached under /var/cache/elastic-slurm, see
#   localcloud/image/slurm_root.py. Debian 12's own Slurm (22.05, end of life) is not used.
# Re-running is quick: each step is skipped while its inputs are unchanged (stamps in .stamps/).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .stamps

# chromium: the REST API page's e2e test drives Debian's build headless (playwright never downloads a browser here)
APT_PACKAGES=(mariadb-server mariadb-client mmdebstrap perl python3-venv gcc libc6-dev nodejs npm util-linux procps slapd ldap-utils prometheus
  chromium)
# what building the Slurm roots needs of them (mmdebstrap, unshare/mount, the venv, gcc for localcloud/native/):
# `setup.sh runtime` installs only these, so scripts/test.sh starts the root builds before the rest (chromium alone is
# most of the download) goes in
ROOT_BUILD_PACKAGES=(mmdebstrap perl python3-venv util-linux gcc libc6-dev)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "setup: need root or sudo to install apt packages: ${APT_PACKAGES[*]}" >&2; exit 1; fi; }

install_apt() {  # install_apt PACKAGE... : those of them not installed yet
  local p policy missing=()
  for p in "$@"; do
    case $p in
      nodejs|npm) command -v node >/dev/null && command -v npm >/dev/null && continue ;;
      python3-venv) python3 -c 'import venv, ensurepip' 2>/dev/null && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "setup: installing apt packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # slapd's package would start a system-wide directory on port 389: the local cloud runs its own under its state
  # dir, so package services may not start during this install (policy-rc.d; one already there is left as it is)
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# elastic-slurm setup: no service starts during its apt install\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 0755 "$policy"
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
    || { [ -z "$policy" ] || as_root rm -f "$policy"; exit 1; }
  [ -z "$policy" ] || as_root rm -f "$policy"
}
if [ "${1:-}" = runtime ]; then install_apt "${ROOT_BUILD_PACKAGES[@]}"; else install_apt "${APT_PACKAGES[@]}"; fi
# Services an earlier install started are left alone (we never stop what we did not start); the local cloud runs
# its own MariaDB and slapd under its state dir.

# The Python venv in two steps: the runtime dependencies and the project first — all that building the Slurm roots
# needs (`scripts/setup.sh runtime` stops after it, so scripts/test.sh starts the root builds ~3 min earlier on a
# fresh machine) — then the CDK, test and lint tools.
runtime_hash=$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ] || [ "$(cat .stamps/venv-runtime 2>/dev/null)" != "$runtime_hash" ]; then
  echo "setup: creating the Python venv (.venv): runtime dependencies"
  rm -f .stamps/venv  # the tools go in again after it
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  .venv/bin/pip install -q --no-deps -e .
  echo "$runtime_hash" > .stamps/venv-runtime
fi
[ "${1:-}" != runtime ] || exit 0
req_hash=$(cat requirements.txt requirements-tools.txt requirements-dev.txt pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat .stamps/venv 2>/dev/null)" != "$req_hash" ]; then
  echo "setup: installing the CDK, test and lint tools into .venv"
  .venv/bin/pip install -q -r requirements-dev.txt
  echo "$req_hash" > .stamps/venv
fi

# ---- Node.js for the CDK CLI and jsii: package.json pins Node 22 LTS (the npm `node` package, a registry binary)
# next to the CDK CLI, so node_modules/.bin/node is 22 whatever the distribution ships; the Makefile and
# `elastic-slurm synth` put node_modules/.bin first on PATH. The apt nodejs/npm above only bootstrap npm.
npm_hash=$(sha256sum package.json | cut -c1-16)
if [ ! -x node_modules/.bin/cdk ] || [ "$(cat .stamps/npm 2>/dev/null)" != "$npm_hash" ]; then
  echo "setup: installing the AWS CDK CLI (node_modules)"
  npm install --no-audit --no-fund --loglevel=error
  echo "$npm_hash" > .stamps/npm
fi
# The Slurm roots (built once; reused while their inputs are unchanged). Root only: the local cloud needs root.
# ELASTIC_SLURM_ROOTS=later: not here — scripts/test.sh builds them while the tests that need none run.
if [ "$(id -u)" = 0 ] && [ "${ELASTIC_SLURM_ROOTS:-}" != later ]; then
  for release in ${ELASTIC_SLURM_RELEASES:-26.05 24.11}; do
    .venv/bin/python -m localcloud.image.slurm_root build --slurm "$release" >/dev/null || exit 1
  done
fi
echo "setup: ready (python $(.venv/bin/python -V 2>&1 | cut -d' ' -f2), node $(node_modules/.bin/node --version), cdk $(node_modules/.bin/cdk --version 2>/dev/null | cut -d' ' -f1))"
