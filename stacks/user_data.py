"""Boot scripts of controllers and compute nodes on EC2 (pure: lists of shell lines, no CDK).

Both roles: write `/etc/elastic-slurm/env` (values CloudFormation fills in), install the munge key from Secrets
Manager, mount every shared file system listed in the mounts parameter, ship /var/log/slurm to CloudWatch Logs. Then
the controller fetches its config and `DeployedInfra`, finds the controllers' (and slurmdbd's) host names by their
Name tags, renders the base slurm.conf + cgroup.conf + fragments + the runtime manifest into /etc/slurm, publishes the
`slurmd --conf-server` argument on the shared file system (compute nodes run slurmd configless), enables
the cluster manager (and the license sync timer when the config syncs licenses) and starts slurmctld (and slurmdbd on
the accounting host); a compute node execs `elastic-slurm-node-bootstrap` (assets/bootstrap, installed into the AMI
by the Image Builder component), which finds its Slurm node name and execs slurmd. The plugin's console scripts are
in /opt/elastic-slurm/bin (links into the /opt/elastic-slurm/venv the component pip-installs the project into).
"""

from __future__ import annotations

BIN = "/opt/elastic-slurm/bin"
VENV_PYTHON = "/opt/elastic-slurm/venv/bin/python"
ETC = "/etc/elastic-slurm"

_PRELUDE = [
    "set -Eeuo pipefail",
    "# a failing step fails the boot visibly: its line and command in the boot log (cloud-init output), exit non-zero",
    "trap 'echo \"elastic-slurm boot: FAILED at line $LINENO: $BASH_COMMAND\" >&2' ERR",
    f"install -d -m 0755 {ETC}",
    "set -a; . /etc/elastic-slurm/env; set +a",
    'export AWS_DEFAULT_REGION="$ES_REGION"',
    "# munge: the same key on every member of the cluster",
    'aws secretsmanager get-secret-value --secret-id "$ES_MUNGE_SECRET" --query SecretString --output text'
    " | sha512sum | cut -d' ' -f1 > /etc/munge/munge.key",
    "chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key",
    "systemctl restart munge",
    "# shared file systems",
    f'aws ssm get-parameter --name "$ES_MOUNTS_PARAMETER" --query Parameter.Value --output text > {ETC}/mounts.json',
    f"jq -r '.[] | [.type, .source, .mount_point, .options] | @tsv' {ETC}/mounts.json |",
    "while IFS=$'\\t' read -r fstype source mount_point options; do",
    '  mkdir -p "$mount_point"',
    '  case "$fstype" in',
    '    efs) mount -t efs -o "$options" "$source:/" "$mount_point" ;;',
    '    *) mount -t "$fstype" -o "$options" "$source" "$mount_point" ;;',
    "  esac",
    "done",
    "# Slurm logs to CloudWatch Logs (they also stay on local disk / the shared file system, see slurm.conf)",
    "if [ -x /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl ]; then",
    f"cat > {ETC}/cloudwatch-agent.json <<CWA",
    '{"logs": {"logs_collected": {"files": {"collect_list": [{"file_path": "/var/log/slurm/*.log",'
    ' "log_group_name": "$ES_LOG_GROUP", "log_stream_name": "{instance_id}/{file_basename}"}]}}}}',
    "CWA",
    "  /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s"
    f" -c file:{ETC}/cloudwatch-agent.json",
    "fi",
]

