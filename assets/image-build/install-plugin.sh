#!/bin/bash
# Image build step 3: the elastic-slurm plugin and the node programs.
#
#   install-plugin.sh ASSETS_DIR SOURCE_DIR
#
# ASSETS_DIR is the unpacked assets/ directory of the deployment (bootstrap, health checks, prolog, systemd units);
# SOURCE_DIR the project source (pyproject.toml + packages), pip-installed into /opt/elastic-slurm/venv with the base
# OS's Python >= 3.11 (its row of os-table.env: python3.11 where the OS's python3 is older). Every console script of pyproject.toml is linked into
# /opt/elastic-slurm/bin. Executed by `make test` on Debian 13.
set -euo pipefail
assets="$1" source_dir="$2"
prefix=/opt/elastic-slurm

# The interpreter is the base OS's row of os-table.env (python3.11 where the OS's python3 is older than 3.11)
. "$(dirname "$0")/os-lib.sh"
python_command=$(os_value python)
python=$(command -v "$python_command") || { echo "install-plugin.sh: no $python_command on this image" >&2; exit 1; }
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "install-plugin.sh: $python is older than Python 3.11" >&2; exit 1; }

rm -rf "$prefix/venv"
"$python" -m venv "$prefix/venv"
"$prefix/venv/bin/pip" install --quiet --no-cache-dir "$source_dir"
install -d "$prefix/bin"
scripts=$("$prefix/venv/bin/python" -c '
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["scripts"]))' "$source_dir/pyproject.toml")
for tool in $scripts; do
  ln -sfn "$prefix/venv/bin/$tool" "$prefix/bin/$tool"
done

for program in bootstrap/elastic-slurm-node-bootstrap bootstrap/elastic-slurm-dirs bootstrap/elastic-slurm-config-apply \
    bootstrap/elastic-slurm-imds-guard bootstrap/elastic-slurm-custom-actions \
    bootstrap/elastic-slurm-directory bootstrap/elastic-slurm-smt-off \
    bootstrap/elastic-slurm-first-state-save \
    health/elastic-slurm-healthcheck health/elastic-slurm-longcheck-submit slurm/prolog-wait-for-boot.sh; do
  install -m 0755 "$assets/$program" "$prefix/bin/"
done
install -m 0644 "$assets/health/elastic-slurm-longcheck.sbatch" "$prefix/bin/"
# Units only: the controller's boot script enables the cluster manager (and the license sync timer when the config
# syncs licenses); compute nodes never start them. Every node's boot enables elastic-slurm-imds-guard.
install -m 0644 "$assets"/systemd/*.service "$assets"/systemd/*.timer /etc/systemd/system/
# Drop-ins for Slurm's own units: slurmd (compute: the node's options from the bootstrap, limits, Delegate=yes,
# Restart=on-failure), slurmctld (KillMode=process: the plugin's workers survive a restart), sackd (login nodes: the
# conf server the login boot writes), slurmrestd (clusters[].rest_api)
for drop_ins in "$assets"/systemd/*.service.d; do
  install -d "/etc/systemd/system/$(basename "$drop_ins")"
  install -m 0644 "$drop_ins"/*.conf "/etc/systemd/system/$(basename "$drop_ins")/"
done
# clusters[].rest_api: Slurm's slurmrestd unit with its drop-in and the web page's unit run as `slurmrestd`, an
# account of their own (slurmrestd refuses root and SlurmUser); the page offers the job templates (docs/rest-api.md)
getent group slurmrestd >/dev/null || groupadd --system slurmrestd
id slurmrestd >/dev/null 2>&1 || useradd --system --gid slurmrestd --home-dir /nonexistent --no-create-home \
  --shell /usr/sbin/nologin slurmrestd
install -d "$prefix/job-templates"
install -m 0644 "$assets"/job-templates/*.sbatch "$prefix/job-templates/"
systemctl daemon-reload
systemctl enable munge
