"""Boot scripts of controllers and compute nodes on EC2 (pure: lists of shell lines, no CDK).

Every role: write `/etc/elastic-slurm/env` (values CloudFormation fills in, each single-quoted: `env_file_text`),
install the munge key from Secrets
Manager, mount every shared file system listed in the mounts parameter, start SSSD for the site's directory (when the
config has one), ship the Slurm and elastic-slurm logs to CloudWatch Logs. Then
the controller fetches its config and `DeployedInfra`, finds the controllers' (and slurmdbd's) host names by their
Name tags, renders the base slurm.conf + cgroup.conf + fragments + the runtime manifest into /etc/slurm, publishes the
`slurmd --conf-server` argument in an SSM parameter (assets/bootstrap/elastic-slurm-config-apply, re-run by
slurm-config-sync.timer when a deploy changes the config), starts slurmdbd (accounting host) and slurmctld, enables
the cluster manager and the timers, and signals the stack's wait condition (SUCCESS once healthy, FAILURE with the
reason when a step fails); a compute node reads the conf-server parameter and execs `elastic-slurm-node-bootstrap`
(assets/bootstrap, installed into the AMI by the Image Builder component), which finds its Slurm node name, writes
slurmd's options (configless) for Slurm's own slurmd.service and starts it, then returns: slurmd is systemd's, with
the unit's limits, Delegate=yes and restarts (assets/systemd/slurmd.service.d), and cloud-init finishes. The plugin's
console scripts are
in /opt/elastic-slurm/bin (links into the /opt/elastic-slurm/venv the component pip-installs the project into).
"""

from __future__ import annotations

import re

from cluster_config.model import Cluster, CustomActions, LoginPool, Pool
from cluster_config.safe_types import PATH_PATTERN
from slurm_plugin.render.manifest import node_names_dir
from stacks.naming import CONF_SERVER_PENDING, directory_parameter

BIN = "/opt/elastic-slurm/bin"
VENV_PYTHON = "/opt/elastic-slurm/venv/bin/python"
ETC = "/etc/elastic-slurm"
# the wait condition handle's pre-signed URL (a capability: readable by root only), written by the user data
SIGNAL_URL_FILE = f"{ETC}/signal-url"

# The mounts parameter's entries ({type, source, mount_point, options}) as `mount_point<TAB>fstab line`. fstab(5): "any
# spaces or tabs within the fields must be escaped using \\040 or \\011" (https://man7.org/linux/man-pages/man5/fstab.5.html);
# libmount reads any backslash and three octal digits back, so backslash, newline, CR and '#' are escaped too and a
# line always has its six fields. The mount point itself (mkdir, mount) must be a plain path (MountPoint's pattern).
# jq: the value (a mount point) is a plain path: PATH_PATTERN, no `.`/`..` component, no newline (jq's `$` matches
# before a final one). The one check of both sinks below: the fstab line and the systemd drop-in.
PLAIN_PATH_JQ = f'(test("{PATH_PATTERN}") and (test("/\\\\.\\\\.?(/|$)") | not) and (contains("\\n") | not))'
FSTAB_JQ = (
    r'def fstab: gsub("\\\\"; "\\134") | gsub(" "; "\\040") | gsub("\t"; "\\011") | gsub("\n"; "\\012")'
    r' | gsub("\r"; "\\015") | gsub("#"; "\\043"); .[]'
    f" | if (.mount_point | {PLAIN_PATH_JQ})"
    ' then . else error("not a plain mount point: \\(.mount_point)") end'
    r' | .mount_point + "\t" + ([if .type == "efs" then .source + ":/" else .source end, .mount_point, .type,'
    r' .options + ",_netdev,nofail", "0", "0"] | map(fstab) | join(" "))'
)

MOUNT_TRIES, MOUNT_RETRY_SECONDS = 12, 10  # the mount loop's tries of each mount, and the wait between them