# Controller host names are known only once the instances exist: both controllers (and the slurmdbd host, controller 0
# of the accounting host cluster) are found by their Name tag `<cluster>-controller-<index>` (set at launch by the
# cluster stack) with ec2:DescribeInstances, which the controller role has. A pending instance already has its private
# DNS name and IP, so each lookup waits (bounded, 10 min) only until CloudFormation has launched the peer.
# The Slurm name is the first label of the private DNS name: what `hostname -s` prints on EC2.
_CONTROLLER_HOSTS = [
    "es_host() {  # es_host REGION NAME_TAG -> 'shortname ip' of that pending/running instance",
    "  local out",
    "  for _ in $(seq 120); do",
    '    out=$(aws ec2 describe-instances --region "$1" --filters "Name=tag:Name,Values=$2"'
    " Name=instance-state-name,Values=pending,running"
    " --query 'Reservations[0].Instances[0].[PrivateDnsName,PrivateIpAddress]' --output text 2>/dev/null || true)",
    '    case "$out" in ""|None*) sleep 5 ;; *) set -- $out; echo "${1%%.*} $2"; return 0 ;; esac',
    "  done",
    '  echo "elastic-slurm boot: no instance named $2 in $1" >&2; return 1',
    "}",
    f"facts=$({VENV_PYTHON} -c '",
    "import sys; from cluster_config import load; from slurm_plugin.render.base import shared_mount",
    "c = load(sys.argv[1]); k = c.cluster(sys.argv[2]); h = c.cluster(c.accounting.host_cluster or c.clusters[0].name)",
    f'print(k.controller.count, c.accounting.mode, h.name, h.region, shared_mount(k) or "")\' {ETC}/cluster.yaml'
    ' "$ES_CLUSTER")',
    'read -r n_controllers acct_mode dbd_cluster dbd_region shared <<<"$facts"',
    'controllers=""',
    "for index in $(seq 0 $((n_controllers - 1))); do",
    '  entry=$(es_host "$ES_REGION" "$ES_CLUSTER-controller-$index")',
    '  read -r name ip <<<"$entry"',
    '  controllers="${controllers:+$controllers,}$name($ip)"',
    "done",
    "dbd_args=()",
    'if [ "$acct_mode" != none ]; then',
    '  entry=$(es_host "$dbd_region" "$dbd_cluster-controller-0")',
    '  read -r _ dbd_ip <<<"$entry"',
    '  dbd_args=(--slurmdbd-host "$dbd_ip")',
    "fi",
]

