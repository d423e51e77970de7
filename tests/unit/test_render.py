"""render_cluster: exact slurm.conf lines for a small config, sizing, weights, overlays and the manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster_config import ElasticSlurmConfig, load, parse
from slurm_plugin.instance_cache import CacheError
from slurm_plugin.manifest import DeployedInfra
from slurm_plugin.render.cluster import RenderError, RenderOptions, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from slurm_plugin.render.nodes import real_memory_mib
from tests.unit.cache_fixture import fixture_cache

EXAMPLES = sorted((Path(__file__).parents[2] / "cluster_config" / "examples").glob("*.yaml"))


def small_config(**cluster_overrides: Any) -> ElasticSlurmConfig:
    cluster: dict[str, Any] = {
        "name": "small",
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "availability_zones": ["us-east-1a", "us-east-1b"]},
        "partitions": [
            {
                "name": "cpu",
                "default": True,
                "pools": [
                    {"name": "c7i", "instance_types": ["c7i.large"], "min_nodes": 1, "max_nodes": 4},
                    {
                        "name": "spot",
                        "instance_types": ["c7i.xlarge", "c6i.xlarge"],
                        "purchase_option": "spot",
                        "max_nodes": 3,
                        "features": ["fast"],
                    },
                ],
            },
            {
                "name": "gpu",
                "max_time": "1-00:00:00",
                "priority_tier": 5,
                "pools": [{"name": "g5", "instance_types": ["g5.12xlarge"], "max_nodes": 2, "gpu": {}}],
            },
        ],
        "slurm": {"resume_timeout": 300, "suspend_time": 60, "suspend_timeout": 30},
        "preemption": {"type": "partition_priority", "mode": "requeue", "grace_time": 30},
        "tags": {"team": "hpc"},
    }
    cluster.update(cluster_overrides)
    return parse({"clusters": [cluster], "tags": {"project": "x"}}, "small.yaml")


def render_small(options: RenderOptions | None = None, **overrides: Any) -> Any:
    config = small_config(**overrides)
    return render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache(), options)


def test_small_config_power_save_fragment_is_exact() -> None:
    assert render_small().fragments["power_save"].splitlines() == [
        "# ---- power saving: nodes are EC2 instances launched and terminated by the elastic-slurm plugin",
        "ResumeProgram=/opt/elastic-slurm/bin/slurm-resume",
        "SuspendProgram=/opt/elastic-slurm/bin/slurm-suspend",
        "ResumeFailProgram=/opt/elastic-slurm/bin/slurm-resume-fail",
        "ResumeTimeout=300",
        "SuspendTime=60",
        "SuspendTimeout=30",
        "ResumeRate=0",
        "SuspendRate=0",
        "TreeWidth=65533",
        "# nodes get NodeAddr/NodeHostname from the plugin (scontrol update), so no cloud_dns",
        "SlurmctldParameters=idle_on_node_suspend,power_save_interval=1",
        "ReturnToService=2",
        "# starts jobs on freshly booted nodes at once instead of at slurmctld's next 30 s pass; no PrologFlags",
        "PrologSlurmctld=/opt/elastic-slurm/bin/prolog-wait-for-boot.sh",
        "# always-on nodes (min_nodes of each pool) are never powered down",
        "SuspendExcNodes=cpu-c7i-1",
        "GresTypes=gpu",
    ]


def test_small_config_node_lines_are_exact() -> None:
    lines = [line for line in render_small().fragments["nodes"].splitlines() if not line.startswith("#")]
    assert lines == [
        # the core layout from the cache (DefaultCores, DefaultThreadsPerCore): CR_Core allocates whole cores
        "NodeName=cpu-c7i-[1-4] CPUs=2 Sockets=1 CoresPerSocket=1 ThreadsPerCore=2 RealMemory=3584 "
        "Features=c7i,cpu-c7i,x86_64,ondemand Weight=89 State=CLOUD",
        "NodeName=cpu-spot-[1-3] CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=7680 "
        "Features=cpu-spot,x86_64,spot,fast Weight=54 State=CLOUD",
        "NodeName=gpu-g5-[1-2] CPUs=48 Sockets=1 CoresPerSocket=24 ThreadsPerCore=2 RealMemory=186777 Gres=gpu:4 "
        "Features=g5,gpu-g5,x86_64,ondemand Weight=5672 State=CLOUD",
    ]


def test_small_config_partition_lines_are_exact() -> None:
    assert render_small().fragments["partitions"].splitlines() == [
        "# ---- partitions",
        "# a job no partition it names could ever run (too many nodes, CPUs, memory or time) is refused at submit",
        "EnforcePartLimits=ANY",
        "NodeSet=cpu_c7i Nodes=cpu-c7i-[1-4]",
        "NodeSet=cpu_spot Nodes=cpu-spot-[1-3]",
        "NodeSet=gpu_g5 Nodes=gpu-g5-[1-2]",
        "# DefMemPerCPU: a job without --mem gets this much per CPU (the smallest node's share), so jobs share nodes",
        # cpu: c7i.large 2 CPUs, 4096 - 512 MiB → 1792 per CPU (spot: 4 CPUs, 7680 MiB → 1920); gpu: 186777 / 48
        "PartitionName=cpu Nodes=cpu_c7i,cpu_spot Default=YES MaxTime=INFINITE PriorityTier=1 DefMemPerCPU=1792 "
        "State=UP GraceTime=30",
        "PartitionName=gpu Nodes=gpu_g5 Default=NO MaxTime=1-00:00:00 PriorityTier=5 DefMemPerCPU=3891 State=UP "
        "GraceTime=30",
    ]


def test_small_config_preemption_and_gres_conf() -> None:
    rendered = render_small()
    assert rendered.fragments["preemption"].splitlines()[1:] == [
        "PreemptType=preempt/partition_prio",
        "PreemptMode=REQUEUE",
    ]
    assert rendered.gres_conf is not None
    assert rendered.gres_conf.splitlines()[1:] == ["NodeName=gpu-g5-[1-2] Name=gpu File=/dev/nvidia[0-3]"]


def test_pool_of_several_types_is_sized_by_the_smallest_and_says_so() -> None:
    config = small_config(
        partitions=[
            {"name": "cpu", "pools": [{"name": "mix", "instance_types": ["m7i.2xlarge", "c7i.xlarge"], "max_nodes": 2}]}
        ]
    )
    rendered = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())
    nodes = rendered.fragments["nodes"]
    assert "NodeName=cpu-mix-[1-2] CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=7680 " in nodes
    assert "SMALLEST" in nodes
    # m7i and c7i: no family feature, since a constraint must hold whatever launches
    assert "Features=cpu-mix,x86_64,ondemand " in nodes


def test_spot_pool_weighs_less_than_the_same_type_on_demand() -> None:
    pools = [
        {"name": "od", "instance_types": ["c7i.xlarge"], "max_nodes": 1},
        {"name": "sp", "instance_types": ["c7i.xlarge"], "purchase_option": "spot_then_on_demand", "max_nodes": 1},
    ]
    config = small_config(partitions=[{"name": "cpu", "pools": pools}])
    for cache in (fixture_cache(), fixture_cache(on_demand=False, spot=False)):
        rendered = render_cluster(config, "small", placeholder_infra(config.cluster("small")), cache)
        weights = {p.pool: p for p in _pool_weights(rendered.fragments["nodes"])}
        assert weights["sp"].weight < weights["od"].weight


def test_without_prices_weight_falls_back_to_vcpus() -> None:
    config = small_config()
    cache = fixture_cache(on_demand=False, spot=False)
    rendered = render_cluster(config, "small", placeholder_infra(config.cluster("small")), cache)
    nodes = rendered.fragments["nodes"]
    assert " RealMemory=3584 Features=c7i,cpu-c7i,x86_64,ondemand Weight=100 " in nodes
    assert "weight from vCPU estimate (on-demand)" in nodes


def test_weight_set_in_config_wins_over_price() -> None:
    config = small_config(
        partitions=[
            {"name": "cpu", "pools": [{"name": "a", "instance_types": ["c7i.large"], "max_nodes": 1, "weight": 7}]}
        ]
    )
    rendered = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())
    assert "Weight=7 State=CLOUD" in rendered.fragments["nodes"]


def test_port_overlay_gives_each_node_its_own_port() -> None:
    rendered = render_small(RenderOptions(slurmd_port_base=17000))
    lines = [line for line in rendered.fragments["nodes"].splitlines() if line.startswith("NodeName=")]
    assert len(lines) == 4 + 3 + 2
    assert lines[0].startswith("NodeName=cpu-c7i-1 Port=17000 CPUs=2 ")
    assert lines[-1].startswith("NodeName=gpu-g5-2 Port=17008 CPUs=48 ")
    assert rendered.node_ports["cpu-spot-1"] == 17004
    assert len(set(rendered.node_ports.values())) == 9


def test_port_overlay_that_runs_past_65535_is_refused() -> None:
    with pytest.raises(RenderError, match="slurmd_port_base"):
        render_small(RenderOptions(slurmd_port_base=65530))


def test_local_cloud_paths_reach_conf_manifest_and_prolog_env() -> None:
    options = RenderOptions(
        resume_program="/lc/bin/resume",
        suspend_program="/lc/bin/suspend",
        resume_fail_program="/lc/bin/resume-fail",
        prolog_program="/lc/bin/prolog",
        state_dir="/lc/state",
        log_file="/lc/log/plugin.log",
        instance_cache_path="/lc/cache.json",
        slurm_bin_dir="/usr/bin",
        slurm_conf="/lc/etc/slurm.conf",
    )
    config = small_config()
    infra = placeholder_infra(config.cluster("small")).model_copy(update={"aws_endpoint_url": "http://127.0.0.1:5000"})
    rendered = render_cluster(config, "small", infra, fixture_cache(), options)
    conf = rendered.slurm_conf
    assert "ResumeProgram=/lc/bin/resume\n" in conf
    assert "PrologSlurmctld=/lc/bin/prolog\n" in conf
    manifest = rendered.manifest
    assert (manifest.state_dir, manifest.log_file, manifest.instance_cache_path) == (
        "/lc/state",
        "/lc/log/plugin.log",
        "/lc/cache.json",
    )
    assert manifest.aws_endpoint_url == "http://127.0.0.1:5000"
    assert manifest.slurm_conf == "/lc/etc/slurm.conf"
    assert rendered.prolog_env.splitlines()[1:] == [
        "SLURM_BIN_DIR=/usr/bin",
        "SLURM_CONF=/lc/etc/slurm.conf",
        "WAIT_LIMIT=300",
        "# the controller's boot watch (slurm_plugin/bootwatch.py) wakes the prolog when the job's nodes are up",
        "BOOTWATCH_DIR=/run/elastic-slurm-bootwatch",
        "PROLOG_LOG=/var/log/elastic-slurm/prolog.log",
    ]


def test_no_prolog_when_disabled() -> None:
    assert "PrologSlurmctld" not in render_small(RenderOptions(prolog_program=None)).slurm_conf


def test_manifest_lists_pools_with_locations_in_priority_order() -> None:
    manifest = render_small().manifest
    assert [p.key for p in manifest.pools] == ["cpu-c7i", "cpu-spot", "gpu-g5"]
    spot = manifest.pools[1]
    assert (spot.node_prefix, spot.min_nodes, spot.max_nodes, spot.purchase_option) == ("cpu-spot-", 0, 3, "spot")
    assert spot.instance_types == ["c7i.xlarge", "c6i.xlarge"]
    assert [loc.availability_zone for loc in spot.locations] == ["us-east-1a", "us-east-1b"]
    assert spot.locations[0].subnet_id == "subnet-PLACEHOLDER-us-east-1a"
    assert spot.locations[0].launch_template_id == "lt-PLACEHOLDER-cpu-spot-us-east-1"
    assert manifest.tags == {"project": "x", "team": "hpc"}
    assert manifest.pool_of_node("cpu-spot-3") == spot
    assert {p.resume_timeout for p in manifest.pools} == {300}  # the manager's ResumeTimeout, per pool


def test_manifest_names_the_azs_where_ec2_does_not_offer_a_type() -> None:
    config = small_config()
    cache = fixture_cache()
    east = dict(cache.regions["us-east-1"])
    east["c6i.xlarge"] = east["c6i.xlarge"].model_copy(update={"availability_zones": ["us-east-1b", "us-east-1c"]})
    east["c7i.xlarge"] = east["c7i.xlarge"].model_copy(update={"availability_zones": ["us-east-1a", "us-east-1b"]})
    cache = cache.model_copy(update={"regions": {**cache.regions, "us-east-1": east}})
    manifest = render_cluster(config, "small", placeholder_infra(config.cluster("small")), cache).manifest
    assert {p.key: p.not_offered for p in manifest.pools} == {
        "cpu-c7i": {},  # the fixture records no AZs for it: every AZ assumed
        "cpu-spot": {"c6i.xlarge": ["us-east-1a"]},
        "gpu-g5": {},
    }


def test_manifest_uses_real_infra_ids() -> None:
    config = small_config()
    infra = DeployedInfra(
        subnets={"us-east-1a": "subnet-0aaa", "us-east-1b": "subnet-0bbb"},
        launch_templates={f"{k}@us-east-1": f"lt-{k}" for k in ("cpu-c7i", "cpu-spot", "gpu-g5")},
    )
    manifest = render_cluster(config, "small", infra, fixture_cache()).manifest
    assert manifest.pools[0].locations[1].subnet_id == "subnet-0bbb"
    assert manifest.pools[2].locations[0].launch_template_id == "lt-gpu-g5"


def test_infra_without_a_launch_template_is_a_one_line_error() -> None:
    config = small_config()
    infra = DeployedInfra(subnets={"us-east-1a": "subnet-0aaa", "us-east-1b": "subnet-0bbb"}, launch_templates={})
    with pytest.raises(RenderError, match="no launch template 'cpu-c7i@us-east-1'"):
        render_cluster(config, "small", infra, fixture_cache())


def test_cache_without_a_config_type_is_reported_as_stale() -> None:
    cache = fixture_cache()
    trimmed = cache.model_copy(
        update={"regions": {r: {t: i for t, i in e.items() if t != "g5.12xlarge"} for r, e in cache.regions.items()}}
    )
    config = small_config()
    with pytest.raises(CacheError, match=r"no g5\.12xlarge in us-east-1.*instance-cache refresh"):
        render_cluster(config, "small", placeholder_infra(config.cluster("small")), trimmed)


def test_unknown_cluster_name_is_a_one_line_error() -> None:
    config = small_config()
    with pytest.raises(RenderError, match="no cluster 'nope'"):
        render_cluster(config, "nope", placeholder_infra(config.cluster("small")), fixture_cache())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_cluster_renders(path: Path) -> None:
    config = load(path)
    for cluster in config.clusters:
        rendered = render_cluster(config, cluster.name, placeholder_infra(cluster), fixture_cache())
        conf = rendered.slurm_conf
        pools = [pool for part in cluster.partitions for pool in part.pools]
        assert conf.count("\nNodeName=") == len(pools)
        assert conf.count("\nPartitionName=") == len(cluster.partitions)
        assert "State=CLOUD" in conf and "cloud_dns" not in conf.replace("no cloud_dns", "")
        assert len(rendered.manifest.pools) == len(pools)


def test_federation_example_notes_remote_licenses_without_a_licenses_line() -> None:
    config = load(next(p for p in EXAMPLES if p.stem == "federation"))
    conf = render_cluster(config, "west", placeholder_infra(config.cluster("west")), fixture_cache()).slurm_conf
    assert "Licenses=" not in conf.replace("no Licenses=", "")
    assert "#   vcs: 50 total, 40% for this cluster (flexlm)" in conf
    assert "arm64" in conf


class _PoolWeight:
    def __init__(self, line: str) -> None:
        fields = dict(part.split("=", 1) for part in line.split())
        self.pool = fields["NodeName"].split("-")[1]
        self.weight = int(fields["Weight"])


def _pool_weights(nodes: str) -> list[_PoolWeight]:
    return [_PoolWeight(line) for line in nodes.splitlines() if line.startswith("NodeName=")]


@pytest.mark.parametrize(
    ("nominal", "real"),
    [
        (512, 384),  # t4g.nano: a quarter kept back
        (1024, 768),
        (4096, 3584),  # 512 MiB kept back up to 10 GiB
        (8192, 7680),
        (65536, 62259),  # 5%: m5.4xlarge measured 63622 MiB (2.9% less than nominal)
        (786432, 747110),
    ],
)
def test_real_memory_keeps_a_reserve_below_what_the_kernel_reports(nominal: int, real: int) -> None:
    assert real_memory_mib(nominal) == real