# The Slurm daemons' units that need every shared file system (slurmd on compute nodes, sackd on login nodes: the
# users' files; slurmctld needs only its StateSaveLocation, config apply's own drop-in), and the mounts parameter's
# mount points as their drop-in's `RequiresMountsFor=` lines (a plain path, the same check as FSTAB_JQ's: no blank,
# '%' specifier or quote reaches systemd).
MOUNT_UNITS = ("slurmd", "sackd")
MOUNTS_FOR_JQ = (
    f"[.[].mount_point | if {PLAIN_PATH_JQ}"
    ' then "RequiresMountsFor=" + . else error("not a plain mount point: \\(.)") end] | join("\\n")'
)
# The boot lines that write that drop-in (run after the mounts; tests/e2e/test_units_real_systemd.py runs them under a
# real systemd): each daemon is started only once every shared file system is mounted.
MOUNT_DEPENDENCIES = [
    "# slurmd and sackd only with every shared file system mounted: the mounts are nofail (a reboot goes on without",
    "# one), and systemd orders a nofail mount before no target (systemd.mount(5)), so after a reboot slurmd could run",
    "# jobs without the users' files. RequiresMountsFor= mounts each first and does not start the daemon when one",
    "# fails (MOUNT_UNITS, MOUNTS_FOR_JQ)",
    f"mounts_for=$(jq -r '{MOUNTS_FOR_JQ}' {ETC}/mounts.json)",
    f"for unit in {' '.join(MOUNT_UNITS)}; do",
    "  install -d /etc/systemd/system/$unit.service.d",
    "  printf '# written by the boot (stacks/user_data.py)\\n[Unit]\\n%s\\n' \"$mounts_for\""
    " > /etc/systemd/system/$unit.service.d/elastic-slurm-mounts.conf",
    "done",
    "systemctl daemon-reload",
]