_CONTROLLER = [
    f'aws s3 cp "$ES_CONFIG_URL" {ETC}/cluster.yaml',
    f'aws ssm get-parameter --name "$ES_DEPLOYED_INFRA" --query Parameter.Value --output text > {ETC}/infra.json',
    f"{BIN}/elastic-slurm instance-cache refresh {ETC}/cluster.yaml --out {ETC}/instance-cache.json",
    *_CONTROLLER_HOSTS,
    f'{BIN}/elastic-slurm render {ETC}/cluster.yaml --cluster "$ES_CLUSTER" --infra {ETC}/infra.json'
    f' --cache {ETC}/instance-cache.json --out /etc/slurm --controller-hosts "$controllers" "${{dbd_args[@]}}"',
    "# compute nodes run slurmd configless; they find the controllers on the shared file system (see _COMPUTE)",
    'if [ -n "$shared" ]; then',
    '  install -d -m 0755 "$shared/slurm/conf-server" && install -d -o slurm -g slurm "$shared/slurm/state"',
    '  install -m 0644 /etc/slurm/conf-server "$shared/slurm/conf-server/$ES_CLUSTER"',
    "fi",
    "# the directories slurmctld, the plugin programs (run by slurmctld as slurm) and the manager write, with owners:",
    "# the same script the local cloud runs (assets/bootstrap/elastic-slurm-dirs)",
    "ES_SLURMCTLD_DIRS=\"/var/spool/slurmctld $(sed -n 's/^StateSaveLocation=//p' /etc/slurm/slurm.conf)\""
    f" {BIN}/elastic-slurm-dirs",
    "# the plugin programs and the cluster manager read the manifest at its default path, the prolog its env here",
    f"ln -sfn /etc/slurm/manifest.json {ETC}/manifest.json",
    f"install -m 0644 /etc/slurm/prolog-wait-for-boot.env {ETC}/prolog-wait-for-boot.env",
    "es_wait() {  # es_wait SECONDS WHAT COMMAND...: retry COMMAND every 2 s until it succeeds, else fail the boot",
    "  local limit=$1 what=$2; shift 2",
    '  for _ in $(seq $((limit / 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 2; done',
    '  echo "elastic-slurm boot: $what did not answer within ${limit}s" >&2; return 1',
    "}",
    "# slurmdbd (accounting host only): slurmdbd.conf from the database secret, mode 0600, then start it",
    'if [ -n "${ES_DB_SECRET:-}" ] && [ "${ES_CONTROLLER_INDEX:-0}" = 0 ]; then',
    '  (umask 077; aws secretsmanager get-secret-value --secret-id "$ES_DB_SECRET" --query SecretString'
    " --output text > /run/elastic-slurm-db-secret.json)",
    f'  {BIN}/elastic-slurm render-slurmdbd --secret-json /run/elastic-slurm-db-secret.json --dbd-host "$(hostname -s)"'
    " --out /etc/slurm/slurmdbd.conf",
    "  rm -f /run/elastic-slurm-db-secret.json",
    "  chown slurm:slurm /etc/slurm/slurmdbd.conf",
    "  systemctl enable --now slurmdbd",
    "  es_wait 600 slurmdbd sacctmgr -n show cluster",
    "  # the config's clusters, federation, accounts, users, QOS and licenses, before slurmctld registers",
    f"  {BIN}/slurm-accounting-apply --desired /etc/slurm/accounting.json",
    'elif [ "$acct_mode" != none ]; then',
    "  # another controller hosts slurmdbd: wait until it answers and knows this cluster",
    '  es_wait 900 "slurmdbd (cluster $ES_CLUSTER registered)" bash -c'
    " 'sacctmgr -n -P show cluster format=cluster | grep -qx \"$ES_CLUSTER\"'",
    "fi",
    "# license sync timer: only when the config has licenses with a server (the drop-in holds their schedules)",
    f"licenses_synced=$({VENV_PYTHON} - {ETC}/cluster.yaml \"$ES_CLUSTER\" <<'PY'",
    "import sys",
    "from pathlib import Path",
    "from cluster_config import load",
    "from slurm_plugin.licenses.sync import sync_config_from",
    "from slurm_plugin.licenses.units import DROPIN_PATH, timer_dropin",
    "config = load(sys.argv[1])",
    "dropin = timer_dropin(config)",
    "if dropin is not None:",
    f"    Path('{ETC}/license-sync.json').write_text(sync_config_from(config, sys.argv[2]).model_dump_json())",
    "    Path(DROPIN_PATH).parent.mkdir(parents=True, exist_ok=True)",
    "    Path(DROPIN_PATH).write_text(dropin)",
    "print('yes' if dropin is not None else 'no')",
    "PY",
    ")",
    'if [ "$licenses_synced" = yes ]; then systemctl daemon-reload && systemctl enable --now slurm-license-sync.timer; fi',
    "systemctl enable --now slurmctld",
    'es_wait 300 "slurmctld on $(hostname -s)" bash -c \'scontrol ping | grep -q "at $(hostname -s) is UP"\'',
    "# cluster manager (assets/systemd/slurm-clustermgr.service)",
    "systemctl enable --now slurm-clustermgr.service",
    "# long health check schedule (assets/systemd/slurm-longcheck.timer): the primary controller submits it",
    'if [ "${ES_CONTROLLER_INDEX:-0}" = 0 ]; then systemctl enable --now slurm-longcheck.timer; fi',
    'echo "elastic-slurm boot: controller $(hostname -s) of $ES_CLUSTER is up"',
]

_COMPUTE = [
    "# slurmd runs configless: the controllers (written by the controller boot) are on a shared file system",
    f"for mount_point in $(jq -r '.[].mount_point' {ETC}/mounts.json); do",
    '  if [ -r "$mount_point/slurm/conf-server/$ES_CLUSTER" ]; then',
    '    ELASTIC_SLURM_CONF_SERVER=$(cat "$mount_point/slurm/conf-server/$ES_CLUSTER")',
    '    export ELASTIC_SLURM_CONF_SERVER ELASTIC_SLURM_CLUSTER="$ES_CLUSTER"',
    "    break",
    "  fi",
    "done",
    f"exec {BIN}/elastic-slurm-node-bootstrap",
]


def env_file(values: dict[str, str]) -> list[str]:
    """Shell lines writing `values` to /etc/elastic-slurm/env (values must not contain single quotes)."""
    for key, value in values.items():
        if "'" in value or "\n" in value:
            raise ValueError(f"{key}: user-data values may not contain quotes or newlines")
    return [f"install -d -m 0755 {ETC}", *(f"echo '{k}={v}' >> {ETC}/env" for k, v in values.items())]


def boot_commands(role: str, values: dict[str, str]) -> list[str]:
    """Every user-data line of a `controller` or `compute` instance."""
    if role not in ("controller", "compute"):
        raise ValueError(f"role must be controller or compute, not {role!r}")
    return [*env_file({**values, "ES_ROLE": role}), *_PRELUDE, *(_CONTROLLER if role == "controller" else _COMPUTE)]
