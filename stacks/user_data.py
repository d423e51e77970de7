"""Boot scripts of controllers and compute nodes on EC2 (pure: lists of shell lines, no CDK).

Both roles: write `/etc/elastic-slurm/env` (values CloudFormation fills in), install the munge key from Secrets
Manager, mount every shared file system listed in the mounts parameter, ship /var/log/slurm to CloudWatch Logs. Then the controller fetches its config and
`DeployedInfra`, renders slurm.conf fragments + the runtime manifest and starts slurmctld (and slurmdbd on the
accounting host); a compute node execs `elastic-slurm-node-bootstrap` (assets/bootstrap, installed into the AMI by
the Image Builder component), which finds its Slurm node name and execs slurmd.
"""

from __future__ import annotations

BIN = "/opt/elastic-slurm/bin"
ETC = "/etc/elastic-slurm"

_PRELUDE = [
    "set -euo pipefail",
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

_CONTROLLER = [
    f'aws s3 cp "$ES_CONFIG_URL" {ETC}/cluster.yaml',
    f'aws ssm get-parameter --name "$ES_DEPLOYED_INFRA" --query Parameter.Value --output text > {ETC}/infra.json',
    f"{BIN}/elastic-slurm instance-cache refresh {ETC}/cluster.yaml --out {ETC}/instance-cache.json",
    f'{BIN}/elastic-slurm render {ETC}/cluster.yaml --cluster "$ES_CLUSTER" --infra {ETC}/infra.json'
    f" --cache {ETC}/instance-cache.json --out /etc/slurm",
    'if [ -n "${ES_DB_SECRET:-}" ] && [ "${ES_CONTROLLER_INDEX:-0}" = 0 ]; then systemctl enable --now slurmdbd; fi',
    "systemctl enable --now slurmctld",
]

_COMPUTE = [f"exec {BIN}/elastic-slurm-node-bootstrap"]


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