_PRELUDE = [
    "set -Eeuo pipefail",
    "# the boot's own log (also in cloud-init's output): a failure's reason is taken from its last lines",
    "exec > >(tee -a /run/elastic-slurm-boot.log) 2>&1",
    "es_signal() {  # es_signal SUCCESS|FAILURE REASON: the stack's creation wait condition (no-op without its URL)",
    f"  [ -r {SIGNAL_URL_FILE} ] || return 0",
    '  jq -cn --arg s "$1" --arg r "$2" --arg id "$(hostname -s)" \'{Status: $s, Reason: $r, UniqueId: $id, Data: $r}\''
    f" | curl -fsS -m 20 --retry 3 -X PUT -H 'Content-Type:' --data-binary @- \"$(cat {SIGNAL_URL_FILE})\" >/dev/null"
    ' || echo "elastic-slurm boot: could not send the $1 signal" >&2',
    "}",
    "es_failed() {  # ERR trap: the failing line and command, and the boot log's last lines, to the log and CloudFormation",
    '  trap - ERR; local reason="elastic-slurm boot: FAILED at line $1: $2"',
    '  echo "$reason" >&2; sleep 0.5',
    "  es_signal FAILURE \"$reason | $({ grep -v 'elastic-slurm boot: FAILED' /run/elastic-slurm-boot.log || true; } | tail -n 4"
    " | tr '\\n' ' ' | cut -c1-600)\"",
    "}",
    "trap 'es_failed $LINENO \"$BASH_COMMAND\"' ERR",
    f"install -d -m 0755 {ETC}",
    "set -a; . /etc/elastic-slurm/env; set +a",
    'export AWS_DEFAULT_REGION="$ES_REGION"',
    "# a burst of booting nodes reads the same parameters: retry throttled calls (botocore's standard retry mode)",
    "export AWS_RETRY_MODE=standard AWS_MAX_ATTEMPTS=10",
    "# instance metadata (the node role's credentials) for root (and slurm on controllers) only, on every boot",
    "systemctl enable --now elastic-slurm-imds-guard.service",
    "# munge (the same key on every member of the cluster), the mounts and the controllers' address (the compute",
    "# nodes' conf-server, see _COMPUTE): one process for both reads (slurm_plugin/boot_fetch.py)",
    f'{VENV_PYTHON} -m slurm_plugin.boot_fetch --munge-secret "$ES_MUNGE_SECRET" --munge-key /etc/munge/munge.key'
    f' --parameters "$ES_MOUNTS_PARAMETER" "$ES_CONF_SERVER_PARAMETER" --parameters-out {ETC}/parameters.json',
    "chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key",
    "systemctl restart munge",
    "# shared file systems: in /etc/fstab (_netdev: after the network; nofail: a missing one does not stop a reboot),",
    "# then mounted from there",
    f"jq -r --arg n \"$ES_MOUNTS_PARAMETER\" '.Parameters[] | select(.Name == $n) | .Value' {ETC}/parameters.json"
    f" > {ETC}/mounts.json",
    "# get-parameters lists a missing name under InvalidParameters instead of failing: fail the boot here",
    f'if [ ! -s {ETC}/mounts.json ]; then echo "ParameterNotFound: $ES_MOUNTS_PARAMETER" >&2; false; fi',
    "# (FSTAB_JQ: each line's fields escaped per fstab(5), a mount point that is not a plain path stops the boot)",
    f"jq -r '{FSTAB_JQ}' {ETC}/mounts.json |",
    "while IFS=$'\\t' read -r mount_point line; do",
    '  mkdir -p "$mount_point"',
    "  if ! awk -v m=\"$mount_point\" '$2 == m {found=1} END {exit !found}' /etc/fstab; then",
    "    printf '%s\\n' \"$line\" >> /etc/fstab",
    "  fi",
    "  # EFS resolves a new mount target's DNS name up to 90 s after creating it (a deploy that adds a file system",
    "  # replaces the controllers right after): try for two minutes before failing the boot",
    "  tries=1",
    '  until mountpoint -q "$mount_point" || mount "$mount_point"; do',
    f'    [ "$tries" -lt {MOUNT_TRIES} ] || {{ echo "cannot mount $mount_point" >&2; exit 1; }}',
    f"    tries=$((tries + 1)); sleep {MOUNT_RETRY_SECONDS}",
    "  done",
    "done",
    *MOUNT_DEPENDENCIES,
    "# users and groups from the site's directory (clusters[].directory), if any: sssd (assets/bootstrap)",
    f"{BIN}/elastic-slurm-directory",
    "# Slurm's and elastic-slurm's logs to CloudWatch Logs, also kept on disk (slurm_plugin/log_shipping.py): to the",
    "# log group in the home region ($ES_REGION), also from a node in a remote region",
    "if [ -x /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl ]; then",
    f'  {VENV_PYTHON} -m slurm_plugin.log_shipping --region "$ES_REGION" "$ES_LOG_GROUP" > {ETC}/cloudwatch-agent.json',
    "  /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s"
    f" -c file:{ETC}/cloudwatch-agent.json",
    "fi",
    "# the config's custom actions (ES_ACTIONS), if any: a failing one fails the boot",
    f"{BIN}/elastic-slurm-custom-actions on_node_start",
]

