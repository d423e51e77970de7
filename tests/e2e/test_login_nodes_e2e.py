"""Login nodes in the local cloud (cluster_config/examples/local-demo.yaml has one login pool of one node).

What the stacks create (a launch template and an Auto Scaling group, localcloud/instances/login_nodes.py) launches the node in
the emulated EC2; the instance runner boots it with the exact login user data of stacks/user_data.py, signing as the
login role's principal: munge key, mounts, conf server, then Slurm's own sackd unit (with the image's drop-in)
fetches the config. A user logged in there submits with plain `sbatch` (no SLURM_CONF, no slurm.conf on its disk),
the job runs on a compute node the plugin launches, and Slurm records the login node as where it was submitted.
"""

from __future__ import annotations

import pytest

from localcloud.cloud import LocalCloud
from localcloud.instances.login_nodes import group_name, login_nodes, on_login, sbatch_on_login, wait_ready
from tests.e2e.conftest import assert_no_orphans

pytestmark = pytest.mark.e2e


def test_the_auto_scaling_group_launches_the_login_node_and_it_is_no_slurm_node(cloud: LocalCloud) -> None:
    node = wait_ready(cloud)
    assert [n.group for n in login_nodes(cloud)] == [group_name("local", "users")]
    assert node.login_pool == "users"
    # not a compute instance of the plugin, not a Slurm node
    assert node.instance_id not in {i.instance_id for i in cloud.instances()}
    assert node.hostname not in cloud.nodes()
    boot_log = (cloud.layout.log / "instances" / f"{node.instance_id}.log").read_text()
    assert f"elastic-slurm boot: login node {node.hostname} of local is up" in boot_log


def test_the_login_node_runs_sackd_configless_with_no_slurm_conf_on_its_disk(cloud: LocalCloud) -> None:
    node = wait_ready(cloud)
    checks = on_login(cloud, node, ["/bin/sh", "-c", "test ! -e /etc/slurm/slurm.conf && ls /run/slurm/conf"])
    assert checks.returncode == 0, checks.stderr
    assert {"slurm.conf", "slurm-elastic.conf"} <= set(checks.stdout.split())  # what clients read (no cgroup.conf)
    sackd = on_login(cloud, node, ["/bin/sh", "-c", "ps -o user=,args= -C sackd"])
    assert "slurm" in sackd.stdout and "--conf-server" in sackd.stdout, sackd.stdout + sackd.stderr


def test_a_user_on_the_login_node_submits_and_the_job_runs_on_a_launched_node(cloud: LocalCloud) -> None:
    node = wait_ready(cloud)
    job = sbatch_on_login(cloud, node, wrap="echo ran on $SLURMD_NODENAME", user="esuser")
    shown = on_login(cloud, node, ["scontrol", "show", "job", job], user="esuser")
    # slurmctld records where the job was submitted from the connection: the login node's address (on EC2 the VPC's
    # DNS turns it into its ip-a-b-c-d name; the controller here resolves no other machine's name)
    assert f"AllocNode:Sid={node.private_ip}:" in shown.stdout, shown.stdout
    queue = on_login(cloud, node, ["squeue", "-h", "-j", job, "-o", "%u"], user="esuser")
    assert queue.stdout.strip() in ("esuser", ""), queue.stdout  # listed until it ends
    (record,) = cloud.wait_jobs_done([job], timeout=180)
    assert record.state == "COMPLETED"
    # on a compute node the plugin launched for it: an instance of its pool in EC2, none left without a node, and
    # the login node still the group's one live login instance
    assert (cloud.layout.jobs / f"{job}.out").read_text().strip() == f"ran on {record.nodes}"
    assert record.nodes.startswith("cpu-")
    assert {i.pool for i in cloud.instances()} & {"cpu-small", "cpu-big"}
    assert_no_orphans(cloud)
    assert [n.instance_id for n in login_nodes(cloud)] == [node.instance_id]
