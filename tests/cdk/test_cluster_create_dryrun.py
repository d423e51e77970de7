"""`elastic-slurm cluster create --dryrun` lists what the session's real synth of minimal.yaml holds: every
`es-minimal-*` stack with its resource count (the same cloud assembly `cdk deploy` would deploy)."""

from __future__ import annotations

import pytest

from elastic_slurm.commands.cluster_cmd import dryrun_lines
from elastic_slurm.lifecycle.assembly import stacks_of
from stacks.naming import stack_name
from tests.cdk.conftest import Assembly

pytestmark = pytest.mark.cdk


def test_create_dryrun_lists_every_stack_of_the_synth(assemblies: dict[str, Assembly]) -> None:
    assembly = assemblies["minimal"]
    assert assembly.returncode == 0, assembly.output[-3000:]
    stacks = stacks_of(assembly.outdir)
    assert {s.name for s in stacks} == set(assembly.templates)
    assert {stack_name("minimal", p) for p in ("network", "storage", "images", "cluster", "accounting")} <= {
        s.name for s in stacks
    }
    for stack in stacks:
        assert stack.region == "us-east-1"
        assert stack.resources == len(assembly.template_json(stack.name)["Resources"]) > 0
    lines = dryrun_lines("minimal.yaml", stacks)
    assert lines[0] == f"minimal.yaml: valid; `cluster create` would create {len(stacks)} stack(s):"
    assert lines[-1] == f"  {sum(s.resources for s in stacks)} resources in all"
    # dependencies first: the cluster stack comes after the stacks it depends on
    order = [s.name for s in stacks]
    artifacts = assembly.manifest()["artifacts"]
    for name in order:
        for dependency in artifacts[name].get("dependencies", []):
            if dependency in order:
                assert order.index(dependency) < order.index(name), (dependency, name)