_CONTROLLER = [
    "# a controller replacing another (CloudFormation creates the new instance, then deletes the old one) waits until",
    "# the old one is gone: never two slurmctld on one state directory, never two cluster managers",
    f"{VENV_PYTHON} -m slurm_plugin.predecessor",
    "# config (from the S3 object the config parameter names), instance cache, controller hosts by their Name tags,",
    "# render into /etc/slurm, the conf-server parameter for configless compute nodes, directories, license sync:",
    "# assets/bootstrap/elastic-slurm-config-apply, which slurm-config-sync.timer re-runs when a deploy changes the config",
    f"{BIN}/elastic-slurm-config-apply",
    f"set -a; . {ETC}/facts.env; set +a",
    "es_wait() {  # es_wait SECONDS WHAT COMMAND...: retry COMMAND every 2 s until it succeeds, else fail the boot",
    "  local limit=$1 what=$2; shift 2",
    '  for _ in $(seq $((limit / 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 2; done',
    '  echo "elastic-slurm boot: $what did not answer within ${limit}s" >&2; return 1',
    "}",
    "# slurmdbd (accounting host only): slurmdbd.conf from the database secret, mode 0600, then start it",
    'if [ -n "${ES_DB_SECRET:-}" ] && [ "${ES_CONTROLLER_INDEX:-0}" = 0 ]; then',
    '  (umask 077; aws secretsmanager get-secret-value --secret-id "$ES_DB_SECRET" --query SecretString'
    " --output text > /run/elastic-slurm-db-secret.json)",
    f"  ELASTIC_SLURM_NAMES_CHECKED=1 {BIN}/elastic-slurm render-slurmdbd --config {ETC}/cluster.yaml"
    ' --secret-json /run/elastic-slurm-db-secret.json --dbd-host "$(hostname -s)" --out /etc/slurm/slurmdbd.conf',
    "  rm -f /run/elastic-slurm-db-secret.json",
    "  chown slurm:slurm /etc/slurm/slurmdbd.conf",
    "  systemctl enable --now slurmdbd",
    "  es_wait 600 slurmdbd sacctmgr -n show cluster",
    "  # the config's clusters, federation, accounts, users, QOS and licenses, before slurmctld registers",
    f"  {BIN}/slurm-accounting-apply --desired /etc/slurm/accounting.json",
    'elif [ "$ES_ACCOUNTING_MODE" != none ]; then',
    "  # another controller hosts slurmdbd: wait until it answers and knows this cluster",
    '  es_wait 900 "slurmdbd (cluster $ES_CLUSTER registered)" bash -c'
    " 'sacctmgr -n -P show cluster format=cluster | grep -qx \"$ES_CLUSTER\"'",
    "fi",
    "# wakes the prologs of jobs on booting nodes (assets/systemd/slurm-bootwatch.service), before any job runs",
    "systemctl enable --now slurm-bootwatch.service",
    "systemctl enable --now slurmctld",
    'es_wait 300 "slurmctld on $(hostname -s)" bash -c \'scontrol ping | grep -q "at $(hostname -s) is UP"\'',
    "# two controllers: the primary saves slurmctld's whole state once, for a backup that takes over early",
    f"{BIN}/elastic-slurm-first-state-save",
    "# cluster manager (assets/systemd/slurm-clustermgr.service, Type=notify): started once it has run one cycle",
    "systemctl enable --now slurm-clustermgr.service",
    "# metrics exporter (assets/systemd/slurm-exporter.service)",
    "systemctl enable --now slurm-exporter.service",
    "# long health check schedule (assets/systemd/slurm-longcheck.timer): the primary controller submits it",
    'if [ "${ES_CONTROLLER_INDEX:-0}" = 0 ]; then systemctl enable --now slurm-longcheck.timer; fi',
    "# config updates in place (assets/systemd/slurm-config-sync.timer): no controller is replaced by a config edit",
    "systemctl enable --now slurm-config-sync.timer",
    "# healthy = slurmctld answers, slurmdbd answers (when the cluster keeps accounting), the cluster manager runs;",
    "# then tell CloudFormation (the stack's creation waits for this signal)",
    'if [ "$ES_ACCOUNTING_MODE" != none ]; then es_wait 60 "slurmdbd" sacctmgr -n show cluster; fi',
    'es_wait 60 "the cluster manager" systemctl is-active slurm-clustermgr.service',
    f"{BIN}/elastic-slurm-custom-actions on_node_configured",
    'es_signal SUCCESS "controller $(hostname -s) of $ES_CLUSTER is up"',
    'echo "elastic-slurm boot: controller $(hostname -s) of $ES_CLUSTER is up"',
]

_CONF_SERVER = [
    "# Slurm runs configless: the controllers' addresses are in the conf-server parameter (home region), written by",
    "# their config apply (a node is launched only once a controller runs; bounded wait for a replaced controller)",
    'ELASTIC_SLURM_CONF_SERVER=$(jq -r --arg n "$ES_CONF_SERVER_PARAMETER"'
    f" '.Parameters[] | select(.Name == $n) | .Value' {ETC}/parameters.json)",
    "for _ in $(seq 60); do",
    f'  [ "$ELASTIC_SLURM_CONF_SERVER" != {CONF_SERVER_PENDING} ] && [ -n "$ELASTIC_SLURM_CONF_SERVER" ] && break',
    "  sleep 10",
    '  ELASTIC_SLURM_CONF_SERVER=$(aws ssm get-parameter --name "$ES_CONF_SERVER_PARAMETER" --query Parameter.Value'
    " --output text || echo pending)",
    "done",
    f'if [ "$ELASTIC_SLURM_CONF_SERVER" = {CONF_SERVER_PENDING} ] || [ -z "$ELASTIC_SLURM_CONF_SERVER" ]; then'
    ' echo "elastic-slurm boot: no controller has published its address" >&2; false; fi',  # false: the ERR trap
    'export ELASTIC_SLURM_CONF_SERVER ELASTIC_SLURM_CLUSTER="$ES_CLUSTER"',
]

_COMPUTE = [
    *_CONF_SERVER,
    "# disable_hyperthreading: one thread per core before slurmd starts",
    f'if [ "${{ES_SMT_OFF:-}}" = 1 ]; then {BIN}/elastic-slurm-smt-off; fi',
    f"{BIN}/elastic-slurm-custom-actions on_node_configured",
    "# this instance's Slurm node, its slurmd options, then Slurm's slurmd.service started (the bootstrap returns:",
    "# slurmd is systemd's, not a child of cloud-init)",
    f"exec {BIN}/elastic-slurm-node-bootstrap",
]

_LOGIN = [
    *_CONF_SERVER,
    "# the Slurm clients: sackd fetches the config from slurmctld into /run/slurm/conf (no slurm.conf on disk) and",
    "# slurmctld pushes every reconfigure to it; its unit reads this file (the image's sackd.service drop-in)",
    f'echo "SACKD_OPTIONS=--conf-server $ELASTIC_SLURM_CONF_SERVER" > {ETC}/sackd.env',
    "systemctl enable --now sackd",
    f"{BIN}/elastic-slurm-custom-actions on_node_configured",
    'echo "elastic-slurm boot: login node $(hostname -s) of $ES_CLUSTER is up"',
]
ROLES = {"controller": _CONTROLLER, "compute": _COMPUTE, "login": _LOGIN}


def actions_values(actions: CustomActions) -> dict[str, str]:
    """The user-data value naming a node's custom actions (assets/bootstrap/elastic-slurm-custom-actions reads it):
    base64 of their JSON, so no quoting reaches the env file; nothing when there are none."""
    if actions.empty():
        return {}
    return {"ES_ACTIONS": actions.encoded()}


def pool_values(partition: str, pool: Pool) -> dict[str, str]:
    """The user-data values of one pool's launch template on top of the cluster's: its key, custom actions and
    ES_SMT_OFF=1 when its nodes run one thread per core (disable_hyperthreading)."""
    smt_off = {"ES_SMT_OFF": "1"} if pool.disable_hyperthreading else {}
    return {"ES_POOL": f"{partition}-{pool.name}", **smt_off, **actions_values(pool.custom_actions)}


def directory_values(cluster: Cluster) -> dict[str, str]:
    """The user-data value every node of a cluster with a directory gets: the SSM parameter holding the section
    (assets/bootstrap/elastic-slurm-directory reads it at boot); nothing without one."""
    return {"ES_DIRECTORY_PARAMETER": directory_parameter(cluster.name)} if cluster.directory is not None else {}


def node_names_values(cluster: Cluster) -> dict[str, str]:
    """ES_NODE_NAMES_DIR: where a compute node's bootstrap finds its node name, written by resume
    (slurm_plugin/powersave/node_names.py) on the shared file system."""
    directory = node_names_dir(cluster)
    return {"ES_NODE_NAMES_DIR": directory} if directory else {}


def login_values(pool: LoginPool) -> dict[str, str]:
    """The user-data values of one login pool's launch template on top of the cluster's: its name, custom actions."""
    return {"ES_LOGIN_POOL": pool.name, **actions_values(pool.custom_actions)}


# The env file is read by bash (`set -a; . /etc/elastic-slurm/env`: this user data, elastic-slurm-config-apply and the
# other boot scripts) and by systemd (`EnvironmentFile=` of the plugin's units; the local cloud's systemctl stand-in
# strips the same quotes). Each value is written single-quoted, which both read verbatim: bash's single quotes, and
# systemd's "a single-quoted value ... can contain any character verbatim other than single quote ... No
# backslash-escape sequences are recognized" (systemd.exec(5), EnvironmentFile=:
# https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#EnvironmentFile=). So a value may hold
# anything but a single quote and a control character (newline, CR, NUL, ...), which are refused here.
ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")
_NOT_IN_ENV_VALUE = re.compile(r"['\x00-\x1f\x7f]")
ENV_END = "ES_ENV_END"  # the here-document's delimiter (quoted: the shell expands nothing inside)


def env_file_text(values: dict[str, str]) -> str:
    """The text of /etc/elastic-slurm/env: one `KEY='value'` line per value (ValueError for a value no quoting can
    carry to both bash and systemd: a single quote or a control character)."""
    lines = []
    for key, value in values.items():
        if not ENV_KEY.fullmatch(key):
            raise ValueError(f"{key!r}: not an environment variable name")
        bad = _NOT_IN_ENV_VALUE.search(value)
        if bad:
            raise ValueError(f"{key}: a user-data value may not contain {bad.group()!r} (quote or control character)")
        lines.append(f"{key}='{value}'")
    return "".join(f"{line}\n" for line in lines)


def read_env_file(text: str) -> dict[str, str]:
    """The values of an env file `env_file_text` wrote (its exact inverse)."""
    values = {}
    for line in text.splitlines():
        key, quoted = line.split("=", 1)
        if not (ENV_KEY.fullmatch(key) and len(quoted) >= 2 and quoted[0] == quoted[-1] == "'"):
            raise ValueError(f"not a line of the env file: {line!r}")
        values[key] = quoted[1:-1]
    return values


def env_file(values: dict[str, str]) -> list[str]:
    """Shell lines writing `values` to /etc/elastic-slurm/env (`env_file_text`), through a quoted here-document."""
    text = env_file_text(values)
    # root's only (mode 0600): the boot, the config apply and systemd (EnvironmentFile=) read it as root
    return [
        f"install -d -m 0755 {ETC}",
        f"( umask 077; : >> {ETC}/env ) && chmod 0600 {ETC}/env",
        f"cat >> {ETC}/env <<'{ENV_END}'",
        *text.splitlines(),
        ENV_END,
    ]


def env_values_in(user_data: str) -> dict[str, str]:
    """The env-file values a user data script (`boot_commands` joined by newlines) writes."""
    lines = user_data.splitlines()
    start = lines.index(f"cat >> {ETC}/env <<'{ENV_END}'") + 1
    return read_env_file("\n".join(lines[start : lines.index(ENV_END, start)]))


def boot_commands(role: str, values: dict[str, str], signal_url: str | None = None) -> list[str]:
    """Every user-data line of a `controller`, `compute` or `login` instance; a controller given the `signal_url` of a wait
    condition handle signals it SUCCESS once healthy, or FAILURE with the reason when a boot step fails."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    signal = []
    if signal_url is not None:
        if "'" in signal_url or "\n" in signal_url:
            raise ValueError("signal_url: may not contain quotes or newlines")
        signal = [f"(umask 077; echo '{signal_url}' > {SIGNAL_URL_FILE})"]
    lines = [*env_file({**values, "ES_ROLE": role}), *signal, *_commands(_PRELUDE)]
    return [*lines, *_commands(ROLES[role])]


def _commands(script: list[str]) -> list[str]:
    """The script's lines without its whole-line comments: they explain the steps here, in the source, and would
    spend EC2's 16 KB user-data limit on the instance (the script has no here-document a `#` line could be data of)."""
    return [line for line in script if not line.lstrip().startswith("#")]
